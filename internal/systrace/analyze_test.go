package systrace

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/strace"
)

func TestAnalyzeFileBytesAndWaits(t *testing.T) {
	log := `1 10:00:00.0 openat(AT_FDCWD, "/d/a", O_RDONLY) = 3</d/a> <0.000010>
1 10:00:00.1 read(3</d/a>, "..."..., 4096) = 4096 <0.000020>
1 10:00:00.2 read(3</d/a>, "", 4096) = 0 <0.000005>
1 10:00:00.3 write(4</d/b\x20c>, "..."..., 100) = 100 <0.000030>
1 10:00:00.4 poll([{fd=5<UDP:[127.0.0.1:1]>, events=POLLIN}], 1, 3000) = 0 (Timeout) <3.000000>
1 10:00:03.5 connect(6<TCP:[1]>, {sa_family=AF_INET}, 16) = -1 ECONNREFUSED (Connection refused) <0.001000>
1 10:00:03.6 +++ exited with 0 +++
`
	p := strace.NewParser()
	r, err := Analyze(func(emit func(*strace.Event)) error { return p.Parse(strings.NewReader(log), emit) }, p, Options{MaxWaits: 10})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]profile.FileStat{}
	for _, f := range r.Files {
		files[f.Target] = f
	}
	if a := files["/d/a"]; a.BytesRead != 4096 || a.Reads != 2 || a.Opens != 1 || a.Kind != "file" {
		t.Errorf("/d/a: %+v", a)
	}
	if b := files["/d/b c"]; b.BytesWritten != 100 {
		t.Errorf("escaped path: %+v", files)
	}
	if len(r.Waits) == 0 || r.Waits[0].Name != "poll" || r.Waits[0].DurS != 3 {
		t.Errorf("top wait: %+v", r.Waits)
	}
	if r.Syscalls[0].Name != "poll" || r.Categories[0].Category != "IPC" {
		t.Errorf("hot spot %+v, category %+v", r.Syscalls[0], r.Categories[0])
	}
	if len(r.Processes) != 1 || r.Processes[0].Exit == nil || *r.Processes[0].Exit != 0 {
		t.Errorf("process: %+v", r.Processes)
	}
}

// With a minimum (the live source's --min-wait), shorter waits stay out of
// the list: the connect of 1 ms goes, the poll of 3 s stays.
func TestAnalyzeWaitsMinimum(t *testing.T) {
	log := `1 10:00:00.4 poll([{fd=5<UDP:[127.0.0.1:1]>, events=POLLIN}], 1, 3000) = 0 (Timeout) <3.000000>
1 10:00:03.5 connect(6<TCP:[1]>, {sa_family=AF_INET}, 16) = -1 ECONNREFUSED (Connection refused) <0.001000>
`
	for _, tc := range []struct {
		min  float64
		want int
	}{{0, 2}, {0.001, 2}, {0.0011, 1}, {4, 0}} {
		p := strace.NewParser()
		r, err := Analyze(func(emit func(*strace.Event)) error { return p.Parse(strings.NewReader(log), emit) }, p, Options{MinWaitS: tc.min})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Waits) != tc.want {
			t.Errorf("minimum %g s: waits %+v, want %d", tc.min, r.Waits, tc.want)
		}
	}
}

// Threads are folded into their process: in a log, those made by clone
// with CLONE_THREAD (whose first calls strace may print before the clone
// returns); a process a thread starts is its process's child, and a
// thread's exit is not its process's.
func TestProcessTreeFoldsThreads(t *testing.T) {
	log := `101 10:00:00.000050 openat(AT_FDCWD, "/etc/hostname", O_RDONLY) = 3 <0.000010>
100 10:00:00.000000 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|CLONE_SETTLS, exit_signal=0, stack=0x7f, stack_size=0x7ffb00}, 88) = 101 <0.000050>
101 10:00:00.000200 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x7f) = 102 <0.000100>
102 10:00:00.000300 execve("/bin/true", ["true"], 0x7ff /* 1 var */) = 0 <0.000200>
102 10:00:00.000500 exit_group(0) = ?
102 10:00:00.000600 +++ exited with 0 +++
101 10:00:00.000700 exit(0) = ?
101 10:00:00.000800 +++ exited with 0 +++
100 10:00:00.000900 exit_group(3) = ?
100 10:00:00.001000 +++ exited with 3 +++
`
	p := strace.NewParser()
	r, err := Analyze(func(emit func(*strace.Event)) error { return p.Parse(strings.NewReader(log), emit) }, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Processes) != 2 {
		t.Fatalf("processes %+v, want 100 (with its thread 101) and 102", r.Processes)
	}
	main, child := r.Processes[0], r.Processes[1]
	if main.PID != 100 || main.Threads != 2 || main.Calls != 5 || main.Exit == nil || *main.Exit != 3 || main.Start != 36000 {
		t.Errorf("process 100: %+v, want 2 threads, 5 calls, exit 3, start 36000 (the thread's first call)", main)
	}
	if child.PID != 102 || child.Parent != 100 || child.Exec != "/bin/true" || child.Threads != 0 {
		t.Errorf("process 102: %+v, want a child of 100 (started by its thread 101) running /bin/true", child)
	}
}

// Live events name their process (TGID); aggregates carry no time, and the
// -p process's program comes from Options.Running.
func TestProcessTreeLiveThreads(t *testing.T) {
	events := []strace.Event{
		{Kind: strace.Syscall, Name: "read", PID: 10, TGID: 10, Calls: 7, Dur: 0.001, Ret: "0"},
		{Kind: strace.Syscall, Name: "poll", PID: 11, TGID: 10, Time: 1000.5, Dur: 0.3, Ret: "0"},
		{Kind: strace.Syscall, Name: "futex", PID: 12, TGID: 10, Time: 1001, Dur: 0.01, Ret: "0"},
		{Kind: strace.Exit, PID: 12, TGID: 10, Time: 1001.5},
	}
	r, err := Analyze(func(emit func(*strace.Event)) error {
		for i := range events {
			emit(&events[i])
		}
		return nil
	}, nil, Options{Running: map[int]string{10: "/usr/bin/python3"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Processes) != 1 {
		t.Fatalf("processes %+v, want one", r.Processes)
	}
	p := r.Processes[0]
	if p.PID != 10 || p.Threads != 3 || p.Calls != 9 || p.Exec != "/usr/bin/python3" || p.Start != 1000.5 || p.End != 1001.5 || p.Exit != nil {
		t.Errorf("process %+v, want pid 10, 3 threads, 9 calls, /usr/bin/python3, 1000.5 to 1001.5, still running", p)
	}
}

// The transfer calls move bytes between two FDs: the one they read from
// counts reads, the other writes, each the call's calls and time. The same
// from a -y log and from one whose fds are followed.
func TestTransferCallsCountOnBothFDs(t *testing.T) {
	withY := `1 10:00:00.0 copy_file_range(3</d/src>, NULL, 4</d/cfr>, NULL, 100000, 0) = 100000 <0.000084>
1 10:00:00.1 sendfile(4</d/sf>, 3</d/src>, [0] => [70000], 70000) = 70000 <0.000066>
1 10:00:00.2 splice(3</d/src>, [0], 5<pipe:[77]>, NULL, 30000, 0) = 30000 <0.000043>
1 10:00:00.3 splice(6<pipe:[77]>, NULL, 7<TCP:[99]>, NULL, 30000, 0) = 30000 <0.000063>
1 10:00:00.4 tee(8<pipe:[78]>, 9<pipe:[79]>, 5, 0) = 5 <0.000040>
1 10:00:00.5 splice(6<pipe:[77]>, NULL, 7<TCP:[99]>, NULL, 30000, SPLICE_F_NONBLOCK) = -1 EAGAIN (Resource temporarily unavailable) <0.000001>
`
	// TCP:[99] is named by its connect, as in any -y log.
	withY = "1 10:00:00.0 connect(7<TCP:[99]>, {sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr(\"10.0.0.9\")}, 16) = 0 <0.000010>\n" + withY
	withoutY := `1 openat(AT_FDCWD, "/d/src", O_RDONLY) = 3
1 openat(AT_FDCWD, "/d/cfr", O_WRONLY|O_CREAT, 0644) = 4
1 copy_file_range(3, NULL, 4, NULL, 100000, 0) = 100000
1 close(4) = 0
1 openat(AT_FDCWD, "/d/sf", O_WRONLY|O_CREAT, 0644) = 4
1 sendfile(4, 3, [0] => [70000], 70000) = 70000
1 pipe2([6, 5], 0) = 0
1 splice(3, [0], 5, NULL, 30000, 0) = 30000
1 socket(AF_INET, SOCK_STREAM, IPPROTO_TCP) = 7
1 connect(7, {sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr("10.0.0.9")}, 16) = 0
1 splice(6, NULL, 7, NULL, 30000, 0) = 30000
1 pipe2([8, 10], 0) = 0
1 pipe2([11, 9], 0) = 0
1 tee(8, 9, 5, 0) = 5
1 splice(6, NULL, 7, NULL, 30000, SPLICE_F_NONBLOCK) = -1 EAGAIN (Resource temporarily unavailable)
`
	type io struct {
		reads, writes int
		read, written int64
	}
	for _, c := range []struct {
		name, log string
		pipes     [3]string
	}{
		{"-y", withY, [3]string{"pipe:[77]", "pipe:[78]", "pipe:[79]"}},
		{"without -y", withoutY, [3]string{"pipe:[#1]", "pipe:[#2]", "pipe:[#3]"}},
	} {
		p := strace.NewParser()
		r, err := Analyze(strace.Named(func(emit func(*strace.Event)) error { return p.Parse(strings.NewReader(c.log), emit) }, p), p, Options{})
		if err != nil || p.Bad != 0 {
			t.Fatalf("%s: %v, malformed %+v", c.name, err, p.Malformed)
		}
		got := map[string]io{}
		for _, f := range r.Files {
			got[f.Target] = io{f.Reads, f.Writes, f.BytesRead, f.BytesWritten}
		}
		want := map[string]io{
			"/d/src":            {3, 0, 200000, 0},
			"/d/cfr":            {0, 1, 0, 100000},
			"/d/sf":             {0, 1, 0, 70000},
			c.pipes[0]:          {2, 1, 30000, 30000}, // the failed splice reads nothing
			"TCP:[10.0.0.9:80]": {0, 2, 0, 30000},
			c.pipes[1]:          {1, 0, 5, 0},
			c.pipes[2]:          {0, 1, 0, 5},
		}
		for target, w := range want {
			g := got[target]
			if g.reads != w.reads || g.writes != w.writes || g.read != w.read || g.written != w.written {
				t.Errorf("%s: %s: %+v, want %+v", c.name, target, g, w)
			}
		}
		calls := map[string]int{}
		for _, s := range r.Syscalls {
			calls[s.Name] = s.Calls
		}
		if calls["splice"] != 3 || calls["tee"] != 1 || calls["sendfile"] != 1 || calls["copy_file_range"] != 1 {
			t.Errorf("%s: calls %v: a transfer call counts once, not once per fd", c.name, calls)
		}
	}
}

// Live, a process is known between the trace's start and end, not only
// between the calls seen whole: the -p process ran from before the start,
// and one that has not exited runs until the end. One that exited ends
// there, and a child starts at its clone.
func TestProcessTreeLiveWindow(t *testing.T) {
	events := []strace.Event{
		{Kind: strace.Syscall, Name: "poll", PID: 10, TGID: 10, Time: 1000.5, Dur: 0.3, Ret: "0"},
		{Kind: strace.Syscall, Name: "clone", PID: 10, TGID: 10, Time: 1001, Ret: "20"},
		{Kind: strace.Syscall, Name: "clone", PID: 10, TGID: 10, Time: 1001.2, Ret: "30"},
		{Kind: strace.Syscall, Name: "read", PID: 20, TGID: 20, Time: 1001.1, Ret: "0"},
		{Kind: strace.Exit, PID: 30, TGID: 30, Time: 1001.4},
	}
	r, err := Analyze(func(emit func(*strace.Event)) error {
		for i := range events {
			emit(&events[i])
		}
		return nil
	}, nil, Options{Running: map[int]string{10: "/usr/bin/python3"}, Window: func() (float64, float64) { return 999, 1003 }})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int][2]float64{10: {999, 1003}, 20: {1001, 1003}, 30: {1001.2, 1001.4}}
	for _, p := range r.Processes {
		if w := want[p.PID]; p.Start != w[0] || p.End != w[1] {
			t.Errorf("process %d: %g to %g, want %g to %g", p.PID, p.Start, p.End, w[0], w[1])
		}
	}
	if len(r.Processes) != len(want) {
		t.Errorf("processes %+v", r.Processes)
	}
}

// Failed calls are counted by system call and errno: a log's one by one,
// the live source's as counts (Failed events), which no other table sees.
func TestAnalyzeErrnos(t *testing.T) {
	log := `1 openat(AT_FDCWD, "/a", O_RDONLY) = -1 ENOENT (No such file or directory)
1 openat(AT_FDCWD, "/b", O_RDONLY) = -1 ENOENT (No such file or directory)
1 openat(AT_FDCWD, "/c", O_WRONLY) = -1 EACCES (Permission denied)
1 getxattr("/d", "user.x", NULL, 0) = -1 ENODATA (No data available)
1 read(0, "", 1) = 0
1 nanosleep({tv_sec=1, tv_nsec=0},  <unfinished ...>
1 <... nanosleep resumed>0x7ffd) = ? ERESTART_RESTARTBLOCK (Interrupted by signal)
`
	src := func(emit func(*strace.Event)) error {
		if err := strace.NewParser().Parse(strings.NewReader(log), emit); err != nil {
			return err
		}
		emit(&strace.Event{Kind: strace.Failed, PID: strace.Unattributed, Name: "getxattr", Errno: "ENODATA", Calls: 5})
		emit(&strace.Event{Kind: strace.Failed, PID: strace.Unattributed, Name: "connect", Errno: "ECONNREFUSED", Calls: 2})
		return nil
	}
	r, err := Analyze(src, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The call a signal interrupted failed too, as strace -c counts it.
	want := []profile.ErrnoStat{{Syscall: "getxattr", Errno: "ENODATA", Calls: 6}, {Syscall: "connect", Errno: "ECONNREFUSED", Calls: 2}, {Syscall: "openat", Errno: "ENOENT", Calls: 2},
		{Syscall: "nanosleep", Errno: "ERESTART_RESTARTBLOCK", Calls: 1}, {Syscall: "openat", Errno: "EACCES", Calls: 1}}
	if fmt.Sprint(r.Errnos) != fmt.Sprint(want) {
		t.Errorf("errnos %v, want %v", r.Errnos, want)
	}
	interrupted := profile.SyscallStat{}
	for _, s := range r.Syscalls {
		if s.Name == "nanosleep" {
			interrupted = s
		}
	}
	if interrupted.Calls != 1 || interrupted.Errors != 1 {
		t.Errorf("interrupted call: %+v, want 1 call, 1 error", interrupted)
	}
	// The counts are not calls: the syscalls table and the process tree
	// have only the log's.
	for _, s := range r.Syscalls {
		if s.Name == "connect" || (s.Name == "getxattr" && s.Calls != 1) {
			t.Errorf("syscalls table counted a strace.Failed event: %+v", s)
		}
	}
	if len(r.Processes) != 1 {
		t.Errorf("processes %+v", r.Processes)
	}
	// --category keeps a Failed event of its category only.
	f := &Filter{Category: "network"}
	r, _ = Analyze(f.Wrap(src), nil, Options{})
	if fmt.Sprint(r.Errnos) != fmt.Sprint([]profile.ErrnoStat{{Syscall: "connect", Errno: "ECONNREFUSED", Calls: 2}}) {
		t.Errorf("--category network: errnos %v", r.Errnos)
	}
}

// The hot spots label a call with the category the category table counts
// its time in: a poll that waited 5 s on a DNS socket and 0.1 s on a pipe
// is network, as its time is in the category table; reads of a pipe are
// IPC; a call always in one category keeps it.
func TestHotSpotsCategoryAsCategoryTable(t *testing.T) {
	log := `100 10:00:00.000000 socket(AF_INET, SOCK_DGRAM, IPPROTO_IP) = 3<UDP:[12345]> <0.000010>
100 10:00:00.000100 connect(3<UDP:[12345]>, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.0.0.53")}, 16) = 0 <0.000010>
100 10:00:00.000200 poll([{fd=3<UDP:[10.0.0.2:1234->10.0.0.53:53]>, events=POLLIN}], 1, 5000) = 0 (Timeout) <5.000100>
100 10:00:05.000400 pipe2([4<pipe:[77]>, 5<pipe:[77]>], 0) = 0 <0.000010>
100 10:00:05.000500 poll([{fd=4<pipe:[77]>, events=POLLIN}], 1, 100) = 0 (Timeout) <0.100100>
100 10:00:05.100700 read(4<pipe:[77]>, "x", 1) = 1 <0.000300>
100 10:00:05.101100 read(4<pipe:[77]>, "x", 1) = 1 <0.000200>
100 10:00:05.101400 openat(AT_FDCWD</>, "/etc/hosts", O_RDONLY) = 6</etc/hosts> <0.000010>
100 10:00:05.101500 read(6</etc/hosts>, "x", 1) = 1 <0.000100>
100 10:00:05.101700 exit_group(0) = ?
`
	p := strace.NewParser()
	r, err := Analyze(strace.Named(func(emit func(*strace.Event)) error { return p.Parse(strings.NewReader(log), emit) }, p), p, Options{MaxWaits: 10})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range r.Syscalls {
		got[s.Name] = s.Category
	}
	want := map[string]string{"poll": "network", "read": "IPC", "socket": "network", "connect": "network", "pipe2": "IPC", "openat": "file I/O"}
	if !maps.Equal(got, want) {
		t.Errorf("hot spots' categories %v, want %v", got, want)
	}
	if r.Categories[0].Category != "network" || r.Categories[0].TimeS < 5 {
		t.Errorf("the category table: %+v, want network first with the DNS poll's 5 s", r.Categories)
	}
}

// The whole pipeline over any text: the parser (strace's FuzzParseLine
// fuzzes it alone), the fds followed as for a log without -y, and every
// analyzer.
func FuzzAnalyze(f *testing.F) {
	for _, s := range []string{
		`1234 10:20:30.123456 openat(AT_FDCWD</tmp>, "/etc/passwd", O_RDONLY) = 3</etc/passwd> <0.000012>`,
		"5 pipe2([3, 4], 0) = 0\n5 clone(flags=SIGCHLD) = 6\n6 close_range(3, 9, 0) = 0\n6 dup2(4, 1) = 1",
		"1 splice(3</a>, [0], 5<pipe:[7]>, NULL, 30, 0) = 30\n1 sendfile(4, 3, [0] => [7], 7) = 7\n1 tee(8, 9<x>, 5, 0) = 5",
		"1 10:00:00.5 execve(\"/bin/sh\", [\"sh\"], 0x1) = 0 <0.1>\n1 10:00:01 poll([{fd=3<UDP:[1.2.3.4:5]>}], 1, 9) = 0 (Timeout) <2>\n1 10:00:03 +++ exited with 0 +++",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := strace.NewParser()
		r, err := Analyze(strace.Named(func(emit func(*strace.Event)) error { return p.Parse(strings.NewReader(s), emit) }, p), p, Options{MaxWaits: 5, TimelineS: 1})
		if err == nil && r.Events > p.Parsed {
			t.Fatalf("%d events analysed of %d parsed", r.Events, p.Parsed)
		}
	})
}
