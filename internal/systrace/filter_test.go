package systrace

import (
	"errors"
	"maps"
	"math"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/option"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/strace"
)

const filterLog = `1 10:00:00.000 openat(AT_FDCWD, "/data/a.root", O_RDONLY) = 3</data/a.root> <0.000010>
1 10:00:00.500 read(3</data/a.root>, "", 10) = 10 <0.000100>
2 10:00:01.000 connect(4<TCP:[1]>, {sa_family=AF_INET}, 16) = 0 <0.200000>
2 10:00:02.000 read(5</etc/hosts>, "", 10) = 5 <0.000010>
2 10:00:02.100 nanosleep({tv_sec=1, tv_nsec=0}, NULL) = 0 <1.000000>
2 10:00:03.200 +++ exited with 0 +++
`

func analyzeFiltered(t *testing.T, f Filter, o Options) *profile.SyscallReport {
	t.Helper()
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	p := strace.NewParser()
	r, err := Analyze(f.Wrap(func(emit func(*strace.Event)) error { return p.Parse(strings.NewReader(filterLog), emit) }), p, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func calls(r *profile.SyscallReport) map[string]int {
	m := map[string]int{}
	for _, s := range r.Syscalls {
		m[s.Name] = s.Calls
	}
	return m
}

func TestFilters(t *testing.T) {
	if got := calls(analyzeFiltered(t, Filter{PIDs: map[int]bool{1: true}}, Options{})); len(got) != 2 || got["read"] != 1 {
		t.Errorf("--pid 1: %v", got)
	}
	if got := calls(analyzeFiltered(t, Filter{Files: []string{"*.root"}}, Options{})); got["openat"] != 1 || got["read"] != 1 || len(got) != 2 {
		t.Errorf("--file *.root: %v", got)
	}
	if got := calls(analyzeFiltered(t, Filter{Files: []string{"/etc/*"}}, Options{})); got["read"] != 1 || len(got) != 1 {
		t.Errorf("--file /etc/*: %v", got)
	}
	if got := calls(analyzeFiltered(t, Filter{Category: "network"}, Options{})); got["connect"] != 1 || len(got) != 1 {
		t.Errorf("--category network: %v", got)
	}
	if got := calls(analyzeFiltered(t, Filter{From: 0.9, To: 2.05}, Options{})); got["connect"] != 1 || got["read"] != 1 || len(got) != 2 {
		t.Errorf("--since 0.9 --until 2.05: %v", got)
	}
	// Origin: the window counts from the trace's start, not the first event.
	start := 10*3600 + 0.5
	if got := calls(analyzeFiltered(t, Filter{From: 0.4, To: 1.55, Origin: start}, Options{})); got["connect"] != 1 || got["read"] != 1 || len(got) != 2 {
		t.Errorf("--since 0.4 --until 1.55 from 10:00:00.5: %v", got)
	}
	for _, bad := range []Filter{{Files: []string{"["}}, {Category: "disk"}, {From: 5, To: 1}, {Comms: []string{"/bin/sh"}}, {Comms: []string{""}}, {Comms: []string{"["}}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestTimeline(t *testing.T) {
	r := analyzeFiltered(t, Filter{}, Options{TimelineS: 1})
	if len(r.Timeline) != 3 {
		t.Fatalf("%d bins: %+v", len(r.Timeline), r.Timeline)
	}
	if r.Timeline[0].Calls["file I/O"] != 2 || r.Timeline[1].Calls["network"] != 1 || r.Timeline[2].Calls["sleep and timers"] != 1 {
		t.Errorf("%+v", r.Timeline)
	}
}

// A timeline shows the idle bins between busy ones, empty.
func TestTimelineShowsIdleBins(t *testing.T) {
	log := `1 10:00:00.000 read(3</a>, "", 1) = 0 <0.000010>
1 10:00:03.500 read(3</a>, "", 1) = 0 <0.000010>
`
	p := strace.NewParser()
	r, err := Analyze(func(emit func(*strace.Event)) error { return p.Parse(strings.NewReader(log), emit) }, p, Options{TimelineS: 1})
	if err != nil {
		t.Fatal(err)
	}
	var starts []float64
	for _, b := range r.Timeline {
		starts = append(starts, b.Start)
	}
	if len(starts) != 4 || starts[1] != 1 || r.Timeline[1].Calls["file I/O"] != 0 || r.Timeline[3].Calls["file I/O"] != 1 {
		t.Errorf("bins start at %v: %+v; want 0, 1, 2, 3, the middle two empty", starts, r.Timeline)
	}
}

// Live, the empty sample sent as tracing starts anchors the bins to the
// kernel's, but the time spent loading and attaching before the command's
// first call is not shown as idle bins of the command.
func TestTimelineLiveStartsAtTheFirstCall(t *testing.T) {
	a := &timeline{width: 0.1, bins: map[int]*profile.TimelineBin{}, maxBins: 100}
	a.Observe(&strace.Event{Kind: strace.Sample, Time: 100})                                           // tracing starts
	a.Observe(&strace.Event{Kind: strace.Sample, Name: "file I/O", Calls: 3, Dur: 0.01, Time: 100.25}) // kernel bin 2
	a.Observe(&strace.Event{Kind: strace.Sample, Name: "memory", Calls: 1, Dur: 0.01, Time: 100.45})   // kernel bin 4
	var r profile.SyscallReport
	a.Finish(&r)
	if len(r.Timeline) != 3 || math.Abs(r.Timeline[0].Start-0.2) > 1e-9 || r.Timeline[0].Calls["file I/O"] != 3 ||
		r.Timeline[1].Calls["memory"] != 0 || r.Timeline[2].Calls["memory"] != 1 {
		t.Errorf("%+v: want bins from 0.2 s (the first with calls) to 0.4 s", r.Timeline)
	}
}

// Calls past the timeline's last bin are counted, not lost silently.
func TestTimelineCountsWhatItDrops(t *testing.T) {
	a := &timeline{width: 1, bins: map[int]*profile.TimelineBin{}, maxBins: 2}
	for _, at := range []float64{100, 100.5, 101, 102, 103.5} {
		a.Observe(&strace.Event{Kind: strace.Syscall, Name: "read", Time: at, Dur: 0.001})
	}
	var r profile.SyscallReport
	a.Finish(&r)
	if len(r.Timeline) != 2 || r.TimelineDropped != 2 {
		t.Errorf("%d bins, %d dropped; want 2 bins and the 2 calls past them", len(r.Timeline), r.TimelineDropped)
	}
}

// -p on a log keeps the process's threads (made by clone with
// CLONE_THREAD), not the processes it forks.
func TestFilterPIDKeepsThreads(t *testing.T) {
	log := `1 10:00:00.000 clone(child_stack=0x7f, flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM) = 3 <0.000050>
1 10:00:00.001 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD) = 4 <0.000050>
3 10:00:00.002 openat(AT_FDCWD, "/data/t", O_RDONLY) = 5</data/t> <0.000010>
4 10:00:00.003 openat(AT_FDCWD, "/data/f", O_RDONLY) = 5</data/f> <0.000010>
`
	f := Filter{PIDs: map[int]bool{1: true}}
	p := strace.NewParser()
	r, err := Analyze(f.Wrap(func(emit func(*strace.Event)) error { return p.Parse(strings.NewReader(log), emit) }), p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := calls(r); got["clone"] != 2 || got["openat"] != 1 || len(r.Files) != 1 || r.Files[0].Target != "/data/t" {
		t.Errorf("-p 1: calls %v, files %+v; want both clones and the thread's open of /data/t, not the child's", got, r.Files)
	}
	if f.PIDs[3] {
		t.Error("the filter's own PID set was changed")
	}
}

// strace -f prints a new thread's first calls as it makes them, often
// before its creator's clone returns: -p keeps them once the clone says
// whose thread they were, and drops those of another process's thread.
func TestFilterPIDKeepsThreadLinesBeforeTheClone(t *testing.T) {
	log := `1 10:00:00.000 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM, child_tid=0x7f}, 88 <unfinished ...>
3 10:00:00.001 openat(AT_FDCWD, "/data/early", O_RDONLY) = 5</data/early> <0.000010>
3 10:00:00.002 read(5</data/early>, "abc", 3) = 3 <0.000010>
1 10:00:00.003 <... clone3 resumed>) = 3 <0.000050>
7 10:00:00.004 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM, child_tid=0x7f}, 88 <unfinished ...>
8 10:00:00.005 openat(AT_FDCWD, "/data/other", O_RDONLY) = 6</data/other> <0.000010>
7 10:00:00.006 <... clone3 resumed>) = 8 <0.000050>
8 10:00:00.007 read(6</data/other>, "abc", 3) = 3 <0.000010>
3 10:00:00.008 read(5</data/early>, "de", 2) = 2 <0.000010>
9 10:00:00.009 read(0</dev/null>, "", 2) = 0 <0.000010>
`
	f := Filter{PIDs: map[int]bool{1: true}}
	p := strace.NewParser()
	r, err := Analyze(f.Wrap(func(emit func(*strace.Event)) error { return p.Parse(strings.NewReader(log), emit) }), p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := calls(r)
	if got["clone3"] != 1 || got["openat"] != 1 || got["read"] != 2 {
		t.Errorf("-p 1: calls %v, want its clone3 and its thread's openat and 2 reads", got)
	}
	if len(r.Files) != 1 || r.Files[0].Target != "/data/early" || r.Files[0].BytesRead != 5 {
		t.Errorf("-p 1: files %+v, want /data/early with 5 bytes read", r.Files)
	}
}

// A call is timed by its entry, so one that was unfinished while later
// lines completed comes out before an earlier-completed but later-started
// event: no filter may take it for being before the log's start.
func TestFilterKeepsACallUnfinishedAtTheLogsStart(t *testing.T) {
	log := `1 10:00:00.000 connect(3<socket:[7]>, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.0.0.1")}, 16 <unfinished ...>
2 10:00:00.001 read(4</etc/hosts>, "x", 1) = 1 <0.000010>
1 10:00:00.300 <... connect resumed>) = 0 <0.300000>
`
	f := Filter{Category: "network"}
	p := strace.NewParser()
	r, err := Analyze(f.Wrap(func(emit func(*strace.Event)) error { return p.Parse(strings.NewReader(log), emit) }), p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := calls(r); got["connect"] != 1 || got["read"] != 0 {
		t.Errorf("--category network: calls %v, want the connect alone", got)
	}
}

// A poll in a log counts for the first fd it waited on, in its file row and
// under --file, as a poll the live source kept whole does.
func TestPollCountsForItsFD(t *testing.T) {
	log := `1 10:00:00.0 sendto(5<UDP:[10.0.0.2:41000->10.0.0.1:53]>, "q", 1, 0, NULL, 0) = 1 <0.000030>
1 10:00:00.1 poll([{fd=5<UDP:[10.0.0.2:41000->10.0.0.1:53]>, events=POLLIN}], 1, 5000) = 0 (Timeout) <5.000100>
1 10:00:05.2 read(3</etc/hosts>, "", 10) = 0 <0.000010>
`
	f := Filter{Files: []string{"UDP:*"}}
	p := strace.NewParser()
	r, err := Analyze(f.Wrap(strace.Named(func(emit func(*strace.Event)) error { return p.Parse(strings.NewReader(log), emit) }, p)), p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := calls(r); got["poll"] != 1 || got["sendto"] != 1 || got["read"] != 0 {
		t.Errorf("--file 'UDP:*': calls %v, want the sendto and the poll", got)
	}
	if len(r.Files) != 1 || r.Files[0].Calls != 2 || r.Files[0].TimeS < 5 {
		t.Errorf("files %+v, want the UDP socket's row with 2 calls and the poll's 5 s", r.Files)
	}
}

// A log of sh running cat twice and ls once, with a thread in one cat.
const commLog = `1 10:00:00.000 execve("/bin/sh", ["sh", "x"], 0x1 /* 3 vars */) = 0 <0.000100>
1 10:00:00.010 clone(child_stack=NULL, flags=SIGCHLD) = 2 <0.000050>
2 10:00:00.020 execve("/usr/bin/cat", ["cat", "a"], 0x1 /* 3 vars */) = 0 <0.000100>
2 10:00:00.030 clone(child_stack=0x1, flags=CLONE_VM|CLONE_THREAD|CLONE_SIGHAND) = 5 <0.000010>
5 10:00:00.031 read(3</a>, "", 10) = 10 <0.000010>
2 10:00:00.040 read(3</a>, "", 10) = 10 <0.000010>
2 10:00:00.050 +++ exited with 0 +++
1 10:00:00.060 clone(child_stack=NULL, flags=SIGCHLD) = 3 <0.000050>
3 10:00:00.061 execve("/usr/bin/nocat", ["nocat"], 0x1 /* 3 vars */) = -1 ENOENT (No such file or directory) <0.000010>
3 10:00:00.062 read(3</b>, "", 10) = 10 <0.000010>
3 10:00:00.070 execve("/usr/bin/ls", ["ls"], 0x1 /* 3 vars */) = 0 <0.000100>
3 10:00:00.080 getdents64(3</>, 0x1, 10) = 0 <0.000010>
3 10:00:00.090 +++ exited with 0 +++
1 10:00:00.100 clone(child_stack=NULL, flags=SIGCHLD) = 4 <0.000050>
4 10:00:00.101 read(3</c>, "", 10) = 10 <0.000010>
4 10:00:00.110 execve("/usr/bin/cat", ["cat", "c"], 0x1 /* 3 vars */) = 0 <0.000100>
4 10:00:00.120 read(3</c>, "", 10) = 10 <0.000010>
4 10:00:00.130 +++ exited with 0 +++
1 10:00:00.140 +++ exited with 0 +++
`

func TestFilterComm(t *testing.T) {
	for _, c := range []struct {
		comms []string
		want  map[string]int
		procs int
	}{
		// Both cats from their exec on, and the first one's thread; not
		// the read the second made before it became cat.
		{[]string{"cat"}, map[string]int{"execve": 2, "clone": 1, "read": 3}, 2},
		{[]string{"l?"}, map[string]int{"execve": 1, "getdents64": 1}, 1},
		{[]string{"ls", "c*"}, map[string]int{"execve": 3, "clone": 1, "read": 3, "getdents64": 1}, 3},
		// A failed exec selects nothing.
		{[]string{"nocat"}, map[string]int{}, 0},
	} {
		f := Filter{Comms: c.comms}
		if err := f.Validate(); err != nil {
			t.Fatal(err)
		}
		p := strace.NewParser()
		r, err := Analyze(f.Wrap(func(emit func(*strace.Event)) error { return p.Parse(strings.NewReader(commLog), emit) }), p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := calls(r); !maps.Equal(got, c.want) {
			t.Errorf("--comm %v: calls %v, want %v", c.comms, got, c.want)
		}
		if len(r.Processes) != c.procs {
			t.Errorf("--comm %v: %d processes, want %d: %+v", c.comms, len(r.Processes), c.procs, r.Processes)
		}
	}
}

// A filter's errors name its settings by their keys (option.Error), so that
// each front end words them its way: the command line as the flags it has
// always printed, a bench file as its keys.
func TestFilterErrorsNameSettings(t *testing.T) {
	for _, c := range []struct {
		f          Filter
		flags, key string
	}{
		{Filter{Files: []string{"["}}, `--file "[": syntax error in pattern`, `file: "[": syntax error in pattern`},
		{Filter{Comms: []string{"/bin/sh"}}, `--comm "/bin/sh": give a program's base name or a glob of one, such as cc1 or 'python*'`, `comm: "/bin/sh": give`},
		{Filter{Category: "disk"}, `--category "disk": give one of file I/O, network, IPC, memory, process, sleep and timers, other`, `category: "disk"`},
		{Filter{From: -1}, `--since -1: give a number of seconds after the start (a log's first timestamp; live, the command's release or -p's attach)`, `since: -1: give a number of seconds after the start (a log's first timestamp; live, the command's release or pid:'s attach)`},
		{Filter{To: math.NaN()}, `--until NaN: give a number of seconds`, `until: NaN`},
		{Filter{From: 5, To: 1}, `--until 1.000 is before --since 5.000`, `until: 1.000 is before since: 5.000`},
	} {
		err := c.f.Validate()
		var oe *option.Error
		if !errors.As(err, &oe) {
			t.Errorf("%+v: %v is not an option.Error", c.f, err)
			continue
		}
		if got := err.Error(); !strings.HasPrefix(got, c.flags) {
			t.Errorf("%+v: %q, want %q", c.f, got, c.flags)
		}
		if got := oe.Words(func(k string) string { return k + ":" }); !strings.HasPrefix(got, c.key) || strings.Contains(got, "--") {
			t.Errorf("%+v in keys: %q, want %q", c.f, got, c.key)
		}
	}
}
