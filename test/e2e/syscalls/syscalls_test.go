package syscalls

import (
	"bufio"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/test/e2e"
)

// The workload writes and reads files of known sizes, one with a name that
// strace must escape, connects to a port nobody listens on, then waits for a
// UDP reply that never comes, as a DNS lookup of a missing host does (seed
// 002).
const syscallWorkload = `
import json, os, signal, socket, sys
d = sys.argv[1]
# A read a signal interrupts (= ? ERESTARTSYS); the handler's write lets
# the retried read return.
r, w = os.pipe()
signal.signal(signal.SIGALRM, lambda *a: os.write(w, b"x"))
signal.setitimer(signal.ITIMER_REAL, 0.1)
os.read(r, 1)
sizes = json.loads(sys.argv[2])
for name, size in sizes.items():
    with open(os.path.join(d, name), "wb") as f:
        f.write(b"x" * (size // 3))
        f.write(b"y" * (size - size // 3))
for name in sizes:
    with open(os.path.join(d, name), "rb") as f:
        while f.read(4096):
            pass
c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
try:
    c.connect(("127.0.0.1", 1))
except OSError:
    pass
c.close()
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
s.settimeout(0.4)
try:
    s.recvfrom(512)
except socket.timeout:
    pass
`

// workloadFiles are the files the workload writes and reads, and their sizes.
var workloadFiles = map[string]int64{"a.bin": 10000, "b.bin": 123456, `c d, "e">f\g (1).bin`: 5000}

func workloadSizes(t *testing.T) string {
	b, err := json.Marshal(workloadFiles)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// eachLogLine calls fn with each line of an strace log.
func eachLogLine(t *testing.T, log string, fn func(line string)) {
	t.Helper()
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20) // TestSyscallsLongLines reads lines of 16 MiB and more
	for sc.Scan() {
		fn(sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// strace -C's summary table from the end of the log: calls per syscall.
func straceSummary(t *testing.T, log string) map[string]int {
	t.Helper()
	calls, _ := straceTable(t, log)
	return calls
}

// straceTable reads strace -C's summary table from the end of the log:
// calls and failed calls per syscall.
func straceTable(t *testing.T, log string) (calls, errors map[string]int) {
	t.Helper()
	calls, errors = map[string]int{}, map[string]int{}
	in := false
	eachLogLine(t, log, func(line string) {
		if strings.HasPrefix(line, "% time") {
			in = true
			return
		}
		fields := strings.Fields(line)
		if !in || len(fields) < 5 || strings.HasPrefix(line, "---") || fields[len(fields)-1] == "total" {
			return
		}
		// % time, seconds, usecs/call, calls, [errors], syscall
		name := fields[len(fields)-1]
		n, err := strconv.Atoi(fields[3])
		if err != nil {
			t.Fatalf("summary line %q", line)
		}
		calls[name] = n
		if len(fields) == 6 {
			if errors[name], err = strconv.Atoi(fields[4]); err != nil {
				t.Fatalf("summary line %q", line)
			}
		}
	})
	if len(calls) == 0 {
		t.Fatal("no strace summary in the log")
	}
	return calls, errors
}

// straceFailure matches a failed call's line in an strace log (-f -o, with
// or without -tt): its name, started or resumed, and its errno; a call a
// signal interrupted returns "?" with the kernel's restart code.
var straceFailure = regexp.MustCompile(`^\d+ +(?:\d\d:\d\d:\d\d\.\d+ +)?(?:<\.\.\. (\w+) resumed>|(\w+)\().*\) += (?:-1|\?) (E[A-Z0-9_]+) `)

// straceErrnos counts the failed calls of an strace log by system call and
// errno, with a pattern of its own (the oracle shares no code with the
// parser).
func straceErrnos(t *testing.T, log string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	eachLogLine(t, log, func(line string) {
		if m := straceFailure.FindStringSubmatch(line); m != nil {
			counts[m[1]+m[2]+" "+m[3]]++
		}
	})
	if len(counts) == 0 {
		t.Fatal("no failed calls in the strace log")
	}
	return counts
}

// assertErrnosEqual checks the report's failed calls by errno against the
// strace log's.
func assertErrnosEqual(t *testing.T, r *profile.SyscallReport, want map[string]int) {
	t.Helper()
	got := map[string]int{}
	for _, e := range r.Errnos {
		got[e.Syscall+" "+e.Errno] += e.Calls
	}
	if !maps.Equal(got, want) {
		t.Errorf("failed calls by errno:\n fusescope %v\n strace    %v", got, want)
	}
}

// assertCallsEqual checks the report's per-syscall calls and errors against
// strace -c's in the summary at the end of log.
func assertCallsEqual(t *testing.T, r *profile.SyscallReport, log string) {
	t.Helper()
	wantCalls, wantErrors := straceTable(t, log)
	got := map[string]profile.SyscallStat{}
	for _, s := range r.Syscalls {
		got[s.Name] = s
	}
	for name, n := range wantCalls {
		if s := got[name]; s.Calls != n || s.Errors != wantErrors[name] {
			t.Errorf("%s: fusescope %d calls, %d errors; strace -c %d calls, %d errors", name, s.Calls, s.Errors, n, wantErrors[name])
		}
	}
	for name, s := range got {
		if _, ok := wantCalls[name]; !ok {
			t.Errorf("%s: fusescope %d calls, strace -c none", name, s.Calls)
		}
	}
}

// assertWorkloadWaits checks the waits of syscallWorkload: the unanswered
// UDP wait comes first, named by its socket's address, and the refused
// connect is named by the address it tried. A log lists the connect among
// the waits; a live trace lists only calls of at least --min-wait there
// (the refused connect takes microseconds), and shows the connect as its
// socket's row.
func assertWorkloadWaits(t *testing.T, r *profile.SyscallReport) {
	t.Helper()
	if len(r.Waits) == 0 || r.Waits[0].DurS < 0.35 || (r.Waits[0].Name != "poll" && r.Waits[0].Name != "recvfrom") ||
		r.Waits[0].Target != "UDP:[127.0.0.1:0]" {
		t.Errorf("top wait %+v, want the 0.4 s UDP wait on UDP:[127.0.0.1:0]", r.Waits[:min(3, len(r.Waits))])
	}
	if r.Live != nil {
		for _, w := range r.Waits {
			if w.DurS < r.Live.MinWaitS {
				t.Errorf("live wait %+v is shorter than --min-wait (%g s)", w, r.Live.MinWaitS)
			}
		}
		for _, f := range r.Files {
			if f.Target == "TCP:[127.0.0.1:1]" && f.Kind == "tcp" {
				return
			}
		}
		t.Errorf("no row for the refused connect's TCP:[127.0.0.1:1] among the files: %+v", r.Files)
		return
	}
	for _, w := range r.Waits {
		if w.Name == "connect" && w.Errno == "ECONNREFUSED" && w.Target == "TCP:[127.0.0.1:1]" {
			return
		}
	}
	t.Errorf("no refused connect to TCP:[127.0.0.1:1] among the waits: %+v", r.Waits)
}

// pythonScript writes a workload script into dir and returns its path, the
// interpreter to run it with (the interpreter itself, since a python3 on
// PATH may be a shell shim (pyenv) whose own processes would be traced
// too), and an empty data directory for it to work in.
func pythonScript(t *testing.T, dir, source string) (script, python, data string) {
	t.Helper()
	script, data = filepath.Join(dir, "work.py"), filepath.Join(dir, "data")
	if err := os.WriteFile(script, []byte(source), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	return script, pythonExecutable(t), data
}

// pythonExecutable is the interpreter python3 on PATH runs (not a shim).
func pythonExecutable(t *testing.T) string {
	t.Helper()
	return strings.TrimSpace(e2e.Run(t, "python3", "-c", "import sys; print(sys.executable)"))
}

func TestSyscallsAgainstStrace(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "strace", "python3")
	dir := t.TempDir()
	log := filepath.Join(dir, "trace.log")
	script, python, data := pythonScript(t, dir, syscallWorkload)
	e2e.Run(t, "strace", "-f", "-C", "-tt", "-T", "-y", "-o", log, python, script, data, workloadSizes(t))

	r := logReport(t, log)
	if r.Malformed != 0 {
		t.Errorf("%d malformed lines: %+v", r.Malformed, r.FirstBad)
	}
	// Per-file byte totals are exact.
	files := map[string]profile.FileStat{}
	for _, f := range r.Files {
		files[f.Target] = f
	}
	for name, size := range workloadFiles {
		f := files[filepath.Join(data, name)]
		if f.BytesWritten != size || f.BytesRead != size || f.Opens != 2 {
			t.Errorf("%s: %+v, want %d bytes written and read, 2 opens", name, f, size)
		}
	}
	// Per-syscall counts equal strace -c's for the same run, and the
	// failed calls by errno the log's lines.
	assertCallsEqual(t, r, log)
	assertErrnosEqual(t, r, straceErrnos(t, log))
	assertWorkloadWaits(t, r)
}

func TestSyscallsBadInput(t *testing.T) {
	t.Parallel()
	empty := filepath.Join(t.TempDir(), "empty.log")
	os.WriteFile(empty, []byte("not an strace log\n"), 0o644)
	// What strace -c writes instead of a log.
	summary := filepath.Join(filepath.Dir(empty), "summary.txt")
	os.WriteFile(summary, []byte("% time     seconds  usecs/call     calls    errors syscall\n"+
		"------ ----------- ----------- --------- --------- ----------------\n"+
		" 61.37    0.000463          18        25           mmap\n"+
		"------ ----------- ----------- --------- --------- ----------------\n"+
		"100.00    0.000754           7       101        13 total\n"), 0o644)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"syscalls", empty}, "is it an strace log?"},
		{[]string{"syscalls", "/nonexistent.log"}, "no such file or directory: give strace logs"},
		{[]string{"syscalls", filepath.Dir(empty)}, "is a directory: give the log files in it"},
		{[]string{"syscalls", "--json", "--csv", empty}, "give one of --json, --csv"},
		{[]string{"syscalls", "-", "-"}, "standard input (-) is given twice"},
		{[]string{"syscalls", "--timeline", "1e-12", empty}, "give a bin width from 0.000001"},
		{[]string{"syscalls", "--top", "-5", empty}, "--top -5: give the rows"},
		{[]string{"syscalls", "--since", "NaN", empty}, "--since NaN: give a number of seconds"},
		{[]string{"syscalls", "--category", "disk", empty}, "give one of file I/O, network, IPC, memory, process, sleep and timers, other"},
		{[]string{"syscalls", "--category", "network", "/etc/hostname"}, "is it an strace log?"},
		{[]string{"syscalls", "--file", "/nothing/*", "../../../internal/systrace/testdata/sample.log"}, "matches the filters (of "},
		{[]string{"syscalls", "--table", "files", empty}, "--table chooses the table --csv prints: add --csv"},
		{[]string{"syscalls", summary}, "holds an strace -c summary table, not a log of the calls"},
		{[]string{"syscalls", "--csv", "--table", "fds", empty}, `--table "fds": give one of syscalls, files, categories, waits, processes, timeline, errnos`},
		{[]string{"syscalls", "--csv", "--table", "timeline", empty}, "--table timeline needs --timeline SECONDS"},
	}
	for _, c := range cases {
		out, err := exec.Command(e2e.Fusescope, c.args...).CombinedOutput()
		text := strings.TrimSpace(string(out))
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 || strings.Count(text, "\n") != 0 || !strings.Contains(text, c.want) {
			t.Errorf("%v: want one line containing %q and a non-zero exit, got %v:\n%s", c.args, c.want, err, out)
		}
	}
}

// An strace -ff file set gives the same per-syscall counts as one -f log.
func TestSyscallsFileSet(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "strace")
	dir := t.TempDir()
	e2e.Run(t, "strace", "-ff", "-tt", "-T", "-y", "-o", filepath.Join(dir, "set"), "sh", "-c", "cat /etc/hostname >/dev/null; ls / >/dev/null")
	files, _ := filepath.Glob(filepath.Join(dir, "set.*"))
	if len(files) < 3 {
		t.Fatalf("want a file per process, got %v", files)
	}
	r := logReport(t, files...)
	if r.Malformed != 0 || len(r.Processes) != len(files) {
		t.Errorf("%d malformed, %d processes for %d files", r.Malformed, len(r.Processes), len(files))
	}
	var tree []string
	for _, p := range r.Processes {
		tree = append(tree, strconv.Itoa(p.Parent)+">"+p.Exec)
	}
	t.Logf("process tree: %v", tree)

	// strace-log-merge turns the set into one log with PIDs: same counts.
	if _, err := exec.LookPath("strace-log-merge"); err == nil {
		merged := filepath.Join(dir, "merged.log")
		out, err := exec.Command("strace-log-merge", filepath.Join(dir, "set")).Output()
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(merged, out, 0o644)
		out, err = exec.Command(e2e.Fusescope, "syscalls", "--json", "--top", "0", merged).Output()
		if err != nil {
			t.Fatal(err)
		}
		m, err := syscallsOf(out)
		if err != nil {
			t.Fatal(err)
		}
		if m.Malformed != 0 || m.Events != r.Events || len(m.Processes) != len(r.Processes) {
			t.Errorf("merged log: %d events, %d processes, %d malformed; the set: %d events, %d processes",
				m.Events, len(m.Processes), m.Malformed, r.Events, len(r.Processes))
		}
		// The merged log on standard input: the same report.
		cmd := exec.Command(e2e.Fusescope, "syscalls", "--json", "--top", "0", "-")
		log, err := os.Open(merged)
		if err != nil {
			t.Fatal(err)
		}
		defer log.Close()
		cmd.Stdin = log
		// The records differ in their meta (the command line, the log's
		// name); the reports are the same.
		stdin, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		fromStdin, err := syscallsOf(stdin)
		if err != nil {
			t.Fatal(err)
		}
		fromFile, _ := syscallsOf(e2e.MustRead(t, e2e.Fusescope, "syscalls", "--json", "--top", "0", merged))
		a, _ := json.Marshal(fromStdin)
		b, _ := json.Marshal(fromFile)
		if string(a) != string(b) {
			t.Errorf("the merged log on standard input (-) gave another report:\n%s\nwant\n%s", a, b)
		}
	}

	// The set compressed file by file (set.PID.gz, as logrotate leaves
	// them): the same report, each file still read as its PID's.
	var gzipped []string
	for _, f := range files {
		e2e.Run(t, "gzip", "-k", f)
		gzipped = append(gzipped, f+".gz")
	}
	want := e2e.MustRead(t, e2e.Fusescope, "syscalls", "--json", "--top", "0", "--category", "file I/O", files[0], files[1])
	got := e2e.MustRead(t, e2e.Fusescope, "syscalls", "--json", "--top", "0", "--category", "file I/O", gzipped[0], gzipped[1])
	if strings.ReplaceAll(string(got), ".gz", "") != string(want) {
		t.Errorf("a gzipped -ff set gives another report:\n%s\nwant\n%s", got, want)
	}
}

// forkWorkload writes two files of known sizes, then a forked child reads
// the first through an fd it inherited, a thread reads the second, and a
// pipe carries 5 bytes: what per-file I/O must follow in a log without -y.
const forkWorkload = `
import os, sys, threading
d = sys.argv[1]
with open(os.path.join(d, "a.bin"), "wb") as f: f.write(b"a" * 30000)
with open(os.path.join(d, "b.bin"), "wb") as f: f.write(b"b" * 7000)
f = open(os.path.join(d, "a.bin"), "rb", buffering=0)
pid = os.fork()
if pid == 0:
    while f.read(4096): pass
    os._exit(0)
os.waitpid(pid, 0)
def rd():
    with open(os.path.join(d, "b.bin"), "rb", buffering=0) as g:
        while g.read(1000): pass
t = threading.Thread(target=rd); t.start(); t.join()
r, w = os.pipe()
os.write(w, b"hello")
os.read(r, 5)
`

// Logs recorded without -y (strace-analyzer's "strace -s 0 -ff", a plain
// "strace -f") give the same per-file byte totals as the files' sizes:
// fds are followed through opens, the fork and the thread.
func TestSyscallsLogsWithoutY(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "strace", "python3")
	dir := t.TempDir()
	script, python, data := pythonScript(t, dir, forkWorkload)
	for _, c := range []struct {
		name  string
		flags []string
		pipe  bool // -s 0 prints pipe2's fds as [...]
	}{
		{"strace -f", []string{"-f", "-o", filepath.Join(dir, "f.log")}, true},
		{"strace -s 0 -ff", []string{"-s", "0", "-ff", "-o", filepath.Join(dir, "set")}, false},
	} {
		e2e.Run(t, "strace", append(c.flags, python, script, data)...)
		logs, _ := filepath.Glob(c.flags[len(c.flags)-1] + "*")
		r := logReport(t, logs...)
		files := map[string]profile.FileStat{}
		for _, f := range r.Files {
			files[f.Target] = f
		}
		for name, size := range map[string]int64{"a.bin": 30000, "b.bin": 7000} {
			f := files[filepath.Join(data, name)]
			if f.BytesWritten != size || f.BytesRead != size || f.Opens != 2 {
				t.Errorf("%s: %s: %+v, want %d bytes written and read, 2 opens", c.name, name, f, size)
			}
		}
		if !r.FollowedFDs || r.Malformed != 0 {
			t.Errorf("%s: fds followed %v, %d malformed", c.name, r.FollowedFDs, r.Malformed)
		}
		if p := files["pipe:[#1]"]; c.pipe && (p.BytesRead != 5 || p.BytesWritten != 5) {
			t.Errorf("%s: pipe %+v, want 5 bytes each way", c.name, p)
		}
	}
}

// fusescope show renders a saved syscalls report as fusescope syscalls
// printed it, from a log and from a live trace.
func TestShowSyscallsReport(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "strace")
	dir := t.TempDir()
	log, saved := filepath.Join(dir, "app.log"), filepath.Join(dir, "app.json")
	e2e.Run(t, "strace", "-f", "-tt", "-T", "-y", "-o", log, "sh", "-c", "cat /etc/hostname >/dev/null; ls / >/dev/null")
	e2e.Run(t, e2e.Fusescope, "syscalls", "--json", "-o", saved, log)
	for _, flags := range [][]string{{}, {"--top", "0"}, {"--top", "2"}, {"--csv"}, {"--csv", "--table", "files"}, {"--csv", "--table", "processes"}} {
		want := e2e.MustRead(t, e2e.Fusescope, append(append([]string{"syscalls"}, flags...), log)...)
		got := e2e.MustRead(t, e2e.Fusescope, append(append([]string{"show"}, flags...), saved)...)
		if string(got) != string(want) {
			t.Errorf("show %v differs from syscalls %v:\n--- syscalls\n%s\n--- show\n%s", flags, flags, want, got)
		}
	}
	// "-" reads the report from standard input.
	cmd := exec.Command(e2e.Fusescope, "show", "-")
	f, err := os.Open(saved)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdin = f
	if got, err := cmd.Output(); err != nil || string(got) != string(e2e.MustRead(t, e2e.Fusescope, "show", saved)) {
		t.Errorf("show - differs from show FILE (%v):\n%s", err, got)
	}
	live := filepath.Join(dir, "live.json")
	e2e.Run(t, e2e.Fusescope, "syscalls", "--json", "-o", live, "--", "ls", "/")
	// --top 0: every system call; ls's two getdents64 take so little time
	// that the top ten rows may leave them out.
	if out := e2e.MustRead(t, e2e.Fusescope, "show", "--top", "0", live); !strings.Contains(string(out), `live trace of "ls /"`) || !strings.Contains(string(out), "getdents64") {
		t.Errorf("show of a live report:\n%s", out)
	}
	if out, err := exec.Command(e2e.Fusescope, "show", "-m", saved).CombinedOutput(); err == nil || !strings.Contains(string(out), "applies to records of FUSE requests") {
		t.Errorf("show -m on a syscalls report: %v\n%s", err, out)
	}
}

// transferWorkload moves known byte counts with the transfer calls:
// copy_file_range, sendfile, splice through a pipe, and tee between pipes.
const transferWorkload = `
import ctypes, os, sys
d = sys.argv[1]
src = os.path.join(d, "src.bin")
with open(src, "wb") as f:
    f.write(b"s" * 100000)
def create(name):
    return os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
fi = os.open(src, os.O_RDONLY)
fo = create("cfr.bin")
n = 0
while n < 100000:
    n += os.copy_file_range(fi, fo, 100000 - n)
os.close(fo)
fo = create("sf.bin")
n = 0
while n < 70000:
    n += os.sendfile(fo, fi, n, 70000 - n)
os.close(fo)
r, w = os.pipe()
fo = create("sp.bin")
n = 0
while n < 30000:
    k = os.splice(fi, w, 30000 - n, offset_src=n)
    while k > 0:
        m = os.splice(r, fo, k)
        k -= m
        n += m
os.close(fo)
os.close(fi)
r1, w1 = os.pipe()
r2, w2 = os.pipe()
os.write(w1, b"hello")
assert ctypes.CDLL(None, use_errno=True).tee(r1, w2, 5, 0) == 5
os.read(r1, 5)
os.read(r2, 5)
`

// The transfer calls count the bytes they move on both their fds, read
// from one and written to the other, the same from a -y log, a log without
// -y and the live source; each call counts once, as strace -c counts it.
func TestSyscallsTransferCalls(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "strace", "python3")
	dir := t.TempDir()
	script, python, data := pythonScript(t, dir, transferWorkload)
	withY, withoutY := filepath.Join(dir, "y.log"), filepath.Join(dir, "plain.log")
	e2e.Run(t, "strace", "-f", "-C", "-tt", "-T", "-y", "-o", withY, python, script, data)
	e2e.Run(t, "strace", "-f", "-C", "-o", withoutY, python, script, data)
	reports := map[string]*profile.SyscallReport{"live": liveReport(t, "--", python, script, data)}
	for name, log := range map[string]string{"-y log": withY, "log without -y": withoutY} {
		reports[name] = logReport(t, log)
		assertCallsEqual(t, reports[name], log)
	}
	// The live run is another run of the same program: its transfer calls
	// are the same.
	summary := straceSummary(t, withY)
	for _, s := range reports["live"].Syscalls {
		if peerCall := s.Name == "splice" || s.Name == "tee" || s.Name == "sendfile" || s.Name == "copy_file_range"; peerCall && s.Calls != summary[s.Name] {
			t.Errorf("live: %s: %d calls, strace -c %d", s.Name, s.Calls, summary[s.Name])
		}
	}
	type moved struct{ read, written int64 }
	for name, r := range reports {
		files := map[string]moved{}
		pipes := map[moved]int{}
		for _, f := range r.Files {
			files[f.Target] = moved{f.BytesRead, f.BytesWritten}
			if f.Kind == "pipe" {
				pipes[moved{f.BytesRead, f.BytesWritten}]++
			}
		}
		for file, want := range map[string]moved{"src.bin": {200000, 100000}, "cfr.bin": {0, 100000}, "sf.bin": {0, 70000}, "sp.bin": {0, 30000}} {
			if got := files[filepath.Join(data, file)]; got != want {
				t.Errorf("%s: %s: read %d, written %d; want %d and %d", name, file, got.read, got.written, want.read, want.written)
			}
		}
		// The splice's pipe, tee's source (written once, read by tee and
		// by read) and tee's destination.
		for _, want := range []moved{{30000, 30000}, {10, 5}, {5, 5}} {
			if pipes[want] != 1 {
				t.Errorf("%s: %d pipes read %d and written %d bytes, want 1: %+v", name, pipes[want], want.read, want.written, r.Files)
			}
		}
	}
}

// strace -f without -o writes to its standard error (2> LOG), and that log
// differs: its messages cut call lines, and the PID column shows only while
// more than one tracee is alive. Against the strace -C summary in the same
// log: the counts are equal, nothing is malformed, and the process tree
// has the traced program at its root, its threads folded in, and its
// children under it.
func TestSyscallsTerminalLog(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "strace", "python3")
	dir := t.TempDir()
	log, pidFile := filepath.Join(dir, "stderr.log"), filepath.Join(dir, "pid")
	script, python, _ := pythonScript(t, dir, `
import os, subprocess, sys, threading
open(sys.argv[1], "w").write(str(os.getpid()))
ts = [threading.Thread(target=os.stat, args=("/etc",)) for _ in range(3)]
[t.start() for t in ts]
[t.join() for t in ts]
for _ in range(3):
    subprocess.run(["/bin/true"], check=True)
`)
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("strace", "-f", "-C", "-tt", "-T", "-y", python, script, pidFile)
	cmd.Stderr = f
	err = cmd.Run()
	f.Close()
	if err != nil {
		t.Fatalf("strace: %v", err)
	}
	text, err := os.ReadFile(log)
	if err != nil || !strings.Contains(string(text), "strace: Process ") {
		t.Fatalf("the log has no attach messages: not strace's terminal output (%v)", err)
	}
	pid, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	root, err := strconv.Atoi(string(pid))
	if err != nil {
		t.Fatal(err)
	}

	r := logReport(t, log)
	if r.Malformed != 0 || r.Unfinished != 0 {
		t.Errorf("%d malformed lines (%+v), %d calls never finished", r.Malformed, r.FirstBad, r.Unfinished)
	}
	assertCallsEqual(t, r, log)
	children := 0
	for _, p := range r.Processes {
		switch {
		case p.PID == root:
			if p.Exec != python || p.Threads != 4 || p.Exit == nil || *p.Exit != 0 {
				t.Errorf("root %+v: want %s, 4 threads, exit 0", p, python)
			}
		case p.Parent == root && strings.HasSuffix(p.Exec, "/true"):
			children++
		default:
			t.Errorf("process %+v: neither the root %d nor a child of it running true", p, root)
		}
	}
	if children != 3 {
		t.Errorf("%d children running true, want 3: %+v", children, r.Processes)
	}
}

// strace -s 10000000 of dd bs=8M writes lines of 16 MiB and more (each
// byte of data printed as an escape): they parse, and the counts still
// equal strace -c's of the same run.
func TestSyscallsLongLines(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "strace", "dd")
	dir := t.TempDir()
	log := filepath.Join(dir, "dd.log")
	e2e.Run(t, "strace", "-f", "-C", "-tt", "-T", "-y", "-s", "10000000", "-o", log,
		"dd", "if=/dev/urandom", "of="+filepath.Join(dir, "out"), "bs=8M", "count=2", "status=none")
	longest := 0
	eachLogLine(t, log, func(line string) { longest = max(longest, len(line)) })
	if longest < 16<<20 {
		t.Fatalf("the longest line of the log is %d bytes: the test needs one of 16 MiB", longest)
	}
	r := logReport(t, log)
	if r.Malformed != 0 {
		t.Errorf("%d malformed lines: %+v", r.Malformed, r.FirstBad)
	}
	files := map[string]profile.FileStat{}
	for _, f := range r.Files {
		files[f.Target] = f
	}
	if f := files[filepath.Join(dir, "out")]; f.BytesWritten != 2*8<<20 || f.Writes != 2 {
		t.Errorf("out: %+v, want 2 writes of 8 MiB", f)
	}
	assertCallsEqual(t, r, log)
}
