package systrace

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/profile"
)

func parseAll(t *testing.T, log string) ([]*Event, *Parser) {
	t.Helper()
	p := NewParser()
	var evs []*Event
	if err := p.Parse(strings.NewReader(log), func(e *Event) { c := *e; evs = append(evs, &c) }); err != nil {
		t.Fatal(err)
	}
	return evs, p
}

func TestParseFormats(t *testing.T) {
	cases := []struct {
		line string
		want Event
	}{
		{`1234 10:20:30.123456 openat(AT_FDCWD</tmp>, "/etc/passwd", O_RDONLY|O_CLOEXEC) = 3</etc/passwd> <0.000012>`,
			Event{PID: 1234, Time: 37230.123456, Name: "openat", Ret: "3</etc/passwd>", Dur: 0.000012}},
		{`[pid  77] 1700000000.500000 read(3</etc/a b>, "x\")(", 4096) = 4 <0.000100>`,
			Event{PID: 77, Time: 1700000000.5, Name: "read", Ret: "4", Dur: 0.0001}},
		{`openat(AT_FDCWD, "/nope", O_RDONLY) = -1 ENOENT (No such file or directory)`,
			Event{Name: "openat", Ret: "-1", Errno: "ENOENT", Dur: -1}},
		{`5 mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f0000000000 <0.000005>`,
			Event{PID: 5, Name: "mmap", Ret: "0x7f0000000000", Dur: 0.000005}},
		{`9 12:00:00.000001 exit_group(0) = ?`, Event{PID: 9, Time: 43200.000001, Name: "exit_group", Ret: "?", Dur: -1}},
		{`9 12:00:00.5 write(1<pipe:[123]>, "a\nb", 3) = 3 <0.000002>`, Event{PID: 9, Time: 43200.5, Name: "write", Ret: "3", Dur: 0.000002}},
		// -t, -i, -n, and -ttt with -r.
		{`24276 18:02:14 getuid()                 = 0 <0.000036>`, Event{PID: 24276, Time: 64934, Name: "getuid", Ret: "0", Dur: 0.000036}},
		{`24255 18:02:14.828547 [00007fa668cc3507] getuid() = 0 <0.000044>`, Event{PID: 24255, Time: 64934.828547, Name: "getuid", Ret: "0", Dur: 0.000044}},
		{`24262 18:02:14.863961 [ 102] getuid()   = 0 <0.000042>`, Event{PID: 24262, Time: 64934.863961, Name: "getuid", Ret: "0", Dur: 0.000042}},
		{`[pid 24262] 18:02:14.863961 [ 102] [00007fa668cc3507] getuid() = 0`, Event{PID: 24262, Time: 64934.863961, Name: "getuid", Ret: "0", Dur: -1}},
		{`24283 1795370534.950344 (+     0.000143) getuid() = 0`, Event{PID: 24283, Time: 1795370534.950344, Name: "getuid", Ret: "0", Dur: -1}},
		{`24283 1795370534.950344 (+     0.000143) [????????????????] +++ exited with 0 +++`, Event{PID: 24283, Time: 1795370534.950344, Dur: -1}},
	}
	for _, c := range cases {
		evs, p := parseAll(t, c.line+"\n")
		if p.Bad != 0 || len(evs) != 1 {
			t.Errorf("%s: %d events, malformed %+v", c.line, len(evs), p.Malformed)
			continue
		}
		e := evs[0]
		if e.PID != c.want.PID || e.Name != c.want.Name || e.Ret != c.want.Ret || e.Errno != c.want.Errno ||
			abs(e.Time-c.want.Time) > 1e-6 || abs(e.Dur-c.want.Dur) > 1e-9 {
			t.Errorf("%s:\n got %+v\nwant %+v", c.line, *e, c.want)
		}
	}
}

// -r alone: each line carries the time since the previous call's entry, and
// the events' times are the running sum.
func TestParseRelativeTimestamps(t *testing.T) {
	log := `     0.000000 execve("/usr/bin/true", ["true"], 0x7ffda92e4fb8 /* 35 vars */) = 0 <0.000300>
     0.000126 getuid()                  = 0 <0.000010>
     1.500000 read(3</etc/hostname>, "h", 1) = 1 <0.000020>
     0.000100 +++ exited with 0 +++
`
	evs, p := parseAll(t, log)
	if p.Bad != 0 || len(evs) != 4 {
		t.Fatalf("%d events, malformed %+v", len(evs), p.Malformed)
	}
	for i, want := range []float64{0, 0.000126, 1.500126, 1.500226} {
		if abs(evs[i].Time-want) > 1e-9 {
			t.Errorf("event %d (%s) at %.6f s, want %.6f", i, evs[i].Name, evs[i].Time, want)
		}
	}
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

func TestUnfinishedResumedSignalsExits(t *testing.T) {
	log := `100 10:00:00.000000 read(3<TCP:[1.2.3.4:5->6.7.8.9:10]>,  <unfinished ...>
101 10:00:00.000100 write(1</dev/pts/0>, "hi", 2) = 2 <0.000010>
100 10:00:01.000000 <... read resumed>"abc", 4096) = 3 <1.000000>
101 10:00:01.100000 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=102} ---
102 10:00:01.200000 recvfrom(4<UDP:[0.0.0.0:1]>,  <unfinished ...>
101 10:00:01.300000 +++ exited with 3 +++
103 10:00:01.400000 +++ killed by SIGKILL +++
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
100.00    0.000010          10         1           write
------ ----------- ----------- --------- --------- ----------------
100.00    0.000010                     1           total
`
	evs, p := parseAll(t, log)
	if p.Bad != 0 {
		t.Fatalf("malformed: %+v", p.Malformed)
	}
	if len(evs) != 5 {
		t.Fatalf("%d events", len(evs))
	}
	read := evs[1]
	if read.Name != "read" || read.PID != 100 || read.Ret != "3" || read.Dur != 1 || !strings.Contains(read.Args, "4096") {
		t.Errorf("joined read: %+v", *read)
	}
	if evs[2].Kind != Signal || evs[2].Name != "SIGCHLD" || evs[3].Kind != Exit || evs[3].Status != 3 || evs[4].Kind != Killed || evs[4].Name != "SIGKILL" {
		t.Errorf("signal/exit/killed: %+v %+v %+v", *evs[2], *evs[3], *evs[4])
	}
	if u := p.Unfinished(); len(u) != 1 || u[0].Name != "recvfrom" {
		t.Errorf("unfinished: %+v", u)
	}
	if p.Summary != 5 {
		t.Errorf("summary lines skipped: %d", p.Summary)
	}
}

// strace -k prints each call's stack after it, a frame a line: skipped,
// counted, never malformed.
func TestParseStackFrames(t *testing.T) {
	log := `4799  23:10:23.616587 execve("/usr/bin/cat", ["cat", "/etc/hostname"], 0x7fff12880990 /* 35 vars */) = 0 <0.000319>
 > /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2(_dl_catch_error+0x26f0) [0x1ab70]
4799  23:10:23.618799 read(3</etc/hostname>, "vm\n", 131072) = 3 <0.000048>
 > /usr/lib/x86_64-linux-gnu/libc.so.6(read+0x11) [0x10b7d1]
 > /usr/bin/cat(_init+0x2a4f) [0x4a4f]
 > unexpected_backtracing_error [0x7f12]
`
	evs, p := parseAll(t, log)
	if p.Bad != 0 || len(evs) != 2 || p.Frames != 4 || evs[1].Name != "read" || evs[1].Line != 3 {
		t.Fatalf("%d events, %d frames, malformed %+v", len(evs), p.Frames, p.Malformed)
	}
}

// strace -Y (--decode-pids=comm) writes each PID with its command.
func TestParsePIDsWithComm(t *testing.T) {
	log := `5388<sh> 23:11:18.485863 vfork( <unfinished ...>
5388<sh> 23:11:18.486257 <... vfork resumed>) = 5389<cat> <0.000386>
5389<cat> 23:11:18.487000 read(3</etc/hostname>, "vm\n", 131072) = 3 <0.000048>
[pid  5390<a b>] 23:11:18.488000 close(3) = 0 <0.000001>
12<x 23:11:18.489000 close(3) = 0 <0.000001>
`
	evs, p := parseAll(t, log)
	if len(evs) != 3 || p.Bad != 1 || p.Malformed[0].Line != 5 {
		t.Fatalf("%d events, malformed %+v", len(evs), p.Malformed)
	}
	for i, want := range []int{5388, 5389, 5390} {
		if evs[i].PID != want {
			t.Errorf("event %d (%s): pid %d, want %d", i, evs[i].Name, evs[i].PID, want)
		}
	}
	if evs[0].Name != "vfork" || evs[1].Name != "read" || evs[1].Ret != "3" || evs[2].Name != "close" {
		t.Errorf("events %+v %+v %+v", *evs[0], *evs[1], *evs[2])
	}
}

func TestMalformedLinesAreReportedWithLineNumbers(t *testing.T) {
	log := "1 read(3</a>, \"abc\", 3) = 3\nthis is not strace\n1 write(1</b>, \"x\"\n1 <... open resumed>) = 3\n[pid 12 read(0, \"\", 1) = 0\n"
	evs, p := parseAll(t, log)
	if len(evs) != 1 || p.Bad != 4 {
		t.Fatalf("%d events, %d malformed: %+v", len(evs), p.Bad, p.Malformed)
	}
	for i, want := range []int{2, 3, 4, 5} {
		if p.Malformed[i].Line != want {
			t.Errorf("malformed[%d] at line %d, want %d", i, p.Malformed[i].Line, want)
		}
	}
}

func TestAnalyzeFileBytesAndWaits(t *testing.T) {
	log := `1 10:00:00.0 openat(AT_FDCWD, "/d/a", O_RDONLY) = 3</d/a> <0.000010>
1 10:00:00.1 read(3</d/a>, "..."..., 4096) = 4096 <0.000020>
1 10:00:00.2 read(3</d/a>, "", 4096) = 0 <0.000005>
1 10:00:00.3 write(4</d/b\x20c>, "..."..., 100) = 100 <0.000030>
1 10:00:00.4 poll([{fd=5<UDP:[127.0.0.1:1]>, events=POLLIN}], 1, 3000) = 0 (Timeout) <3.000000>
1 10:00:03.5 connect(6<TCP:[1]>, {sa_family=AF_INET}, 16) = -1 ECONNREFUSED (Connection refused) <0.001000>
1 10:00:03.6 +++ exited with 0 +++
`
	p := NewParser()
	r, err := Analyze(func(emit func(*Event)) error { return p.Parse(strings.NewReader(log), emit) }, p, Options{MaxWaits: 10})
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
		p := NewParser()
		r, err := Analyze(func(emit func(*Event)) error { return p.Parse(strings.NewReader(log), emit) }, p, Options{MinWaitS: tc.min})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Waits) != tc.want {
			t.Errorf("minimum %g s: waits %+v, want %d", tc.min, r.Waits, tc.want)
		}
	}
}

func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		`1234 10:20:30.123456 openat(AT_FDCWD</tmp>, "/etc/passwd", O_RDONLY) = 3</etc/passwd> <0.000012>`,
		`[pid  77] read(3, <unfinished ...>`, `<... read resumed>"abc", 3) = 3`, `--- SIGCHLD {} ---`,
		`+++ exited with 1 +++`, `% time     seconds`, `x(")`, `1 2 3`,
		"5 pipe2([3, 4], 0) = 0\n5 clone(flags=SIGCHLD) = 6\n6 close_range(3, 9, 0) = 0\n6 dup2(4, 1) = 1",
		`connect(3, {sa_family=AF_UNIX, sun_path=@"\"}, 5) = 0`,
		`accept(3, {sa_family=AF_INET6, sin6_port=htons(1), inet_pton(AF_INET6, "::1", &sin6_addr)}, [28]) = 4`,
		"1 splice(3</a>, [0], 5<pipe:[7]>, NULL, 30, 0) = 30\n1 sendfile(4, 3, [0] => [7], 7) = 7\n1 tee(8, 9<x>, 5, 0) = 5",
		"1 read(3</a>, \"x\", 1) = 1\n > /usr/lib/libc.so.6(read+0x11) [0x10b7d1]\n > unexpected_backtracing_error [0x1]",
		"5388<sh> 23:11:18.486257 <... vfork resumed>) = 5389<cat> <0.000386>\n[pid 5<a>] close(3) = 0\n7<> x",
		"1 read(3</a>,  <unfinished ...>\n1 <... read resumed>0x7f, 1) = ? ERESTARTSYS (To be restarted if SA_RESTART is set) <0.04>\n1 --- SIGALRM {si_signo=SIGALRM} ---\n1 rt_sigreturn({mask=[]}) = -1 EINTR (Interrupted system call)",
		"execve(\"/bin/sh\", [], 0x1) = 0\nvfork(strace: Process 9 attached\n <unfinished ...>\n[pid 9] close(3) = 0\n[pid 8] <... vfork resumed>) = 9\nstrace: Process 8 detached\n <detached ...>",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := NewParser()
		p.Parse(strings.NewReader(s), func(e *Event) {
			if e.Kind == Syscall && e.Name == "" {
				t.Fatal("a system call without a name")
			}
		})
		// The whole pipeline, with the fds followed as for a log without -y.
		r, _ := Analyze(nameFDs(func(emit func(*Event)) error { return NewParser().Parse(strings.NewReader(s), emit) }, newFDNamer()), nil, Options{MaxWaits: 5, TimelineS: 1})
		_ = r
	})
}

func TestLastEquals(t *testing.T) {
	for _, s := range []string{"", " = ", "a = b = c", " = = ", "a= b", "a =b", "x) = 0 <0.1>", "  =  ", "=", " =", "= "} {
		if got, want := lastEquals(s), strings.LastIndex(s, " = "); got != want {
			t.Errorf("lastEquals(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestSplitCallFastPathAgreesWithScan(t *testing.T) {
	for _, s := range []string{
		`3</a>, "x) = 1", 6) = 6 <0.000001>`,
		`AT_FDCWD, "/tmp/a) = b", O_RDONLY) = 3</tmp/a) = b> <0.000001>`,
		`NULL, 4096, PROT_READ, MAP_PRIVATE, -1, 0) = 0x7f0000000000`,
		`0) = ?`,
		`3, "(", 1) = -1 EBADF (Bad file descriptor) <0.000002>`,
		`3)                                = 0`, // strace -s 0 -ff: results padded to a column
		`3, ""..., 832)                    = 832`,
		`AT_FDCWD, "a)  = b", O_RDONLY)    = 3`,
		`AT_FDCWD, "x", O_RDONLY)          = 3</a  = 1>`,
		`"a = 1"                           = -1 ENOENT (No such file or directory)`,
	} {
		a1, r1, e1 := splitCall(s)
		a2, r2, e2 := scanCall(s)
		if a1 != a2 || r1 != r2 || (e1 == nil) != (e2 == nil) {
			t.Errorf("%s:\n fast %q %q %v\n scan %q %q %v", s, a1, r1, e1, a2, r2, e2)
		}
	}
}

// Lines as strace 6.1 -f -tt -T -y wrote them for a file named
// `a b>c\d` in a directory `q"x` under `s t`: spaces stay, '"' and '\' are
// escaped with a backslash, '>' as octal \76. Socket peers (-yy) keep their
// "->" unescaped.
func TestFdTargetsWithSpecialCharacters(t *testing.T) {
	log := `15:27:10.908227 openat(AT_FDCWD</tmp>, "/tmp/s t/q\"x/a b>c\\d", O_RDONLY) = 3</tmp/s t/q\"x/a b\76c\\d> <0.000014>
15:27:10.908330 read(3</tmp/s t/q\"x/a b\76c\\d>, "hi", 131072) = 2 <0.000182>
15:27:10.908400 read(4</tmp/a,b (1)>, "x", 1) = 1 <0.000001>
15:27:10.908500 recvfrom(5<TCP:[127.0.0.1:39000->127.0.0.1:80]>, "ok", 2, 0, NULL, NULL) = 2 <0.000002>
15:27:10.908600 poll([{fd=6<UDP:[10.0.0.2:41000->10.0.0.1:53]>, events=POLLIN}], 1, 5000) = 0 (Timeout) <5.000000>
`
	evs, p := parseAll(t, log)
	if p.Bad != 0 || len(evs) != 5 {
		t.Fatalf("%d events, malformed %+v", len(evs), p.Malformed)
	}
	const path = `/tmp/s t/q"x/a b>c\d`
	for i, want := range []string{path, path, "/tmp/a,b (1)", "TCP:[127.0.0.1:39000->127.0.0.1:80]", ""} {
		if got := evs[i].Target(); got != want {
			t.Errorf("line %d: target %q, want %q", i+1, got, want)
		}
	}
	if evs[0].Ret != `3</tmp/s t/q\"x/a b\76c\\d>` || evs[0].Dur != 0.000014 {
		t.Errorf("openat: ret %q, dur %v", evs[0].Ret, evs[0].Dur)
	}
	if n, ok := evs[1].RetInt(); !ok || n != 2 {
		t.Errorf("read returned %d %v", n, ok)
	}
	if evs[4].Errno != "" || evs[4].Ret != "0" {
		t.Errorf("poll: ret %q errno %q", evs[4].Ret, evs[4].Errno)
	}
	if got := firstAnnotation(evs[4].Args); got != "UDP:[10.0.0.2:41000->10.0.0.1:53]" {
		t.Errorf("poll's first fd: %q", got)
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`plain`: "plain", `a\"b`: `a"b`, `a\\b`: `a\b`, `a\76b`: "a>b", `a\0767`: "a>7", `\x41\n\t`: "A\n\t",
		`trailing\`: `trailing\`, `\q`: `\q`,
	} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
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
	p := NewParser()
	r, err := Analyze(func(emit func(*Event)) error { return p.Parse(strings.NewReader(log), emit) }, p, Options{})
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
	events := []Event{
		{Kind: Syscall, Name: "read", PID: 10, TGID: 10, Calls: 7, Dur: 0.001, Ret: "0"},
		{Kind: Syscall, Name: "poll", PID: 11, TGID: 10, Time: 1000.5, Dur: 0.3, Ret: "0"},
		{Kind: Syscall, Name: "futex", PID: 12, TGID: 10, Time: 1001, Dur: 0.01, Ret: "0"},
		{Kind: Exit, PID: 12, TGID: 10, Time: 1001.5},
	}
	r, err := Analyze(func(emit func(*Event)) error {
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

// lookupCall's table finds every call callInfos knows, and nothing else.
func TestLookupCall(t *testing.T) {
	ids := map[int]bool{}
	for name, c := range callInfos {
		if got := lookupCall(name); got != c {
			t.Errorf("lookupCall(%q) = %+v, want %+v", name, got, c)
		}
		if c.id < 1 || c.id > knownCalls || ids[c.id] {
			t.Errorf("%s: id %d is not unique in 1..%d", name, c.id, knownCalls)
		}
		ids[c.id] = true
	}
	for _, name := range []string{"", "nosuchcall", "rea", "readd", "READ", "open\x00"} {
		if got := lookupCall(name); got != otherCall {
			t.Errorf("lookupCall(%q) = %+v, want otherCall", name, got)
		}
	}
	if lookupCall("read").category != "file I/O" || !lookupCall("openat").open {
		t.Error("read or openat lost what they are")
	}
}

// The transfer calls move bytes between two fds: the one they read from
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
		p := NewParser()
		r, err := Analyze(nameFDs(func(emit func(*Event)) error { return p.Parse(strings.NewReader(c.log), emit) }, newFDNamer()), p, Options{})
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
	events := []Event{
		{Kind: Syscall, Name: "poll", PID: 10, TGID: 10, Time: 1000.5, Dur: 0.3, Ret: "0"},
		{Kind: Syscall, Name: "clone", PID: 10, TGID: 10, Time: 1001, Ret: "20"},
		{Kind: Syscall, Name: "clone", PID: 10, TGID: 10, Time: 1001.2, Ret: "30"},
		{Kind: Syscall, Name: "read", PID: 20, TGID: 20, Time: 1001.1, Ret: "0"},
		{Kind: Exit, PID: 30, TGID: 30, Time: 1001.4},
	}
	r, err := Analyze(func(emit func(*Event)) error {
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
	src := func(emit func(*Event)) error {
		if err := NewParser().Parse(strings.NewReader(log), emit); err != nil {
			return err
		}
		emit(&Event{Kind: Failed, PID: Unattributed, Name: "getxattr", Errno: "ENODATA", Calls: 5})
		emit(&Event{Kind: Failed, PID: Unattributed, Name: "connect", Errno: "ECONNREFUSED", Calls: 2})
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
			t.Errorf("syscalls table counted a Failed event: %+v", s)
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
	p := NewParser()
	r, err := Analyze(Named(func(emit func(*Event)) error { return p.Parse(strings.NewReader(log), emit) }, p), p, Options{MaxWaits: 10})
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
