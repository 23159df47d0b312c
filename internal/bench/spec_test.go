package bench

import (
	"strings"
	"testing"
)

// Every preset parses and names the figures it reproduces correctly.
func TestPresetsParse(t *testing.T) {
	if len(Presets()) < 3 {
		t.Fatalf("presets: %v", Presets())
	}
	for _, name := range Presets() {
		s, err := LoadPreset(name)
		if err != nil {
			t.Errorf("preset %s: %v", name, err)
			continue
		}
		if s.Name != name || s.Description == "" || s.Repetitions < 3 {
			t.Errorf("preset %s: name %q, %d repetitions, description %q", name, s.Name, s.Repetitions, s.Description)
		}
	}
	if _, err := LoadPreset("nope"); err == nil || !strings.Contains(err.Error(), "quick") {
		t.Errorf("an unknown preset: %v, want the list", err)
	}
}

func TestParseDefaults(t *testing.T) {
	s, err := Parse(strings.NewReader(`
configurations:
  - {name: a, native: true}
  - {name: b, labfs: [--preset, nocache]}
  - {name: c, mount: "bindfs {src} {mnt}"}
workloads:
  - {name: r, fio: {rw: read, size: 8m}}
  - {name: t, tree: {files: 10}}
  - {name: k, cat: {size: 1m}}
  - {name: s, shell: {run: "true"}}
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	if s.Repetitions != DefaultRepetitions || s.Order != "random" || s.Scratch != "ext4" || s.Baseline != "a" ||
		s.Workloads[1].Tree.Dirs != 1 || s.Workloads[2].Cat.Times != 1 {
		t.Errorf("defaults not filled in: %+v", s)
	}
	if err := s.Only([]string{"c"}, []string{"t"}); err != nil || len(s.Configurations) != 2 || len(s.Workloads) != 1 {
		t.Errorf("Only(c, t): %v, %d configurations (want c and the baseline), %d workloads", err, len(s.Configurations), len(s.Workloads))
	}
}

// Bad input gets one line that names the problem, with the YAML line
// where there is one.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"repetitons: 3\n", "test, line 1: key repetitons not found"},
		{"configurations:\n  - name: a\n    natve: true\n", "test, line 3: key natve not found"},
		{"repetitions: lots\n", "test, line 1: cannot unmarshal"},
		{"budget: soon\n", `line 1: "soon" is not a duration`},
		{"", "empty"},
		{"workloads: [{name: w, shell: {run: x}}]\n", "at least one configuration"},
		{"configurations: [{name: a, native: true, mount: 'x {mnt}'}]\nworkloads: [{name: w, shell: {run: x}}]\n", "exactly one of native"},
		{"configurations: [{name: a, mount: 'x {src}'}]\nworkloads: [{name: w, shell: {run: x}}]\n", "has no {mnt}"},
		{"configurations: [{name: a, native: true}, {name: a, native: true}]\nworkloads: [{name: w, shell: {run: x}}]\n", "named twice"},
		{"configurations: [{name: a, native: true}]\nworkloads: [{name: w}]\n", "exactly one of fio"},
		{"configurations: [{name: a, native: true}]\nworkloads: [{name: w, fio: {rw: read}}]\n", "give size"},
		{"configurations: [{name: a, native: true}]\nworkloads: [{name: w, fio: {filename: x, size: 1m}}]\n", "filename is the bench's"},
		{"configurations: [{name: a, native: true}]\nworkloads: [{name: w, cat: {size: lots}}]\n", `"lots" is not a size`},
		{"configurations: [{name: a, native: true}]\nworkloads: [{name: w, shell: {run: x, metric: 'no group'}}]\n", "one group"},
		{"baseline: z\nconfigurations: [{name: a, native: true}]\nworkloads: [{name: w, shell: {run: x}}]\n", `baseline "z"`},
		{"order: sorted\nconfigurations: [{name: a, native: true}]\nworkloads: [{name: w, shell: {run: x}}]\n", "random or rotate"},
	} {
		_, err := Parse(strings.NewReader(c.yaml), "test")
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "bench.") {
			t.Errorf("%q: %v, want one line with %q", c.yaml, err, c.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"4096": 4096, "64m": 64 << 20, "1G": 1 << 30, "2MiB": 2 << 20, "8k": 8192} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "m", "-1m", "1.5g", "12x", "0"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, p := range Presets() {
		b, _ := PresetYAML(p)
		f.Add(string(b))
	}
	f.Add("configurations: [{name: a, native: true}]\nworkloads: [{name: w, shell: {run: x}}]\n")
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := Parse(strings.NewReader(s), "fuzz")
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a message of several lines: %q", err)
			}
			return
		}
		if spec.Repetitions < 1 || len(spec.Configurations) == 0 || len(spec.Workloads) == 0 || spec.Baseline == "" {
			t.Fatalf("accepted an incomplete bench: %+v", spec)
		}
	})
}
