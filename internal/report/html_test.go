package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/stats"
)

const hostile = `<img src=x onerror=alert(1)>`

// Every string from a trace is escaped, in every section that prints one.
func TestHTMLEscapes(t *testing.T) {
	start := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	exit := 0
	recs := []*profile.Record{
		{Schema: profile.Schema, Meta: profile.Meta{Source: hostile, Command: []string{hostile}, Start: start, End: start.Add(time.Second),
			Mounts: []profile.Mount{{Conn: 40, MountPoint: "/mnt/" + hostile}}},
			Profile:  profile.Profile{Ops: []profile.OpStats{opOf(40, "LOOKUP", 1, 10, time.Millisecond)}},
			Slow:     []profile.SlowRequest{{Op: "LOOKUP", Comm: hostile, File: "/" + hostile, Mount: hostile, Latency: time.Second}},
			Hung:     []profile.HungRequest{{Op: "READ", Comm: hostile, Mount: hostile}},
			Files:    []profile.FileStats{{Conn: 40, Path: "/" + hostile, Mount: hostile, Count: 1}},
			Calls:    []profile.CallStats{{Syscall: hostile, Count: 1}},
			Programs: []profile.ProgramCost{{Program: hostile}}},
	}
	sys := &profile.Record{Schema: profile.Schema, Syscalls: &profile.SyscallReport{
		Syscalls:    []profile.SyscallStat{{Name: hostile, Category: hostile, Calls: 1}},
		Files:       []profile.FileStat{{Target: "/tmp/" + hostile, Kind: "file", Opens: 1}},
		Waits:       []profile.Wait{{Name: "poll", Target: hostile, DurS: 1}},
		WaitGroups:  []profile.WaitGroup{{Name: "poll", Target: hostile, Calls: 1, TimeS: 1}},
		CriticalTop: []profile.PathItem{{Kind: "wait", Name: "poll", Target: hostile, DurS: 1, Share: 1}},
		Categories:  []profile.CategoryStat{{Category: hostile, Calls: 1}},
		Processes: []profile.Process{{PID: 1, Exec: "/bin/" + hostile, Start: 1, End: 2, Exit: &exit,
			Execs:   []profile.ExecStep{{Start: 1, Program: hostile, Args: []string{hostile}}},
			Blocked: []profile.Span{{Start: 1.2, DurS: 0.5, Name: "poll", Target: hostile}}}},
	}}
	bench := &profile.Record{Schema: profile.Schema, Bench: &profile.BenchReport{Name: hostile, Baseline: hostile, Notes: []string{hostile},
		Results: []profile.BenchResult{{Workload: hostile, Metric: hostile, Configuration: hostile, Values: []float64{1, 2}, Summary: stats.Describe([]float64{1, 2})}}}}
	var b bytes.Buffer
	if err := WriteHTML(&b, hostile, []HTMLInput{{Name: hostile, Records: recs}, {Name: "s", Records: []*profile.Record{sys}}, {Name: "b", Records: []*profile.Record{bench}}}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if strings.Contains(page, "<img") {
		i := strings.Index(page, "<img")
		t.Errorf("a raw <img in the page: %q", page[max(0, i-200):i+40])
	}
	if n := strings.Count(page, "&lt;img src=x onerror=alert(1)&gt;"); n < 20 {
		t.Errorf("the hostile name appears escaped %d times, want it in every section", n)
	}
}

// A report of a one-hour interval trace (3,600 records of 20 opcodes)
// stays under 5 MB: the lines over time are averaged down.
func TestHTMLSizeOfAnHour(t *testing.T) {
	start := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	var recs []*profile.Record
	for i := 0; i < 3600; i++ {
		r := &profile.Record{Schema: profile.Schema, Meta: profile.Meta{Start: start.Add(time.Duration(i) * time.Second), End: start.Add(time.Duration(i+1) * time.Second),
			Mounts: []profile.Mount{{Conn: 40, MountPoint: "/cvmfs/sft.cern.ch"}}}}
		for op := 1; op <= 20; op++ {
			r.Profile.Ops = append(r.Profile.Ops, opOf(40, fmt.Sprintf("OP%02d", op), uint32(op), 50+i%7, time.Duration(op)*10*time.Microsecond, time.Millisecond))
		}
		r.Slow = []profile.SlowRequest{{Op: "OP01", Comm: "cat", Latency: time.Duration(i) * time.Microsecond}}
		recs = append(recs, r)
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, "an hour", []HTMLInput{{Name: "hour.jsonl", Records: recs}}); err != nil {
		t.Fatal(err)
	}
	if b.Len() > 5<<20 {
		t.Errorf("%d bytes for an hour of 1 s intervals, want under 5 MB", b.Len())
	}
	if !strings.Contains(b.String(), "Requests over time") || !strings.Contains(b.String(), "3550 more in the records") {
		t.Error("the hour's report lacks its line over time or the count of slow requests left out")
	}
	t.Logf("%d bytes", b.Len())
}
