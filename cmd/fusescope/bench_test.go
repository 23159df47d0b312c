package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/fusescope/fusescope/internal/bench"
)

// benchRequest is what bench's flags ask for, validated (nothing runs).
func benchRequest(t *testing.T, args ...string) (bench.Request, error) {
	t.Helper()
	o := &benchOptions{}
	f := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	o.bind(f)
	if err := f.Parse(args); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	o.changed = f.Changed
	if rest := f.Args(); len(rest) == 1 {
		o.file = rest[0]
	}
	err := o.validate()
	return o.req, err
}

// bench's flags map to one request (a source, the settings over the
// bench's, what to keep) and nothing else; bad combinations are one
// sentence naming the flags.
func TestBenchOptions(t *testing.T) {
	r, err := benchRequest(t, "--native", "--fio", "seq=rw=read,bs=1m,size=8m", "--shell", "t=true", "-n", "3", "--remount", "--scale", "2")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Quick.Configurations) != 1 || len(r.Quick.Workloads) != 2 || r.Overrides.Repetitions == nil || *r.Overrides.Repetitions != 3 ||
		!r.Overrides.Remount || r.Overrides.Scale != 2 || r.Overrides.Warmup != nil {
		t.Fatalf("request %+v", r)
	}
	spec, err := r.Spec()
	if err != nil {
		t.Fatal(err)
	}
	fio, ok := spec.Workloads[0].Kind.(*bench.FioWorkload)
	if !ok || (*fio)["bs"] != "1m" || (*fio)["size"] != "16777216" || spec.Repetitions != 3 || !spec.Remount {
		t.Errorf("spec from flags: %+v, fio %v", spec, fio)
	}

	r, err = benchRequest(t, "--preset", "quick", "--config", "labfs-default")
	if err != nil || r.Preset != "quick" || len(r.Configs) != 1 {
		t.Errorf("--preset quick --config labfs-default: %+v, %v", r, err)
	}
	for args, want := range map[string]string{
		"a.yaml --native":                    "give a bench file, --preset or the quick flags, not several",
		"--preset quick --fio r=size=1m":     "leave out --native",
		"--native --labfs nameless":          `--labfs "nameless": give NAME=VALUE`,
		"--native --shell t=true -n 0":       "-n 0: give at least one repetition",
		"--native --shell t=true --scale -1": "--scale -1: give a positive factor",
		"":                                   "give a bench file, --preset NAME (one of",
	} {
		if _, err := benchRequest(t, strings.Fields(args)...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bench %s: %v, want %q", args, err, want)
		}
	}
}
