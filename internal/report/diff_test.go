package report

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/golden"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/stats"
)

// opOf is n requests of op on conn, each taking each of lat in turn.
func opOf(conn uint32, op string, opcode uint32, n int, lat ...time.Duration) profile.OpStats {
	s := profile.OpStats{Conn: conn, Op: op, Opcode: opcode}
	for i := 0; i < n; i++ {
		s.Latency.Add(uint64(lat[i%len(lat)]))
	}
	s.Count = s.Latency.Count
	return s
}

func recordOf(mount string, conn uint32, seconds float64, ops ...profile.OpStats) *profile.Record {
	start := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	return &profile.Record{Schema: profile.Schema,
		Meta: profile.Meta{Source: "kernel:fuse_request", Start: start, End: start.Add(time.Duration(seconds * float64(time.Second))),
			Mounts: []profile.Mount{{Conn: conn, MountPoint: mount}}},
		Profile: profile.Profile{Ops: ops}}
}

func TestDiffRequests(t *testing.T) {
	// A: 1,000 LOOKUPs of 200 us, 500 READs of 100 us over 10 s. B, on
	// another mount point of one connection: LOOKUPs 10x slower and half
	// as many, READs the same, GETATTRs new.
	a := recordOf("/mnt/a", 40, 10, opOf(40, "LOOKUP", 1, 1000, 200*time.Microsecond), opOf(40, "READ", 15, 500, 100*time.Microsecond))
	b := recordOf("/mnt/b", 41, 5, opOf(41, "LOOKUP", 1, 500, 2*time.Millisecond), opOf(41, "READ", 15, 500, 100*time.Microsecond),
		opOf(41, "GETATTR", 3, 10, 50*time.Microsecond))
	d, err := NewDiff(DiffInput{Name: "a.json", Records: []*profile.Record{a}}, DiffInput{Name: "b.json", Records: []*profile.Record{b}})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Requests) != 3 || d.Requests[0].Op != "LOOKUP" || d.Requests[1].Op != "GETATTR" || d.Requests[2].Op != "READ" {
		t.Fatalf("rows by impact on total time: %+v", d.Requests)
	}
	l := d.Requests[0]
	if l.A.Count != 1000 || l.B.Count != 500 || *l.CountPct != -50 {
		t.Errorf("LOOKUP counts %d -> %d (%v%%)", l.A.Count, l.B.Count, *l.CountPct)
	}
	if l.A.Rate != 100 || l.B.Rate != 100 || *l.RatePct != 0 {
		t.Errorf("LOOKUP rates %v -> %v", l.A.Rate, l.B.Rate)
	}
	// The histogram's quantiles are within its fine buckets' 3%.
	if r := l.B.P50 / l.A.P50; math.Abs(r-10) > 0.6 {
		t.Errorf("LOOKUP p50 %v -> %v: ratio %v, want 10", l.A.P50, l.B.P50, r)
	}
	if math.Abs(l.TotalS-(1.0-0.2)) > 1e-9 {
		t.Errorf("LOOKUP total time change %v s, want +0.8", l.TotalS)
	}
	if g := d.Requests[1]; g.A.Count != 0 || g.CountPct != nil || g.P50Pct != nil || pctText(g.CountPct, 0, 10) != "new" {
		t.Errorf("a new opcode: %+v", g)
	}
	if len(d.Notes) == 0 || !strings.Contains(d.Notes[0], "/mnt/a in A is compared with /mnt/b in B") {
		t.Errorf("the pairing of two mounts is not said: %q", d.Notes)
	}
	var text, counts, csv, js bytes.Buffer
	if err := WriteDiffText(&text, d, DiffOptions{Unit: hist.Usecs, Hist: true, Top: 2}); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "diff.golden", text.Bytes())
	if err := WriteDiffText(&counts, d, DiffOptions{Unit: hist.Usecs, Counts: true, Color: true}); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "diff_counts_color.golden", counts.Bytes())
	if err := WriteDiffCSV(&csv, d); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "diff.csv.golden", csv.Bytes())
	if err := WriteDiffJSON(&js, d); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Schema   string `json:"schema"`
		Requests []struct {
			Op     string  `json:"op"`
			TotalS float64 `json:"total_delta_s"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Schema != DiffSchema || len(back.Requests) != 3 || back.Requests[0].Op != "LOOKUP" {
		t.Errorf("JSON: %v %+v", err, back)
	}
}

func TestDiffStagesAndIntervals(t *testing.T) {
	withStages := func(s profile.OpStats, queue, daemon time.Duration) profile.OpStats {
		var q, dm hist.Hist
		for i := uint64(0); i < s.Count; i++ {
			q.Add(uint64(queue))
			dm.Add(uint64(daemon))
		}
		s.Stages = []profile.StageLatency{{Stage: profile.StageQueue, Latency: q}, {Stage: profile.StageDaemon, Latency: dm}}
		return s
	}
	a := recordOf("/mnt", 40, 1, withStages(opOf(40, "READ", 15, 100, 300*time.Microsecond), 10*time.Microsecond, 280*time.Microsecond))
	// B is an interval trace: two records, summed.
	b1 := recordOf("/mnt", 40, 1, withStages(opOf(40, "READ", 15, 100, 300*time.Microsecond), 200*time.Microsecond, 90*time.Microsecond))
	b2 := recordOf("/mnt", 40, 1, withStages(opOf(40, "READ", 15, 100, 300*time.Microsecond), 200*time.Microsecond, 90*time.Microsecond))
	b2.Meta.Start, b2.Meta.End = b1.Meta.End, b1.Meta.End.Add(time.Second)
	d, err := NewDiff(DiffInput{Name: "a", Records: []*profile.Record{a}}, DiffInput{Name: "b", Records: []*profile.Record{b1, b2}})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Requests) != 3 || d.Requests[1].Stage != profile.StageQueue || d.Requests[2].Stage != profile.StageDaemon {
		t.Fatalf("a row per stage after its opcode's: %+v", d.Requests)
	}
	if d.B.Seconds != 2 || d.Requests[0].B.Count != 200 || d.Requests[0].B.Rate != 100 || *d.Requests[0].RatePct != 0 {
		t.Errorf("interval records summed: %v s, %+v", d.B.Seconds, d.Requests[0].B)
	}
	if q := d.Requests[1]; q.B.P50/q.A.P50 < 15 {
		t.Errorf("queue p50 %v -> %v: the queue grew 20x", q.A.P50, q.B.P50)
	}
	// Both records were measured from the one a's unchanged copy.
	if a.Profile.Ops[0].Count != 100 || b1.Profile.Ops[0].Count != 100 {
		t.Error("merging changed the records")
	}
}

func TestDiffKinds(t *testing.T) {
	req := recordOf("/mnt", 40, 1, opOf(40, "READ", 15, 1, time.Millisecond))
	sys := &profile.Record{Schema: profile.Schema, Syscalls: &profile.SyscallReport{Syscalls: []profile.SyscallStat{
		{Name: "read", Category: "file I/O", Calls: 10, TimeS: 0.1}, {Name: "openat", Category: "file I/O", Calls: 4, Errors: 1, TimeS: 0.01}}}}
	sys2 := &profile.Record{Schema: profile.Schema, Syscalls: &profile.SyscallReport{Syscalls: []profile.SyscallStat{
		{Name: "read", Category: "file I/O", Calls: 20, TimeS: 0.05}, {Name: "connect", Category: "network", Calls: 1, TimeS: 1}}}}
	if _, err := NewDiff(DiffInput{Name: "r.json", Records: []*profile.Record{req}}, DiffInput{Name: "s.json", Records: []*profile.Record{sys}}); err == nil ||
		!strings.Contains(err.Error(), "r.json is a record of FUSE requests") || !strings.Contains(err.Error(), "s.json is a system-call report") {
		t.Errorf("different kinds: %v", err)
	}
	d, err := NewDiff(DiffInput{Name: "1", Records: []*profile.Record{sys}}, DiffInput{Name: "2", Records: []*profile.Record{sys2}})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Syscalls) != 3 || d.Syscalls[0].Syscall != "connect" || d.Syscalls[1].Syscall != "read" || *d.Syscalls[1].CallsPct != 100 ||
		d.Syscalls[2].CallsB != 0 || *d.Syscalls[2].CallsPct != -100 {
		t.Errorf("system calls by impact: %+v", d.Syscalls)
	}
	var b bytes.Buffer
	if err := WriteDiffText(&b, d, DiffOptions{}); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "diff_syscalls.golden", b.Bytes())
}

func TestDiffBench(t *testing.T) {
	result := func(config string, values ...float64) profile.BenchResult {
		return profile.BenchResult{Workload: "fio read", Metric: "bw", Unit: "MiB/s", HigherIsBetter: true, Configuration: config,
			Values: values, Summary: stats.Describe(values)}
	}
	a := &profile.Record{Schema: profile.Schema, Bench: &profile.BenchReport{Results: []profile.BenchResult{
		result("labfs", 100, 102, 98, 101, 99), result("native", 500, 520, 480, 510, 490), result("gone", 1, 2),
		result("skewed", 100, 101, 102, 103, 104), result("once", 3000)}}}
	b := &profile.Record{Schema: profile.Schema, Bench: &profile.BenchReport{Results: []profile.BenchResult{
		// Twice as fast, within the noise, one run far off (the medians
		// moved +49.02%, the means +195.29%: benchstat says +49.02%), and
		// a single run.
		result("labfs", 200, 204, 196, 202, 198), result("native", 510, 470, 530, 495, 500),
		result("skewed", 150, 151, 152, 153, 900), result("once", 0.0567)}}}
	d, err := NewDiff(DiffInput{Name: "a", Records: []*profile.Record{a}}, DiffInput{Name: "b", Records: []*profile.Record{b}})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Bench) != 4 || d.Bench[0].Delta != "+100.00%" || d.Bench[1].Delta != "~" || d.Bench[2].Delta != "+49.02%" {
		t.Errorf("bench deltas: %+v", d.Bench)
	}
	if len(d.Notes) != 1 || !strings.Contains(d.Notes[0], "1 result is in one run only") {
		t.Errorf("notes: %q", d.Notes)
	}
	var buf bytes.Buffer
	if err := WriteDiffText(&buf, d, DiffOptions{}); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "diff_bench.golden", buf.Bytes())
}

// The text of a diff fits 120 columns (benchstat's kind of width: it was
// 195), gives every change in per cent, the time's too (it was +800000.0
// in the unit), and keeps three significant digits of a figure under -m
// (a p50 of 57 us was 0.0).
func TestDiffTextFits(t *testing.T) {
	withStages := func(s profile.OpStats, queue, daemon time.Duration) profile.OpStats {
		var q, dm hist.Hist
		for i := uint64(0); i < s.Count; i++ {
			q.Add(uint64(queue))
			dm.Add(uint64(daemon))
		}
		s.Stages = []profile.StageLatency{{Stage: profile.StageQueue, Latency: q}, {Stage: profile.StageDaemon, Latency: dm}}
		return s
	}
	a := recordOf("/var/tmp/fusescope-bench-1234/mnt-labfs", 40, 10,
		withStages(opOf(40, "READDIRPLUS", 28, 123456, 57*time.Microsecond), 3*time.Microsecond, 50*time.Microsecond),
		withStages(opOf(40, "LOOKUP", 1, 1000, 200*time.Microsecond), 10*time.Microsecond, 180*time.Microsecond))
	b := recordOf("/var/tmp/fusescope-bench-1234/mnt-labfs", 40, 10,
		withStages(opOf(40, "READDIRPLUS", 28, 123456, 25*time.Microsecond), 3*time.Microsecond, 20*time.Microsecond),
		withStages(opOf(40, "LOOKUP", 1, 500, 2*time.Millisecond), 10*time.Microsecond, 1900*time.Microsecond))
	d, err := NewDiff(DiffInput{Name: "a.json", Records: []*profile.Record{a}}, DiffInput{Name: "b.json", Records: []*profile.Record{b}})
	if err != nil {
		t.Fatal(err)
	}
	for _, unit := range []hist.Unit{hist.Usecs, hist.Msecs, hist.Nsecs} {
		var buf bytes.Buffer
		if err := WriteDiffText(&buf, d, DiffOptions{Unit: unit}); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		for _, line := range strings.Split(out, "\n") {
			if n := len([]rune(line)); n > 120 {
				t.Errorf("%s: a line of %d columns: %q", unit.Name, n, line)
			}
		}
		if unit == hist.Msecs {
			// READDIRPLUS's p50: 57 us, then 25 us.
			if !strings.Contains(out, "0.0570") || !strings.Contains(out, "0.0250") || strings.Contains(out, " 0.0 ") {
				t.Errorf("msecs: sub-millisecond figures lost:\n%s", out)
			}
			golden.Check(t, "diff_msecs.golden", buf.Bytes())
		}
		// LOOKUP's time: 1000 x 200 us, then 500 x 2 ms: +400%.
		if !strings.Contains(out, "+400.0%") {
			t.Errorf("%s: the time's change is not in per cent:\n%s", unit.Name, out)
		}
	}
}
