package bench

import (
	"os"
	"regexp"
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
		s.Workloads[1].Kind.(*TreeWorkload).Dirs != 1 || s.Workloads[2].Kind.(*CatWorkload).Times != 1 {
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
		{"repetitons: 3\n", `test, line 1: the bench has no key "repetitons": did you mean repetitions?`},
		{"configurations:\n  - name: a\n    natve: true\n", `test, line 3: configuration "a" has no key "natve": did you mean native?`},
		{"configurations:\n  - natve: true\n", `test, line 2: configuration 1 has no key "natve": did you mean native?`},
		{"workloads:\n  - name: k\n    cat: {size: 1m, tims: 5}\n", `test, line 3: workload "k"'s cat has no key "tims": did you mean times?`},
		{"workloads:\n  - name: k\n    cat: {size: 1m, times: five}\n", `test, line 3: workload "k"'s cat's times is "five", not a whole number, such as 5`},
		{"workloads:\n  - name: k\n    zork: 1\n", `test, line 3: workload "k" has no key "zork": give one of calls, cat, coherence, fio`},
		{"repetitions: lots\n", `test, line 1: repetitions is "lots", not a whole number, such as 5`},
		{"repetitions: 2.5\n", `test, line 1: repetitions is "2.5", not a whole number`},
		{"seed: -1\n", `test, line 1: seed is "-1", not a whole number of 0 or more`},
		{"remount: maybe\n", `test, line 1: remount is "maybe", not true or false`},
		{"configurations: {name: a}\n", `test, line 1: configurations is a mapping, not a list`},
		{"configurations:\n  - name: a\n    labfs: --preset default\n", `test, line 3: configuration "a"'s labfs is "--preset default", not a list`},
		{"published:\n  - {workload: w, ratio: half}\n", `test, line 2: published figure 1's ratio is "half", not a number`},
		{"workloads:\n  - name: r\n    fio: {rw: [read]}\n", `test, line 3: workload "r"'s fio option rw is a list, not a single value`},
		{"budget: soon\n", `test, line 1: budget is "soon", not a duration: give one such as 90s or 10m`},
		{"notjson\n", `test, line 1: a bench file is a YAML mapping of keys`},
		{`{"schema": "fusescope.record/v2", "meta": {}}`, "test, line 1: this is a fusescope record, not a bench file"},
		{"configurations:\n  - name: a\n   native: true\n", "test, line 1: not YAML the bench can read (did not find expected '-' indicator): check the indentation"},
		{"", "empty"},
		{"workloads: [{name: w, shell: {run: x}}]\n", "at least one configuration"},
		{"configurations: [{name: a, native: true, mount: 'x {mnt}'}]\nworkloads: [{name: w, shell: {run: x}}]\n", "exactly one of native"},
		{"configurations: [{name: a, mount: 'x {src}'}]\nworkloads: [{name: w, shell: {run: x}}]\n", "has no {mnt}"},
		{"configurations: [{name: a, native: true}, {name: a, native: true}]\nworkloads: [{name: w, shell: {run: x}}]\n", "named twice"},
		{"configurations: [{name: a, native: true}]\nworkloads: [{name: w}]\n", "exactly one of cat, coherence, fio, git_status, shell, smallfiles"},
		{"configurations: [{name: a, native: true}]\nworkloads: [{name: w, cat: {size: 1m}, tree: {files: 1}}]\n", "exactly one of cat"},
		{"configurations: [{name: a, native: true}]\nworkloads: [{name: w, fio: {rw: read}}]\n", "give size"},
		{"configurations: [{name: a, native: true}]\nworkloads: [{name: w, fio: {filename: x, size: 1m}}]\n", "filename is the bench's"},
		{"configurations: [{name: a, native: true}]\nworkloads: [{name: w, cat: {size: lots}}]\n", `"lots" is not a size`},
		{"configurations: [{name: a, native: true}]\nworkloads: [{name: w, shell: {run: x, metric: 'no group'}}]\n", "one group"},
		{"baseline: z\nconfigurations: [{name: a, native: true}]\nworkloads: [{name: w, shell: {run: x}}]\n", `baseline "z"`},
		{"order: sorted\nconfigurations: [{name: a, native: true}]\nworkloads: [{name: w, shell: {run: x}}]\n", "random or rotate"},
		{"configurations: [{name: a, labfs: [--preset, default], io_uring: true}]\nworkloads: [{name: w, shell: {run: x}}]\n", "io_uring is for a mount"},
		{"configurations: [{name: a, mount: 'x {mnt}', io_uring: maybe}]\nworkloads: [{name: w, shell: {run: x}}]\n", `io_uring is "maybe", not true or false`},
	} {
		_, err := Parse(strings.NewReader(c.yaml), "test")
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") ||
			goType.MatchString(err.Error()) || strings.Contains(err.Error(), "!!") || strings.Contains(err.Error(), "unmarshal") {
			t.Errorf("%q: %v, want one line with %q", c.yaml, err, c.want)
		}
	}
}

// goType is a Go type's name in a message (bench.Spec).
var goType = regexp.MustCompile(`\bbench\.[A-Z]`)

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

// --config and --workload drop the published figures of what they leave
// out, so that a preset filtered to one workload or configuration runs
// (seed 004's passthrough_hp on write was refused as "no such workload").
func TestOnlyDropsPublishedFigures(t *testing.T) {
	for _, c := range []struct {
		preset             string
		configs, workloads []string
		published          int
	}{
		{"passthrough", nil, []string{"read"}, 3},
		{"passthrough", []string{"labfs"}, nil, 0},
		{"passthrough", []string{"labfs-passthrough"}, []string{"write"}, 1},
		{"writeback", nil, []string{"write-4k"}, 1},
	} {
		s, err := LoadPreset(c.preset)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Only(c.configs, c.workloads); err != nil {
			t.Fatalf("%s %v %v: %v", c.preset, c.configs, c.workloads, err)
		}
		if err := Check(s); err != nil {
			t.Errorf("%s --config %v --workload %v: %v", c.preset, c.configs, c.workloads, err)
		}
		if len(s.Published) != c.published {
			t.Errorf("%s --config %v --workload %v: %d published figures kept, want %d", c.preset, c.configs, c.workloads, len(s.Published), c.published)
		}
	}
}

// --list-presets gives each preset's first sentence whole, wrapped between
// words (it was cut at 100 characters, mid-word).
func TestWritePresetList(t *testing.T) {
	var b strings.Builder
	if err := WritePresetList(&b, 80); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if len(line) > 80 {
			t.Errorf("a line of %d columns: %q", len(line), line)
		}
	}
	listed := strings.Join(strings.Fields(out), " ")
	for _, name := range Presets() {
		s, _ := LoadPreset(name)
		sentence := strings.Join(strings.Fields(s.Description), " ")
		if i := strings.Index(sentence, ". "); i > 0 {
			sentence = sentence[:i+1]
		}
		if !strings.Contains(listed, name+" "+sentence) {
			t.Errorf("preset %s: the list lacks its first sentence whole: %q", name, sentence)
		}
	}
}

// docs/bench.md's preset table has a row for every preset (everyday had
// none), and the README says how to build the peers the presets compare.
func TestDocsNameEveryPreset(t *testing.T) {
	doc, err := os.ReadFile("../../docs/bench.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range Presets() {
		if !strings.Contains(string(doc), "\n| `"+name+"` |") {
			t.Errorf("docs/bench.md's preset table has no row for %s", name)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "make peers") {
		t.Error("README.md never mentions make peers, which builds the presets' peers")
	}
}
