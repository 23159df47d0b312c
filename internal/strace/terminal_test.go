package strace

import (
	"fmt"
	"strings"
	"testing"
)

// strace -f without -o, as written to a terminal (strace 6.1, sh -c 'ls;
// cat' and a python thread): the first process has no PID column until it
// forks, strace's messages cut call lines in two, and the last tracee alive
// loses its PID column again.
const terminalLog = `00:16:10.663966 execve("/usr/bin/sh", ["sh", "-c", "ls"], 0x7fff712e08b8 /* 35 vars */) = 0 <0.000367>
00:16:10.664552 brk(NULL)               = 0x558ff7891000 <0.000066>
00:16:10.674579 vfork(strace: Process 31269 attached
 <unfinished ...>
[pid 31269] 00:16:10.674908 execve("/usr/bin/ls", ["ls"], 0x558ff7891a70 /* 35 vars */ <unfinished ...>
[pid 31268] 00:16:10.675085 <... vfork resumed>) = 31269 <0.000492>
[pid 31268] 00:16:10.675100 wait4(-1,  <unfinished ...>
[pid 31269] 00:16:10.675205 <... execve resumed>) = 0 <0.000270>
[pid 31269] 00:16:10.698838 +++ exited with 0 +++
00:16:10.698848 <... wait4 resumed>[{WIFEXITED(s) && WEXITSTATUS(s) == 0}], 0, NULL) = 31269 <0.023653>
00:16:10.699000 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|SIGCHLDstrace: Process 31270 attached
, child_tidptr=0x7f0aa2920a10) = 31270 <0.000235>
[pid 31268] 00:16:10.699100 exit_group(0) = ?
[pid 31268] 00:16:10.699200 +++ exited with 0 +++
00:16:10.699300 write(1, "strace: Process 5 attached", 26) = 26 <0.000010>
strace: Exit of unknown pid 31271 ignored
[ Process PID=31270 runs in 32 bit mode. ]
00:16:10.699400 +++ exited with 0 +++
`

func TestParseTerminalOutput(t *testing.T) {
	evs, p := parseAll(t, terminalLog)
	if p.Bad != 0 || p.Notices != 4 || len(p.Unfinished()) != 0 {
		t.Fatalf("malformed %+v, %d notices, unfinished %+v", p.Malformed, p.Notices, p.Unfinished())
	}
	var got []string
	for _, e := range evs {
		got = append(got, fmt.Sprintf("%d:%s", e.PID, e.Name))
	}
	// The write's quoted "strace: Process 5 attached" is an argument, not a
	// message: it ends no line.
	want := "31268:execve 31268:brk 31268:vfork 31269:execve 31269: 31268:wait4 31268:clone 31268:exit_group 31268: 31270:write 31270:"
	if s := strings.Join(got, " "); s != want {
		t.Errorf("events\n got %s\nwant %s", s, want)
	}
	if evs[2].Ret != "31269" || evs[2].Line != 6 || evs[6].Ret != "31270" || !strings.Contains(evs[6].Args, "child_tidptr") || evs[6].Line != 11 {
		t.Errorf("joined calls: %+v %+v", *evs[2], *evs[6])
	}
}

// strace -q prints no attach messages: a tracee that starts a call while the
// first process's is in flight is a new one, not the first process.
func TestParseTerminalOutputQuiet(t *testing.T) {
	log := `execve("/usr/bin/sh", ["sh"], 0x1 /* 1 var */) = 0
vfork( <unfinished ...>
[pid   901] execve("/usr/bin/ls", ["ls"], 0x2 /* 1 var */) = 0
[pid   900] <... vfork resumed>) = 901
[pid   901] exit_group(0) = ?
[pid   901] +++ exited with 0 +++
exit_group(0) = ?
+++ exited with 0 +++
`
	evs, p := parseAll(t, log)
	var got []string
	for _, e := range evs {
		got = append(got, fmt.Sprintf("%d:%s", e.PID, e.Name))
	}
	if s := strings.Join(got, " "); p.Bad != 0 || s != "900:execve 901:execve 900:vfork 901:exit_group 901: 900:exit_group 900:" {
		t.Errorf("malformed %+v, events %s", p.Malformed, s)
	}
}

// strace -p names the process before its lines, and on Ctrl-C lets it go
// with its call in flight.
func TestParseTerminalOutputAttached(t *testing.T) {
	log := `strace: Process 31388 attached with 2 threads
00:17:28.650000 read(0, "x", 1) = 1 <0.000010>
00:17:28.659848 restart_syscall(<... resuming interrupted read ...>strace: Process 31388 detached
 <detached ...>
`
	evs, p := parseAll(t, log)
	if p.Bad != 0 || len(evs) != 1 || evs[0].PID != 31388 || len(p.Unfinished()) != 1 || p.Unfinished()[0].Name != "restart_syscall" {
		t.Errorf("malformed %+v, events %d (pid %d), unfinished %+v", p.Malformed, len(evs), evs[0].PID, p.Unfinished())
	}
}

// A log without a PID column at all (strace without -f) is released whole,
// as PID 0, and so are its events beyond the bound on those held back.
func TestParseTerminalOutputNeverForks(t *testing.T) {
	var b strings.Builder
	n := maxHeld + 10
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "close(%d) = -1 EBADF (Bad file descriptor)\n", i)
	}
	b.WriteString("vfork( <unfinished ...>\n[pid 7] <... vfork resumed>) = 8\nclose(1) = 0\n")
	evs, p := parseAll(t, b.String())
	if p.Bad != 0 || len(evs) != n+2 {
		t.Fatalf("malformed %+v, %d events, want %d", p.Malformed, len(evs), n+2)
	}
	for i, e := range evs[:n] {
		if e.PID != 0 || e.Line != i+1 {
			t.Fatalf("event %d: pid %d line %d", i, e.PID, e.Line)
		}
	}
	if evs[n].Name != "vfork" || evs[n].PID != 7 || evs[n+1].PID != 7 {
		t.Errorf("after the bound: %+v %+v", *evs[n], *evs[n+1])
	}
}

// A message that cut a line that never ends is malformed, named by the
// line it cut.
func TestParseTerminalOutputCutAtEnd(t *testing.T) {
	_, p := parseAll(t, "read(0, \"\", 1) = 0\nclone(flags=SIGCHLDstrace: Process 5 attached\n")
	if p.Bad != 1 || p.Malformed[0].Line != 2 || !strings.Contains(p.Malformed[0].Why, "never ended") {
		t.Errorf("malformed %+v", p.Malformed)
	}
}
