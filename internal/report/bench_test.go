package report

import (
	"bytes"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/golden"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/stats"
)

// benchSample is a bench of two configurations, four rounds, one of them
// failed, with the summaries as the bench makes them.
func benchSample() *profile.BenchReport {
	b := &profile.BenchReport{Name: "sample", Baseline: "native", Order: "random", Seed: 42, Repetitions: 5, Rounds: 4,
		Warmup: 1, DropCaches: true, Scratch: "ext4", Traced: true,
		Configs: []profile.BenchConfiguration{{Name: "native", Kind: "native"}, {Name: "lab", Kind: "labfs", Detail: "--preset default", Conn: 40}},
		Notes:   []string{`workload "cat" on "lab", round 4: reading: input/output error`, "the time budget of 1m0s ran out after 4 of 5 rounds"}}
	start := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	native, lab := []float64{1000, 1100, 950, 1050}, []float64{410, 450, 380}
	for r := range 4 {
		b.Runs = append(b.Runs, profile.BenchRun{Round: r, Seq: 2*r + 1, Configuration: "native", Workload: "cat", Start: start.Add(time.Duration(2*r) * time.Second),
			Elapsed: 0.5, Metrics: []profile.BenchMetric{{Name: "read", Unit: "MiB/s", Value: native[r], HigherIsBetter: true}}})
		run := profile.BenchRun{Round: r, Seq: 2*r + 2, Configuration: "lab", Workload: "cat", Start: start.Add(time.Duration(2*r+1) * time.Second), Elapsed: 1.25}
		if r < 3 {
			run.Metrics = []profile.BenchMetric{{Name: "read", Unit: "MiB/s", Value: lab[r], HigherIsBetter: true}}
			run.Requests = &profile.Profile{Ops: []profile.OpStats{
				{Conn: 40, Opcode: uint32(fuseproto.Read), Count: 512, Latency: hist.Hist{Count: 512, Sum: 512 * 90000}},
				{Conn: 40, Opcode: uint32(fuseproto.Open), Count: 1, Latency: hist.Hist{Count: 1, Sum: 30000}}}}
			run.Calls = []profile.CallStats{
				{Syscall: "read", Count: 129, WithRequests: 128, Requests: 128, FuseNs: 11520000, Latency: hist.Hist{Count: 129, Sum: 12800000}},
				{Syscall: "openat", Count: 1, WithRequests: 1, Requests: 2, FuseNs: 60000, Latency: hist.Hist{Count: 1, Sum: 70000}}}
		} else {
			run.Error = "reading: input/output error"
		}
		b.Runs = append(b.Runs, run)
	}
	cmp := stats.Compare(native[:3], lab, true)
	b.Results = []profile.BenchResult{
		{Workload: "cat", Metric: "read", Unit: "MiB/s", HigherIsBetter: true, Configuration: "native", Values: native, Summary: stats.Describe(native)},
		{Workload: "cat", Metric: "read", Unit: "MiB/s", HigherIsBetter: true, Configuration: "lab", Values: lab, Summary: stats.Describe(lab), VsBaseline: &cmp},
	}
	b.Published = []profile.BenchPublished{{Workload: "cat", Configuration: "lab", Metric: "read", Published: 0.5, Measured: cmp.Ratio, Source: "a seed"}}
	return b
}

func TestBenchText(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteBenchText(&buf, benchSample()); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "bench.golden", buf.Bytes())
}

func TestBenchCSV(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteBenchCSV(&buf, benchSample()); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "bench.csv.golden", buf.Bytes())
}
