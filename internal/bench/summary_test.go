package bench

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/stats"
)

// SyntheticReport is a bench of known runs: a baseline, a configuration
// twice as fast in every round, and one whose third round is slow because
// it made twice the FUSE requests; the report tests render it too.
func SyntheticReport() (*profile.BenchReport, *Spec) {
	spec := &Spec{Name: "synthetic", Baseline: "native", Order: "random", Repetitions: 5, Scratch: "tmp",
		Configurations: []Configuration{{Name: "native", Native: true}, {Name: "fast", LabFS: []string{}}, {Name: "noisy", LabFS: []string{}}},
		Workloads:      []Workload{{Name: "cat", Kind: &CatWorkload{Size: "1m", Times: 1}}},
		Published:      []Published{{Workload: "cat", Configuration: "fast", Ratio: 2.5, Source: "a seed"}},
	}
	rep := &profile.BenchReport{Name: spec.Name, Baseline: spec.Baseline, Order: spec.Order, Seed: 1, Repetitions: 5, Rounds: 5,
		DropCaches: true, Scratch: "tmp", Traced: true,
		Configs: []profile.BenchConfiguration{{Name: "native", Kind: "native"}, {Name: "fast", Kind: "labfs", Conn: 40}, {Name: "noisy", Kind: "labfs", Conn: 41}}}
	base := []float64{100, 110, 90, 105, 95}
	noisy := []float64{50, 52, 25, 49, 51}
	start := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	reqs := func(conn uint32, n uint64) *profile.Profile {
		h := hist.Hist{Count: n, Sum: n * 1000}
		return &profile.Profile{Ops: []profile.OpStats{{Conn: conn, Opcode: uint32(fuseproto.Read), Count: n, Latency: h}}}
	}
	seq := 0
	for r := range 5 {
		for _, c := range []struct {
			name string
			v    float64
			req  *profile.Profile
		}{
			{"native", base[r], nil},
			{"fast", 2 * base[r], reqs(40, 100)},
			{"noisy", noisy[r], reqs(41, map[bool]uint64{true: 200, false: 100}[r == 2])},
		} {
			seq++
			rep.Runs = append(rep.Runs, profile.BenchRun{Round: r, Seq: seq, Configuration: c.name, Workload: "cat",
				Start: start.Add(time.Duration(seq) * time.Second), Elapsed: 1,
				Metrics: []profile.BenchMetric{{Name: "read", Unit: "MiB/s", Value: c.v, HigherIsBetter: true}}, Requests: c.req})
		}
	}
	summarise(rep, spec)
	return rep, spec
}

func TestSummarise(t *testing.T) {
	rep, _ := SyntheticReport()
	by := map[string]profile.BenchResult{}
	for _, r := range rep.Results {
		by[r.Configuration] = r
	}
	if len(by) != 3 || by["native"].VsBaseline != nil || by["native"].Summary.Mean != 100 {
		t.Fatalf("results: %+v", rep.Results)
	}
	fast := by["fast"].VsBaseline
	if fast == nil || !fast.Paired || fast.Ratio < 1.999 || fast.Ratio > 2.001 || fast.CILow > 2 || fast.CIHigh < 2 || !fast.Significant {
		t.Errorf("twice as fast in every round: %+v", fast)
	}
	if by["fast"].Noisy != "" {
		t.Errorf("a steady result flagged: %s", by["fast"].Noisy)
	}
	n := by["noisy"].Noisy
	if !strings.Contains(n, "round 3 is 50% below the median (25.00 against 50.00 MiB/s): a slower run") ||
		!strings.Contains(n, "made 200 FUSE requests, more than the median of 100") {
		t.Errorf("the noisy result's cause: %q", n)
	}
	if len(rep.Published) != 1 || rep.Published[0].Measured < 1.999 || rep.Published[0].Metric != "read" {
		t.Errorf("published: %+v", rep.Published)
	}
}

// A round a configuration missed (a failed run) is left out of the
// pairing: the other four are still paired.
func TestSummariseUnpairedWhenARoundFailed(t *testing.T) {
	rep, spec := SyntheticReport()
	var runs []profile.BenchRun
	for _, r := range rep.Runs {
		if r.Configuration == "fast" && r.Round == 1 {
			continue
		}
		runs = append(runs, r)
	}
	rep.Runs, rep.Results, rep.Published = runs, nil, nil
	summarise(rep, spec)
	for _, r := range rep.Results {
		if r.Configuration == "fast" && (r.VsBaseline == nil || !r.VsBaseline.Paired || r.VsBaseline.Ratio < 1.999 || r.VsBaseline.Ratio > 2.001 || r.Summary.N != 4) {
			t.Errorf("fast with a round missing: %+v", r)
		}
	}
}

// noisyRuns is one configuration's runs of a workload: its figures and,
// per run, the FUSE requests it made and the time they took.
func noisyRuns(higherIsBetter bool, unit string, values []float64, reqs []uint64, fuseMs []float64) (*profile.BenchReport, profile.BenchResult) {
	rep := &profile.BenchReport{Configs: []profile.BenchConfiguration{{Name: "bindfs", Kind: "mount", Conn: 40}}}
	for r, v := range values {
		h := hist.Hist{Count: reqs[r], Sum: uint64(fuseMs[r] * 1e6)}
		rep.Runs = append(rep.Runs, profile.BenchRun{Round: r, Configuration: "bindfs", Workload: "walk",
			Metrics:  []profile.BenchMetric{{Name: "walk", Unit: unit, Value: v, HigherIsBetter: higherIsBetter}},
			Requests: &profile.Profile{Ops: []profile.OpStats{{Conn: 40, Opcode: uint32(fuseproto.Lookup), Count: reqs[r], Latency: h}}}})
	}
	res := profile.BenchResult{Workload: "walk", Metric: "walk", Unit: unit, HigherIsBetter: higherIsBetter, Configuration: "bindfs",
		Values: values, Summary: stats.Describe(values)}
	return rep, res
}

// The noisy-run explanation reads the figure's direction: a round 6x
// faster than the others whose requests took less time in FUSE was faster
// because the daemon was (it read "slower"), a slower one the reverse,
// for a figure where higher is better and one where lower is; and FUSE
// time that moved against the figure is not the cause.
func TestNoisyCauseDirection(t *testing.T) {
	same := []uint64{100, 100, 100, 100, 100}
	for _, c := range []struct {
		name           string
		higherIsBetter bool
		unit           string
		values, fuseMs []float64
		want           []string
	}{
		{"6x faster, less time in FUSE", true, "files/s", []float64{450, 460, 2871, 440, 455}, []float64{450, 455, 73, 445, 450},
			[]string{"round 3 is 531% above the median (2871 against 455.0 files/s): a faster run",
				"its requests took 73 ms in FUSE against a median of 450 ms (the daemon or its backend was faster)"}},
		{"slower, more time in FUSE", true, "files/s", []float64{450, 460, 150, 440, 455}, []float64{450, 455, 1400, 445, 450},
			[]string{"round 3 is 67% below the median (150.0 against 450.0 files/s): a slower run",
				"(the daemon or its backend was slower)"}},
		{"seconds: more is slower", false, "s", []float64{2, 2.1, 6, 1.9, 2}, []float64{450, 455, 1400, 445, 450},
			[]string{"round 3 is 200% above the median (6.000 against 2.000 s): a slower run", "(the daemon or its backend was slower)"}},
		{"seconds: less is faster", false, "s", []float64{2, 2.1, 0.5, 1.9, 2}, []float64{450, 455, 100, 445, 450},
			[]string{"round 3 is 75% below the median (0.500 against 2.000 s): a faster run", "(the daemon or its backend was faster)"}},
		{"faster despite more time in FUSE", true, "files/s", []float64{450, 460, 2871, 440, 455}, []float64{450, 455, 1400, 445, 450},
			[]string{"a faster run", "its requests took 1400 ms in FUSE against a median of 450 ms, yet the run was faster: the time went outside FUSE"}},
	} {
		rep, res := noisyRuns(c.higherIsBetter, c.unit, c.values, same, c.fuseMs)
		got := noisyCause(rep, "walk", "bindfs", res)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q\nwant %q", c.name, got, w)
			}
		}
	}
	rep, res := noisyRuns(true, "files/s", []float64{450, 460, 2871, 440, 455}, []uint64{100, 100, 20, 100, 100}, []float64{450, 455, 73, 445, 450})
	if got := noisyCause(rep, "walk", "bindfs", res); !strings.Contains(got, "it made 20 FUSE requests, fewer than the median of 100") {
		t.Errorf("fewer requests: %q", got)
	}
}

// The transport of each configuration's runs comes from their traces; a
// daemon that asked for the ring and got /dev/fuse is named in a note.
func TestTransports(t *testing.T) {
	req := func(n, ring uint64) *profile.Profile {
		return &profile.Profile{Ops: []profile.OpStats{{Conn: 40, Op: "LOOKUP", Count: n, URing: ring}}}
	}
	rep := &profile.BenchReport{
		Configs: []profile.BenchConfiguration{{Name: "dev"}, {Name: "ring", AsksURing: true}, {Name: "fallback", AsksURing: true}, {Name: "untraced"}},
		Runs: []profile.BenchRun{
			{Configuration: "dev", Requests: req(10, 0)}, {Configuration: "ring", Requests: req(10, 10)},
			{Configuration: "ring", Requests: req(12, 11)}, {Configuration: "fallback", Requests: req(7, 0)}, {Configuration: "untraced"},
		}}
	transports(rep)
	got := map[string]string{}
	for _, c := range rep.Configs {
		got[c.Name] = c.Transport
	}
	want := map[string]string{"dev": "/dev/fuse", "ring": "io_uring and /dev/fuse", "fallback": "/dev/fuse", "untraced": ""}
	if !maps.Equal(got, want) {
		t.Errorf("transports %v, want %v", got, want)
	}
	if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], `"fallback" asked for FUSE over io_uring, and its daemon fell back to /dev/fuse`) {
		t.Errorf("notes %q, want one naming the fallback", rep.Notes)
	}
}
