package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
)

// SyntheticReport is a bench of known runs: a baseline, a configuration
// twice as fast in every round, and one whose third round is slow because
// it made twice the FUSE requests; the report tests render it too.
func SyntheticReport() (*profile.BenchReport, *Spec) {
	spec := &Spec{Name: "synthetic", Baseline: "native", Order: "random", Repetitions: 5, Scratch: "tmp",
		Configurations: []Configuration{{Name: "native", Native: true}, {Name: "fast", LabFS: []string{}}, {Name: "noisy", LabFS: []string{}}},
		Workloads:      []Workload{{Name: "cat", Cat: &CatWorkload{Size: "1m", Times: 1}}},
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
	if !strings.Contains(n, "round 3") || !strings.Contains(n, "made 200 FUSE requests against a median of 100") {
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
