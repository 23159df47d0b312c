package report

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
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

// The files table names each node: two nodes of one path are two rows
// told apart by their node ids, a node whose name is not known shows ?,
// and control characters in a name are quoted as the terminal quotes
// them (never an ESC or a newline in the page).
func TestHTMLFilesTable(t *testing.T) {
	start := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	odd := "/d/esc\x1b[31mred\nline"
	rec := &profile.Record{Schema: profile.Schema, Meta: profile.Meta{Start: start, End: start.Add(time.Second),
		Source: "kernel:fuse_request (send -> end)", Host: "h\x1bst", Command: []string{"sh", "-c", "ls \x1b"},
		Mounts: []profile.Mount{{Conn: 40, MountPoint: "/mnt/lab"}}},
		Profile: profile.Profile{Ops: []profile.OpStats{opOf(40, "LOOKUP", 1, 10, time.Millisecond)}},
		Files: []profile.FileStats{
			{Conn: 40, Node: 5, Path: "/d", Count: 3, Total: 3 * time.Millisecond},
			{Conn: 40, Node: 9, Path: "/d", Count: 2, Total: 2 * time.Millisecond},
			{Conn: 40, Node: 12, Count: 1, Total: time.Millisecond},
			{Conn: 40, Node: 14, Path: odd, Count: 1, Total: time.Millisecond}},
		Slow: []profile.SlowRequest{{Op: "READ", Comm: "ca\x1bt", Mount: "/mnt/lab", File: odd, Latency: time.Second}},
		Hung: []profile.HungRequest{{Op: "READ", Mount: "/mnt/lab"}},
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, "files", []HTMLInput{{Name: "r.json", Records: []*profile.Record{rec}}}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`<td class="name">/d</td><td>5</td><td>3</td>`,
		`<td class="name">/d</td><td>9</td><td>2</td>`,
		`<td class="name">?</td><td>12</td><td>1</td>`,
		`<td class="name">&#34;/d/esc\x1b[31mred\nline&#34;</td><td>14</td>`,
		`<td class="name">&#34;ca\x1bt&#34;</td>`,                      // the slow request's command
		`<td class="name">&#34;/d/esc\x1b[31mred\nline&#34;</td></tr>`, // and its file
		`<td>0</td><td class="name">?</td>`,                            // a hung request's unknown command
		`<td class="name">kernel:fuse_request (send -&gt; end)</td>`,   // printable: as it is
		`<td class="name">&#34;h\x1bst&#34;</td>`,
		`<td class="name">sh -c &#34;ls \x1b&#34;</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.ContainsAny(page, "\x1b") || strings.Contains(page, "red\nline") {
		t.Error("a control character from a name is in the page raw")
	}
}

// An interval trace's report sums the application's calls, the page
// cache and the files over the records, as it sums the opcodes.
func TestHTMLSumsIntervalRecords(t *testing.T) {
	start := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	interval := func(i int, calls, pages uint64, file time.Duration) *profile.Record {
		c := profile.CallStats{Syscall: "statx", Count: calls, WithRequests: calls, Requests: calls}
		for range calls {
			c.Latency.Add(uint64(20 * time.Microsecond))
		}
		at := start.Add(time.Duration(i) * time.Second)
		return &profile.Record{Schema: profile.Schema, Meta: profile.Meta{Start: at, End: at.Add(time.Second),
			Mounts: []profile.Mount{{Conn: 40, MountPoint: "/mnt/lab"}}},
			Profile:   profile.Profile{Ops: []profile.OpStats{opOf(40, "LOOKUP", 1, 10, time.Millisecond)}},
			Calls:     []profile.CallStats{c},
			PageCache: []profile.PageCache{{Conn: 40, Mount: "/mnt/lab", Reads: 1, ReadPages: pages, Added: pages / 2}},
			Files:     []profile.FileStats{{Conn: 40, Node: 7, Path: "/f", Count: 2, Total: file, Max: file / 2}},
		}
	}
	recs := []*profile.Record{interval(0, 81, 10, 4*time.Millisecond), interval(1, 3000, 100, 6*time.Millisecond), interval(2, 365, 1000, 10*time.Millisecond)}
	var b bytes.Buffer
	if err := WriteHTML(&b, "stream", []HTMLInput{{Name: "run.jsonl", Records: recs}}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`<td class="l">statx</td><td>3446</td><td>0</td><td>3446</td><td>3446</td>`, // calls, errors, with requests, requests
		`<td class="name">/mnt/lab</td><td>1110</td><td>555</td>`,                   // pages read, added
		`<td class="name">/f</td><td>7</td><td>6</td><td>0</td><td>0.020</td><td>5000.0</td>`,
		"Each interval record lists its busiest files",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
}

func htmlPage(t *testing.T, recs ...*profile.Record) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, "t", []HTMLInput{{Name: "r.json", Records: recs}}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The stages column is there when a record has stages, and only then.
func TestHTMLStagesColumn(t *testing.T) {
	start := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	rec := &profile.Record{Schema: profile.Schema, Meta: profile.Meta{Start: start, End: start.Add(time.Second)},
		Profile: profile.Profile{Ops: []profile.OpStats{opOf(40, "LOOKUP", 1, 10, time.Millisecond)}}}
	if p := htmlPage(t, rec); strings.Contains(p, "stages: mean") || strings.Contains(p, "stages split") {
		t.Error("a record without stages gets a stages column")
	}
	op := &rec.Profile.Ops[0]
	op.Stages = []profile.StageLatency{{Stage: profile.StageQueue, Latency: op.Latency.Clone()}}
	if p := htmlPage(t, rec); !strings.Contains(p, "<th>stages: mean (us)</th>") || !strings.Contains(p, `<td class="l">queue 1000.0 </td>`) {
		t.Error("a record with stages lacks their column")
	}
}

// The ring's column is there when FUSE over io_uring's ring carried some of
// a record's requests, and only then, with each row's count.
func TestHTMLRingColumn(t *testing.T) {
	start := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	rec := &profile.Record{Schema: profile.Schema, Meta: profile.Meta{Start: start, End: start.Add(time.Second)},
		Profile: profile.Profile{Ops: []profile.OpStats{opOf(40, "LOOKUP", 1, 10, time.Millisecond)}}}
	if p := htmlPage(t, rec); strings.Contains(p, "over the ring") {
		t.Error("a record of /dev/fuse's requests alone gets a ring column")
	}
	rec.Profile.Ops[0].URing = 7
	if p := htmlPage(t, rec); !strings.Contains(p, "<th>over the ring</th>") || !strings.Contains(p, "<td>7</td>") {
		t.Error("a record of the ring's requests lacks their column")
	}
}

// A bench figure is a number with its unit, never in exponent form, and
// its tooltip has every digit; a whisker stops at zero; ratios keep three
// significant digits.
func TestHTMLBenchFigures(t *testing.T) {
	res := func(config string, values ...float64) profile.BenchResult {
		return profile.BenchResult{Workload: "stat", Metric: "rate", Unit: "ops/s", HigherIsBetter: true, Configuration: config, Values: values, Summary: stats.Describe(values)}
	}
	native, lab := res("native", 203812.7, 203810.1, 203815.3), res("lab", 1, 2, 9000)
	lab.VsBaseline = &stats.Comparison{Ratio: 0.0361, P: 0.1}
	bench := &profile.Record{Schema: profile.Schema, Bench: &profile.BenchReport{Name: "b", Baseline: "native", Results: []profile.BenchResult{native, lab}}}
	p := htmlPage(t, bench)
	for _, want := range []string{
		">203,813 ops/s ", // the median beside its bar
		"native: median 203,812.7 ops/s, mean 203,812.7 ops/s, 95% interval of the mean 203,806.2 ops/s to 203,819.2 ops/s, 3 runs", // and in its tooltip
		">2.000 ops/s 0.0361x ",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if m := regexp.MustCompile(`[0-9]e(\+|&#43;|-)[0-9]`).FindString(p); m != "" {
		t.Errorf("a figure in exponent form: %s", m)
	}
	if lab.Summary.CILow >= 0 {
		t.Fatalf("the test needs an interval below zero: %+v", lab.Summary)
	}
	for _, m := range regexp.MustCompile(`class="whisker" x1="([0-9.-]+)"`).FindAllStringSubmatch(p, -1) {
		if x, _ := strconv.ParseFloat(m[1], 64); x < 220 {
			t.Errorf("a whisker starts at x=%s, left of the bars' zero (220)", m[1])
		}
	}
}

// The last label of a time axis ends at the axis's end: the chart does
// not clip it.
func TestHTMLLastAxisLabel(t *testing.T) {
	exit := 0
	sys := &profile.Record{Schema: profile.Schema, Syscalls: &profile.SyscallReport{
		Processes: []profile.Process{{PID: 1, Exec: "/bin/sh", Start: 1, End: 13.35, Exit: &exit}}}}
	p := htmlPage(t, sys)
	if !strings.Contains(p, `<text x="890" y="50" text-anchor="end">12s</text>`) {
		t.Error("the timeline's last label is not anchored at its end")
	}
}
