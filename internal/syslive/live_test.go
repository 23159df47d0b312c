package syslive

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/report"
	"github.com/fusescope/fusescope/internal/strace"
	"github.com/fusescope/fusescope/internal/sysevent"
	"github.com/fusescope/fusescope/internal/systrace"
)

// replayReport runs a recording through Live and the analyzers, as the
// live source does, without a kernel.
func replayReport(t *testing.T, path string) *profile.SyscallReport {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rp, err := ReadReplay(f)
	if err != nil {
		t.Fatal(err)
	}
	live := NewLive(rp)
	live.Begin(rp.Root, nil)
	first, last := rp.Events[0].Time, rp.Events[0].Time
	for _, ev := range rp.Events {
		last = max(last, ev.Time)
	}
	events := func(emit func(*strace.Event)) error {
		for _, ev := range rp.Events {
			live.Handle(ev, emit)
		}
		return nil
	}
	r, err := systrace.Analyze(events, nil, systrace.Options{Window: func() (float64, float64) { return first, last }})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// testdata/live/workload.jsonl is what the live source handed its
// interpretation while tracing workload.sh (fusescope syscalls --top 0 --
// workload.sh with FUSESCOPE_RECORD_LIVE_EVENTS set), with /proc's
// answers; workload.live.txt is the report that run printed. Replayed,
// the events give the same files and calls, named the same way: opens
// relative to the working directory, an fd duplicated with exec 7<&4, a
// subshell's chdir, a UDP socket named by its connect, and a pipe /proc no
// longer knew by the time its event was read.
func TestLiveReplaysARecordedTrace(t *testing.T) {
	r := replayReport(t, "testdata/live/workload.jsonl")
	files := map[string]profile.FileStat{}
	for _, f := range r.Files {
		files[f.Target] = f
	}
	for target, want := range map[string][4]int64{ // opens, reads, writes, bytes
		"/tmp/wl/out.txt":   {1, 0, 3, 14},
		"/tmp/wl/in.txt":    {3, 5, 0, 36},
		"UDP:[127.0.0.1:9]": {0, 0, 1, 5},
		"pipe:[#1]":         {0, 2, 1, 24},
	} {
		f := files[target]
		if got := [4]int64{int64(f.Opens), int64(f.Reads), int64(f.Writes), f.BytesRead + f.BytesWritten}; got != want {
			t.Errorf("%s: opens, reads, writes, bytes %v, want %v", target, got, want)
		}
	}
	// The live run's own report: the same files table and call counts.
	b, err := os.ReadFile("testdata/live/workload.live.txt")
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	r.Live = &profile.LiveInfo{} // rendered as a live report is
	if err := report.WriteSyscallsText(&text, r, 0); err != nil {
		t.Fatal(err)
	}
	for _, section := range []string{"Files, sockets and pipes by time", "Failed calls by errno"} {
		// The recording predates the rows of paths looked up in vain
		// (kind missing) and their column: left out of the comparison.
		if got, want := withoutMissing(sectionOf(text.String(), section)), withoutMissing(sectionOf(string(b), section)); got != want {
			t.Errorf("%s, replayed:\n%s\nwant (the live run's):\n%s", section, got, want)
		}
	}
}

// The interpretation's rules, one event at a time, with /proc answering
// from a map: an fd the trace did not see made is named from /proc; a fork
// copies the fd table; an exec drops the fds /proc no longer shows but
// names their counters as they were; a counted fd reused by an open is
// flushed under its old name first.
func TestLiveFollowsFDs(t *testing.T) {
	proc := &fakeProc{fds: map[[2]int]string{{10, 0}: "/dev/pts/0", {10, 3}: "/data/log"}, cwd: map[int]string{10: "/home/u"},
		gone: map[[2]int]bool{{11, 3}: true}}
	l := NewLive(proc)
	l.Begin(10, nil)
	var got []string
	emit := func(e *strace.Event) {
		if e.Kind == strace.Syscall || e.Kind == strace.PeerIO {
			got = append(got, e.Name+" "+e.Target()+" "+e.Ret)
		}
	}
	for _, ev := range []sysevent.Event{
		{Kind: sysevent.Start, Root: 10},
		{Kind: sysevent.Call, Name: "openat", TID: 10, PID: 10, Args: [6]uint64{uint64(0xffffff9c)}, Str: "rel/a", Ret: 4}, // AT_FDCWD
		{Kind: sysevent.Call, Name: "read", TID: 10, PID: 10, Args: [6]uint64{0}, Ret: 5},
		{Kind: sysevent.Fork, TID: 10, PID: 10, ChildTID: 11, ChildPID: 11},
		{Kind: sysevent.Exec, TID: 11, PID: 11, Str: "/bin/cat"},
		{Kind: sysevent.FDIO, PID: 11, FD: 3, IO: []sysevent.IOCount{{Name: "write", Calls: 2, Bytes: 10}}},
		{Kind: sysevent.FDIO, PID: 11, FD: 4, IO: []sysevent.IOCount{{Name: "read", Calls: 1, Bytes: 7}}},
	} {
		l.Handle(&ev, emit)
	}
	want := []string{"openat /home/u/rel/a 4", "read /dev/pts/0 5", "write /data/log 0", "read /home/u/rel/a 0"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

type fakeProc struct {
	fds  map[[2]int]string
	cwd  map[int]string
	gone map[[2]int]bool // fds an exec closed
}

func (p *fakeProc) FD(pid, fd int) (string, error) {
	if s, ok := p.fds[[2]int{pid, fd}]; ok {
		return s, nil
	}
	return "", os.ErrNotExist
}

func (p *fakeProc) FDs(pid int) ([]int, error) {
	var out []int
	for k := range p.fds {
		if k[0] == pid {
			out = append(out, k[1])
		}
	}
	return out, nil
}

func (p *fakeProc) Cwd(pid int) (string, error) { return p.cwd[pid], nil }

func (p *fakeProc) HasFD(pid, fd int) (has, alive bool) { return !p.gone[[2]int{pid, fd}], true }

// sectionOf is a text report's section: its title's line to the blank line.
// withoutMissing drops a files table's missing rows and MISSING column,
// and its alignment.
func withoutMissing(section string) string {
	var out []string
	col := -1
	for _, line := range strings.Split(section, "\n") {
		f := strings.Fields(line)
		if i := slices.Index(f, "MISSING"); i >= 0 {
			col = i
		}
		if len(f) > 0 && f[0] == "missing" {
			continue
		}
		if col >= 0 && col < len(f) {
			f = slices.Delete(f, col, col+1)
		}
		out = append(out, strings.Join(f, " "))
	}
	return strings.Join(out, "\n")
}

func sectionOf(text, title string) string {
	i := strings.Index(text, title+"\n")
	if i < 0 {
		return ""
	}
	s := text[i:]
	if j := strings.Index(s, "\n\n"); j >= 0 {
		s = s[:j]
	}
	return s
}

// Any recording ReadReplay accepts replays through Live and the analyzers
// without a crash, however odd its events.
func FuzzReadReplay(f *testing.F) {
	f.Add([]byte(`{"event":{"Kind":1,"Root":5}}` + "\n" + `{"proc":{"op":"cwd","pid":5,"s":"/"}}` + "\n" +
		`{"event":{"Kind":2,"Name":"pipe2","TID":5,"PID":5,"Raw":"AwAAAAQAAAA="}}` + "\n" +
		`{"event":{"Kind":2,"Name":"connect","TID":5,"PID":5,"Raw":"AgAANX8AAAE=","Ret":0}}` + "\n" +
		`{"event":{"Kind":3,"PID":5,"ChildTID":6,"ChildPID":6}}` + "\n" + `{"event":{"Kind":5,"TID":6,"PID":6,"ExitCode":9}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rp, err := ReadReplay(bytes.NewReader(b))
		if err != nil {
			return
		}
		live := NewLive(rp)
		live.Begin(rp.Root, nil)
		systrace.Analyze(func(emit func(*strace.Event)) error {
			for _, ev := range rp.Events {
				live.Handle(ev, emit)
			}
			return nil
		}, nil, systrace.Options{})
	})
}
