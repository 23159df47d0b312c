package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/profile"
)

// echoWorkload is a kind registered here alone: it lays out a file of
// Lines lines in the source and counts them in each configuration.
type echoWorkload struct {
	Lines int `yaml:"lines"`
}

func init() { registerKind("test_echo", func() WorkloadKind { return new(echoWorkload) }) }

func (e *echoWorkload) check() error {
	if e.Lines < 1 {
		return errors.New("test_echo: give lines as a positive number")
	}
	return nil
}

func (e *echoWorkload) scale(f float64) { e.Lines = scaleCount(e.Lines, f) }

func (e *echoWorkload) layout(w *Workload, src string) error {
	return os.WriteFile(readFile(src, w), []byte(strings.Repeat("line\n", e.Lines)), 0o644)
}

func (e *echoWorkload) run(w *Workload, env runEnv) ([]profile.BenchMetric, error) {
	b, err := os.ReadFile(readFile(env.dir, w))
	if err != nil {
		return nil, err
	}
	return []profile.BenchMetric{{Name: "lines", Unit: "lines", Value: float64(strings.Count(string(b), "\n"))}}, nil
}

// A kind registered in a file of its own is all a new workload needs: the
// YAML key is known (its own keys too, with the bench's one-line errors),
// and the bench lays it out, scales it and runs it.
func TestRegisteredKindIsAllANewWorkloadNeeds(t *testing.T) {
	spec, err := Parse(strings.NewReader(`
repetitions: 2
scratch: tmp
drop_caches: false
trace: false
configurations: [{name: here, native: true}]
workloads:
  - {name: e, test_echo: {lines: 3}}
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.Scale(2); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), spec, Options{ScratchDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 {
		t.Fatalf("%d runs, want 2: %+v", len(rep.Runs), rep.Notes)
	}
	for _, run := range rep.Runs {
		if run.Error != "" || len(run.Metrics) != 1 || run.Metrics[0].Value != 6 {
			t.Errorf("run %+v: want 6 lines (3, scaled by 2)", run)
		}
	}
	for yaml, want := range map[string]string{
		"workloads:\n  - name: e\n    test_echo: {lins: 3}\n":                                        `test, line 3: workload "e"'s test_echo has no key "lins": did you mean lines?`,
		"configurations: [{name: a, native: true}]\nworkloads: [{name: e, test_echo: {lines: 0}}]\n": `workload "e": test_echo: give lines as a positive number`,
		"workloads:\n  - name: e\n    zork: 1\n":                                                     "give one of calls, cat, coherence, fio, git_status, name, requests, shell, smallfiles, test_echo, tree, untar, walk",
	} {
		if _, err := Parse(strings.NewReader(yaml), "test"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", yaml, err, want)
		}
	}
}

// Every kind's key is registered once, with a kind whose YAML keys yamlcheck
// walks; the file that registers it is named after it.
func TestEveryKindHasItsFile(t *testing.T) {
	for _, key := range kindKeys() {
		if key == "test_echo" {
			continue
		}
		file := strings.ReplaceAll(key, "_", "") + ".go"
		b, err := os.ReadFile(filepath.Join(".", file))
		if err != nil || !strings.Contains(string(b), `registerKind("`+key+`"`) {
			t.Errorf("kind %s: %s does not register it (%v)", key, file, err)
		}
	}
}
