package report

import (
	"bytes"
	csvpkg "encoding/csv"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/golden"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/strace"
	"github.com/fusescope/fusescope/internal/systrace"
)

// sampleReport analyses testdata/sample.log: a DNS-style UDP wait (seed
// 002's case), a refused connect, a child that execs and exits, a killed
// process, a malformed line, a call never resumed and a path that needs
// escaping.
func sampleReport(t *testing.T) *profile.SyscallReport {
	t.Helper()
	f, err := os.Open("../systrace/testdata/sample.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := strace.NewParser()
	r, err := systrace.Analyze(strace.Named(func(emit func(*strace.Event)) error { return p.Parse(f, emit) }, p), p, systrace.Options{MaxWaits: 10, TimelineS: 1})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPresentersGolden(t *testing.T) {
	r := sampleReport(t)
	var text, js, csv bytes.Buffer
	if err := WriteSyscallsText(&text, r, 10); err != nil {
		t.Fatal(err)
	}
	if err := syscallsRecord(r).Write(&js); err != nil {
		t.Fatal(err)
	}
	if err := WriteSyscallsCSV(&csv, r); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "sample.txt.golden", text.Bytes())
	golden.Check(t, "sample.json.golden", js.Bytes())
	golden.Check(t, "sample.csv.golden", csv.Bytes())
	for _, table := range SyscallsCSVTables {
		var b bytes.Buffer
		if err := WriteSyscallsCSVTable(&b, r, table); err != nil {
			t.Fatal(err)
		}
		name := "sample." + table + ".csv.golden"
		if table == "syscalls" {
			name = "sample.csv.golden" // the default table: WriteCSV's
		}
		golden.Check(t, name, b.Bytes())
		// Every row has the header's columns, and the header is CSVColumns'.
		rows, err := csvpkg.NewReader(&b).ReadAll()
		if err != nil || len(rows) < 2 || strings.Join(rows[0], ",") != strings.Join(SyscallsCSVColumns[table], ",") {
			t.Errorf("%s: %v, %d rows, header %v", table, err, len(rows), rows[:min(1, len(rows))])
		}
	}
	if err := WriteSyscallsCSVTable(&csv, r, "bogus"); err == nil || !strings.Contains(err.Error(), "syscalls, files") {
		t.Errorf("an unknown table: %v", err)
	}
}

// A live trace has no line numbers (its waits are shown by time of day)
// and no strace -y.
func TestPresentLiveWaitsByTime(t *testing.T) {
	defer func(l *time.Location) { time.Local = l }(time.Local)
	time.Local = time.UTC
	status := 0
	r := &profile.SyscallReport{Live: &profile.LiveInfo{Command: []string{"getent", "hosts", "nohost"}, PID: 4100, MinWaitS: 0.001, WallS: 5.5, ExitStatus: &status},
		HasDuration: true, TotalTime: 5.0, Events: 2,
		Waits: []profile.Wait{{PID: 4100, Name: "poll", Target: "UDP:[10.0.0.1:53]", Start: 1700000000.25, DurS: 5}},
		Files: []profile.FileStat{{Target: "/etc/hosts", Kind: "file", Opens: 1, Reads: 2, BytesRead: 20, Calls: 3, TimeS: 0.00004}}}
	var text bytes.Buffer
	if err := WriteSyscallsText(&text, r, 10); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "live.txt.golden", text.Bytes())
}

// A live trace that saw no call says why, instead of printing empty tables
// and the log-only advice about strace -T.
func TestWriteTextLiveNothingTraced(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSyscallsText(&b, &profile.SyscallReport{Live: &profile.LiveInfo{PID: 42, WallS: 1}}, 10); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "No system call was traced") || strings.Contains(out, "strace -T") || strings.Contains(out, "Hot spots") {
		t.Errorf("output:\n%s", out)
	}
}

// An empty report's lists are empty arrays in JSON, never null.
func TestWriteJSONEmptyLists(t *testing.T) {
	var b bytes.Buffer
	if err := syscallsRecord(&profile.SyscallReport{}).Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"syscalls", "files", "categories", "waits", "processes"} {
		if !strings.Contains(b.String(), `"`+key+`": []`) {
			t.Errorf("%s is not an empty array in:\n%s", key, b.String())
		}
	}
}

// A report read back from its JSON renders as the report did: what
// fusescope show relies on.
func TestReadJSONRendersAsTheReport(t *testing.T) {
	r := sampleReport(t)
	var js, text bytes.Buffer
	if err := syscallsRecord(r).Write(&js); err != nil {
		t.Fatal(err)
	}
	if err := WriteSyscallsText(&text, r, 10); err != nil {
		t.Fatal(err)
	}
	back, err := readSyscalls(js.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := WriteSyscallsText(&again, back, 10); err != nil {
		t.Fatal(err)
	}
	if again.String() != text.String() {
		t.Errorf("read back, the report renders as\n%s\nwant\n%s", again.String(), text.String())
	}
	for in, want := range map[string]string{
		`{"schema":"fusescope.syscalls/v9"}`:           "not a fusescope record",
		`{"schema":"fusescope.record/v3"}`:             "is newer than this fusescope reads",
		`{"schema":"fusescope.syscalls/v1","bogus":1}`: "unknown field",
		`{"schema":`: "not a fusescope record",
	} {
		if _, err := readSyscalls([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("readSyscalls(%s): error %v, want one containing %q", in, err, want)
		}
	}
}

// Any report ReadJSON accepts renders in every presenter, however odd its
// numbers and its process tree (a saved file may have been edited).
func FuzzReadSyscallsRecord(f *testing.F) {
	if b, err := os.ReadFile("testdata/sample.json.golden"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"schema":"fusescope.syscalls/v1","processes":[{"pid":1,"parent":2},{"pid":2,"parent":1}]}`))
	f.Add([]byte(`{"schema":"fusescope.syscalls/v1","timeline_bin_s":-1,"timeline":[{"start_s":-5}],"total_time_s":0}`))
	f.Add([]byte(`{"schema":"fusescope.syscalls/v1","processes":[{"pid":1},{"pid":1,"parent":1}]}`)) // recursed without end
	f.Add([]byte(`{"schema":"fusescope.syscalls/v1","malformed":1}`))                                // no first_malformed: panicked
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := readSyscalls(b)
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := WriteSyscallsText(&out, r, 10); err != nil {
			t.Fatal(err)
		}
		WriteSyscallsCSV(&out, r)
		if err := syscallsRecord(r).Write(&out); err != nil {
			t.Fatal(err)
		}
	})
}

// The process tree is a list like the others: --top bounds it, in tree
// order, and says how many it left out; 0 shows every process.
func TestWriteTextProcessTreeTop(t *testing.T) {
	r := &profile.SyscallReport{Processes: []profile.Process{
		{PID: 1, Exec: "/usr/bin/make"},
		{PID: 2, Parent: 1, Exec: "/bin/sh"},
		{PID: 3, Parent: 2, Exec: "/usr/bin/cc"},
		{PID: 4, Parent: 1, Exec: "/bin/sh"},
		{PID: 5, Parent: 4, Exec: "/usr/bin/cc"},
	}}
	tree := func(top int) string {
		var b bytes.Buffer
		if err := WriteSyscallsText(&b, r, top); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		return out[strings.Index(out, "Process tree"):]
	}
	want := "Process tree (the first 3 of 5 processes)\n" +
		"1 /usr/bin/make (0 calls, 0.000 s: 0.000 s in calls, 0.000 s outside, running at end of log)\n" +
		"  2 /bin/sh (0 calls, 0.000 s: 0.000 s in calls, 0.000 s outside, running at end of log)\n" +
		"    3 /usr/bin/cc (0 calls, 0.000 s: 0.000 s in calls, 0.000 s outside, running at end of log)\n" +
		"... 2 more processes (--top 0 shows all)\n"
	if got := tree(3); got != want {
		t.Errorf("--top 3:\n%s\nwant:\n%s", got, want)
	}
	all := tree(0)
	if strings.Contains(all, "more process") || strings.Count(all, "\n") != 6 || !strings.Contains(all, "    5 /usr/bin/cc") {
		t.Errorf("--top 0:\n%s", all)
	}
	if got := tree(5); strings.Contains(got, "first") || strings.Contains(got, "more process") {
		t.Errorf("--top 5 of 5:\n%s", got)
	}
}

// A traced command's own run is the traced time; the probes' set-up and
// read-out are said apart.
func TestWriteTextLiveCommandTime(t *testing.T) {
	var b bytes.Buffer
	r := &profile.SyscallReport{Live: &profile.LiveInfo{Command: []string{"git", "status"}, WallS: 0.55, CommandS: 0.006, SetupS: 0.041}}
	if err := WriteSyscallsText(&b, r, 10); err != nil {
		t.Fatal(err)
	}
	if line, _, _ := strings.Cut(b.String(), "\n"); line != `live trace of "git status": 0 processes, 0.006 s traced (set-up 0.041 s before it)` {
		t.Errorf("first line %q", line)
	}
	// On a server's programs, the text says whose.
	b.Reset()
	r.Live.SetupS, r.Live.LoadedBy = 0.001, "fusescope syscalls --serve, pid 42, on /run/fusescope/syscalls.sock"
	if err := WriteSyscallsText(&b, r, 10); err != nil {
		t.Fatal(err)
	}
	want := `live trace of "git status": 0 processes, 0.006 s traced (set-up 0.001 s before it, on the programs of fusescope syscalls --serve, pid 42, on /run/fusescope/syscalls.sock)`
	if line, _, _ := strings.Cut(b.String(), "\n"); line != want {
		t.Errorf("first line %q", line)
	}
}

// syscallsRecord is the record fusescope syscalls --json writes for r.
func syscallsRecord(r *profile.SyscallReport) *profile.Record {
	return &profile.Record{Schema: profile.Schema, Meta: profile.Meta{Tool: "test", Source: "strace log"}, Syscalls: r}
}

// readSyscalls reads a record's system-call report, as show does.
func readSyscalls(b []byte) (*profile.SyscallReport, error) {
	rec, err := profile.Parse(b)
	if err != nil {
		return nil, err
	}
	if rec.Syscalls == nil {
		return nil, fmt.Errorf("no syscalls section")
	}
	return rec.Syscalls, nil
}

// The process timeline: a shell that waits for a child, drawn on lanes
// over the run (exec, running, waiting, exit).
func TestWriteTextProcessLanes(t *testing.T) {
	zero := 0
	r := &profile.SyscallReport{WaitMinS: 0.001, Processes: []profile.Process{
		{PID: 100, Exec: "/bin/sh", Start: 10, End: 10.6, Exit: &zero,
			Execs:   []profile.ExecStep{{Start: 10, Program: "/bin/sh"}},
			Blocked: []profile.Span{{Start: 10.1, DurS: 0.3, Name: "wait4", Child: 101}}},
		{PID: 101, Parent: 100, Exec: "/usr/bin/sleep", Start: 10.1, End: 10.4, Exit: &zero,
			Execs: []profile.ExecStep{{Start: 10.1, Program: "/usr/bin/sleep"}}},
	}}
	var b strings.Builder
	if err := WriteSyscallsText(&b, r, 10); err != nil {
		t.Fatal(err)
	}
	want := "Process timeline (0.600 s, 10 ms a column; = running, ~ a call of at least 1ms, | exec, x exit)\n" +
		"PID  PROGRAM  LANE\n" +
		"100  sh       [|=========~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~==================x]\n" +
		"101  sleep    [          |=============================x                   ]\n"
	if got := sectionOf(b.String(), "Process timeline"); got != strings.TrimSuffix(want, "\n") && got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// sectionOf is the section of text whose title line starts with title, up
// to the blank line after it.
func sectionOf(text, title string) string {
	i := strings.Index(text, "\n"+title)
	if i < 0 {
		return ""
	}
	s := text[i+1:]
	if j := strings.Index(s, "\n\n"); j >= 0 {
		s = s[:j+1]
	}
	return s
}
