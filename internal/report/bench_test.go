package report

import (
	"bytes"
	"slices"
	"strings"
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

// benchEdges is a bench whose table needs its marks: a single run (no
// interval to give, a ratio that cannot be paired), a published figure of
// three decimals, and both ways the paired interval and the rank test
// disagree.
func benchEdges() *profile.BenchReport {
	b := &profile.BenchReport{Name: "edges", Baseline: "native", Order: "rotate", Repetitions: 5, Rounds: 5, DropCaches: true, Scratch: "tmp",
		Configs: []profile.BenchConfiguration{{Name: "native", Kind: "native"}, {Name: "lab", Kind: "labfs"}}}
	result := func(w, config string, values []float64, base []float64, paired bool) profile.BenchResult {
		r := profile.BenchResult{Workload: w, Metric: "bw", Unit: "MiB/s", HigherIsBetter: true, Configuration: config, Values: values, Summary: stats.Describe(values)}
		if base != nil {
			c := stats.Compare(base, values, paired)
			r.VsBaseline = &c
		}
		return r
	}
	drift, faster := []float64{100, 150, 200, 250, 300}, []float64{110, 165, 220, 275, 330}
	steady, apart := []float64{100, 104, 101, 103, 102}, []float64{200, 105, 106, 107, 108}
	b.Results = []profile.BenchResult{
		result("once", "native", []float64{1000}, nil, false), result("once", "lab", []float64{36.1}, []float64{1000}, false),
		result("drift", "native", drift, nil, false), result("drift", "lab", faster, drift, true),
		result("apart", "native", steady, nil, false), result("apart", "lab", apart, steady, true),
	}
	b.Published = []profile.BenchPublished{{Workload: "once", Configuration: "lab", Metric: "bw", Published: 0.036, Measured: 0.0361, Source: "a seed"}}
	return b
}

// One run has no interval (no "±0%"), a published 0.036 stays 0.036, and
// a disagreement of the two tests is marked where it occurs and explained
// once.
func TestBenchTextMarks(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteBenchText(&buf, benchEdges()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Contains(out, "±0%") {
		t.Error("a single run shown with an interval of ±0%")
	}
	for _, want := range []string{"0.036x", "0.0361x", "~ †", "+18.44% †", "† with ~:", "† with a delta:", "ratio of the medians"} {
		if !strings.Contains(out, want) {
			t.Errorf("the text lacks %q", want)
		}
	}
	golden.Check(t, "bench_edges.golden", buf.Bytes())
}

// A bench whose configurations asked for FUSE over io_uring says which
// transport carried each one's runs, and names a fallen-back daemon as
// /dev/fuse's; a bench without the ring says nothing of transports.
func TestBenchTextTransports(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteBenchText(&buf, benchSample()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "Transports") {
		t.Errorf("a bench without the ring names transports:\n%s", buf.String())
	}
	b := benchSample()
	b.Configs = append(b.Configs,
		profile.BenchConfiguration{Name: "hp", Kind: "mount", Transport: profile.TransportDevFuse},
		profile.BenchConfiguration{Name: "hp-ring", Kind: "mount", AsksURing: true, Transport: profile.TransportURing},
		profile.BenchConfiguration{Name: "hp-fallback", Kind: "mount", AsksURing: true, Transport: profile.TransportDevFuse})
	buf.Reset()
	if err := WriteBenchText(&buf, b); err != nil {
		t.Fatal(err)
	}
	want := "\nTransports (from the runs' traces):\n  lab: not traced\n  hp: /dev/fuse\n  hp-ring: io_uring\n  hp-fallback: /dev/fuse (asked for io_uring: fell back)\n"
	if !strings.Contains(buf.String(), want) {
		t.Errorf("want\n%s\nin\n%s", want, buf.String())
	}
}

// A workload whose figures are read together (coherence) gets one more
// table: every figure's mean per configuration, side by side; the others
// do not.
func TestBenchTextSideBySide(t *testing.T) {
	b := benchSample()
	var buf bytes.Buffer
	if err := WriteBenchText(&buf, b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "side by side") {
		t.Errorf("a bench without side-by-side workloads has the table:\n%s", buf.String())
	}
	w := b.Results[0].Workload
	b.SideBySide = []string{w}
	buf.Reset()
	if err := WriteBenchText(&buf, b); err != nil {
		t.Fatal(err)
	}
	var metrics []string
	for _, r := range b.Results {
		if r.Workload == w && !slices.Contains(metrics, r.Metric) {
			metrics = append(metrics, r.Metric)
		}
	}
	out := buf.String()
	i := strings.Index(out, w+", side by side (means):")
	if i < 0 {
		t.Fatalf("no side-by-side table for %s:\n%s", w, out)
	}
	header := strings.SplitN(out[i:], "\n", 3)[1]
	for _, m := range metrics {
		if !strings.Contains(header, m+" (") {
			t.Errorf("the table's header %q lacks %s", header, m)
		}
	}
}
