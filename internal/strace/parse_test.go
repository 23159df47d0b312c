package strace

import (
	"strings"
	"testing"
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
		// The fds followed as for a log without -y, and every question the
		// analyzers ask of an event (systrace's FuzzAnalyze runs them).
		nameFDs(func(emit func(*Event)) error { return NewParser().Parse(strings.NewReader(s), emit) }, newFDNamer())(func(e *Event) {
			e.Target()
			e.Peer()
			e.Child()
			e.Category()
			e.MissingPath()
			ExecArgv(e)
			if e.Moved() < 0 || e.Failures() < 0 || e.N() < 1 {
				t.Fatalf("%+v: moved %d, failures %d, calls %d", e, e.Moved(), e.Failures(), e.N())
			}
		})
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

// LookupCall's table finds every call callInfos knows, and nothing else.
func TestLookupCall(t *testing.T) {
	ids := map[int]bool{}
	for name, c := range callInfos {
		if got := LookupCall(name); got != c {
			t.Errorf("LookupCall(%q) = %+v, want %+v", name, got, c)
		}
		if c.ID < 1 || c.ID > knownCalls || ids[c.ID] {
			t.Errorf("%s: id %d is not unique in 1..%d", name, c.ID, knownCalls)
		}
		ids[c.ID] = true
	}
	for _, name := range []string{"", "nosuchcall", "rea", "readd", "READ", "open\x00"} {
		if got := LookupCall(name); got != otherCall {
			t.Errorf("LookupCall(%q) = %+v, want otherCall", name, got)
		}
	}
	if LookupCall("read").Category != "file I/O" || !LookupCall("openat").Open {
		t.Error("read or openat lost what they are")
	}
}
