package syscalls

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/test/e2e"
	"github.com/fusescope/fusescope/test/proctest"
	"golang.org/x/sys/unix"
)

// liveReport runs fusescope syscalls with args and decodes its JSON report.
func liveReport(t *testing.T, args ...string) *profile.SyscallReport {
	t.Helper()
	return liveReportOf(t, e2e.Fusescope, args...)
}

// liveReportOf is liveReport with the fusescope binary bin.
func liveReportOf(t *testing.T, bin string, args ...string) *profile.SyscallReport {
	t.Helper()
	out := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(bin, append([]string{"syscalls", "--json", "--top", "0", "-o", out}, args...)...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fusescope syscalls %v: %v\n%s", args, err, msg)
	}
	return decodeReport(t, out)
}

// logReport analyses strace logs with fusescope syscalls --json and decodes
// the report.
func logReport(t *testing.T, logs ...string) *profile.SyscallReport {
	t.Helper()
	r, err := syscallsOf(e2e.MustRead(t, e2e.Fusescope, append([]string{"syscalls", "--json", "--top", "0"}, logs...)...))
	if err != nil {
		t.Fatalf("fusescope syscalls %v: %v", logs, err)
	}
	return r
}

func decodeReport(t *testing.T, path string) *profile.SyscallReport {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := syscallsOf(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if r.Live == nil {
		t.Fatalf("%s: no live section", path)
	}
	return r
}

// The live source against strace on the same workload (deterministic: the
// same calls in every run): per-syscall counts equal strace -c's, failed
// calls by errno the log's, per-file
// bytes are exact, and the unanswered UDP wait is the top wait.
func TestSyscallsLiveAgainstStrace(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "strace", "python3")
	dir := t.TempDir()
	script, python, data := pythonScript(t, dir, syscallWorkload)

	r := liveReport(t, "--", python, script, data, workloadSizes(t))

	log := filepath.Join(dir, "strace.log")
	e2e.Run(t, "strace", "-f", "-C", "-o", log, python, script, data, workloadSizes(t))
	assertCallsEqual(t, r, log)
	assertErrnosEqual(t, r, straceErrnos(t, log))

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
	assertWorkloadWaits(t, r)
	if len(r.Processes) != 1 || r.Processes[0].Exec != python || r.Processes[0].Exit == nil || *r.Processes[0].Exit != 0 {
		t.Errorf("processes %+v, want one: %s, exited 0", r.Processes, python)
	}
	if r.Live.ExitStatus == nil || *r.Live.ExitStatus != 0 || len(r.Live.Drops) != 0 {
		t.Errorf("live %+v, want exit status 0 and no drops", r.Live)
	}
}

// Under strace -f, whose tracer would take the command before fusescope
// could, the command is held at fusescope's gate instead of as its
// tracee: the trace is the same, per-syscall counts equal to strace -c's
// (the gate's own exec is not among them: it came before the programs
// attached).
func TestSyscallsLiveAtTheGate(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "strace", "python3")
	dir := t.TempDir()
	script, python, data := pythonScript(t, dir, syscallWorkload)
	out := filepath.Join(dir, "report.json")
	cmd := exec.Command("strace", "-f", "-o", "/dev/null", e2e.Fusescope, "syscalls", "--json", "--top", "0", "-o", out,
		"--", python, script, data, workloadSizes(t))
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, msg)
	}
	r := decodeReport(t, out)
	log := filepath.Join(dir, "strace.log")
	e2e.Run(t, "strace", "-f", "-C", "-o", log, python, script, data, workloadSizes(t))
	assertCallsEqual(t, r, log)
	if len(r.Processes) != 1 || r.Processes[0].Exec != python {
		t.Errorf("processes %+v, want one: %s", r.Processes, python)
	}
}

// Children are followed through fork and exec: the same process tree and
// per-syscall counts as strace -f.
func TestSyscallsLiveChildren(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "strace")
	script := "cat /etc/hostname >/dev/null; ls / >/dev/null; (exit 3); true"
	r := liveReport(t, "--", "sh", "-c", script)
	log := filepath.Join(t.TempDir(), "strace.log")
	e2e.Run(t, "strace", "-f", "-C", "-o", log, "sh", "-c", script)
	want := straceSummary(t, log)
	for _, name := range []string{"execve", "clone", "wait4", "openat", "close"} {
		n := 0
		for _, s := range r.Syscalls {
			if s.Name == name {
				n = s.Calls
			}
		}
		if n != want[name] {
			t.Errorf("%s: live %d calls, strace -c %d", name, n, want[name])
		}
	}
	execs := map[string]int{}
	for _, p := range r.Processes {
		execs[filepath.Base(p.Exec)]++
	}
	if execs["sh"] < 1 || execs["cat"] != 1 || execs["ls"] != 1 {
		t.Errorf("processes %+v, want sh with cat and ls", r.Processes)
	}
	var root profile.Process
	for _, p := range r.Processes {
		if p.Parent == 0 {
			root = p
		}
	}
	for _, p := range r.Processes {
		if p.PID != root.PID && p.Parent != root.PID {
			t.Errorf("process %+v is not a child of %d", p, root.PID)
		}
	}
}

// Slots of exited threads and processes are reused, and the programs take
// them back themselves: with the reader stopped (SIGSTOP) for the whole
// run, 300 processes one after another each get their own per-call
// counters (every /bin/true makes the same calls), and 100 cats one after
// another, more than the 64 processes with per-fd counters, each read
// their own file's bytes, exactly. Per-syscall counts equal strace -c's.
func TestSyscallsLiveReusesSlots(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "strace")
	dir := t.TempDir()
	for i := range 100 {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i)), make([]byte, 1000+i), 0o644)
	}
	r := liveWithReaderStopped(t, "for i in $(seq 1 300); do /bin/true; done; for f in "+dir+"/f*; do cat $f >/dev/null; done",
		"execve", "vfork", "clone", "wait4", "openat", "read", "close", "mmap")
	if len(r.Live.Drops) != 0 {
		t.Errorf("drops %v: with slots reused, none", r.Live.Drops)
	}
	perTrue := map[int]int{}
	for _, p := range r.Processes {
		if p.Exec == "/bin/true" {
			perTrue[p.Calls]++
		}
	}
	for _, n := range perTrue {
		if len(perTrue) != 1 || n != 300 {
			t.Errorf("/bin/true processes by their number of calls: %v, want all 300 alike", perTrue)
			break
		}
	}
	if len(perTrue) == 0 {
		t.Error("no /bin/true process in the report")
	}
	files := map[string]profile.FileStat{}
	for _, f := range r.Files {
		files[f.Target] = f
	}
	for i := range 100 {
		name := filepath.Join(dir, fmt.Sprintf("f%03d", i))
		if f := files[name]; f.BytesRead != int64(1000+i) || f.Opens != 1 {
			t.Errorf("%s: %+v, want %d bytes read, one open", name, f, 1000+i)
		}
	}
}

// When the ring buffer is full, an exit cannot hand its counters over: they
// stay in the kernel's maps with their slots and are read at the end, so
// no call goes uncounted. The reader is stopped while one shell fills the
// ring with redirections (each open and dup sent whole) and then starts
// 50 programs; every call still counts, as strace -c counts them.
func TestSyscallsLiveRingFull(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "strace")
	data := filepath.Join(t.TempDir(), "data")
	os.WriteFile(data, make([]byte, 5000), 0o644)
	r := liveWithReaderStopped(t, "i=0; while [ $i -lt 20000 ]; do : < /dev/null; i=$((i+1)); done; "+
		"for i in $(seq 1 25); do /bin/true; cat "+data+" >/dev/null; done",
		"execve", "vfork", "clone", "wait4", "openat", "read", "close", "mmap", "dup2", "fcntl")
	if r.Live.Drops["ring buffer full (calls counted, not kept whole)"] == 0 {
		t.Errorf("drops %v: the ring buffer never filled up, so this test tests nothing", r.Live.Drops)
	}
}

// liveWithReaderStopped runs the shell script body under fusescope
// syscalls with the tracer stopped (SIGSTOP) from before body starts until
// it has ended, then under strace -f, and requires the named calls to be
// counted alike. It returns fusescope's report.
func liveWithReaderStopped(t *testing.T, body string, names ...string) *profile.SyscallReport {
	t.Helper()
	fifos := t.TempDir()
	gate, done := filepath.Join(fifos, "gate"), filepath.Join(fifos, "done")
	for _, f := range []string{gate, done} {
		if err := unix.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script := "read x < " + gate + "; " + body + "; : > " + done
	out := filepath.Join(t.TempDir(), "report.json")
	runGated(t, exec.Command(e2e.Fusescope, "syscalls", "--json", "--top", "0", "-o", out, "--", "sh", "-c", script), gate, done, true)
	r := decodeReport(t, out)
	log := filepath.Join(t.TempDir(), "strace.log")
	runGated(t, exec.Command("strace", "-f", "-C", "-o", log, "sh", "-c", script), gate, done, false)
	want := straceSummary(t, log)
	calls := map[string]int{}
	for _, s := range r.Syscalls {
		calls[s.Name] = s.Calls
	}
	for _, name := range names {
		if calls[name] != want[name] {
			t.Errorf("%s: live %d calls, strace -c %d", name, calls[name], want[name])
		}
	}
	return r
}

// runGated runs cmd, whose script waits to read a line from the FIFO gate
// and opens the FIFO done last. With stop, cmd (the tracer) is stopped
// from before the script passes the gate until it has reached done.
func runGated(t *testing.T, cmd *exec.Cmd, gate, done string, stop bool) {
	t.Helper()
	var output e2e.LockedBuffer // read while the command writes it
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// A FIFO opens for writing without blocking only once a reader has it.
	var g *os.File
	e2e.Eventually(t, 30*time.Second, fmt.Sprintf("%v to reach its gate", cmd.Args), func() (bool, string) {
		var err error
		g, err = os.OpenFile(gate, os.O_WRONLY|unix.O_NONBLOCK, 0)
		return err == nil, fmt.Sprintf("%v\n%s", err, output.String())
	})
	if stop {
		if err := cmd.Process.Signal(unix.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	g.WriteString("go\n")
	g.Close()
	reached := make(chan error, 1)
	go func() {
		f, err := os.Open(done) // blocks until the script opens it
		if err == nil {
			_, err = io.ReadAll(f)
			f.Close()
		}
		reached <- err
	}()
	select {
	case err := <-reached:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("%v: the script never finished\n%s", cmd.Args, output.String())
	}
	if stop {
		cmd.Process.Signal(unix.SIGCONT)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, output.String())
	}
}

// More threads alive at once than there are per-thread counters (255 and a
// shared one): every call is still counted, the drop says so, and no
// process is credited with the calls of the threads counted together.
func TestSyscallsLiveBeyondThreadSlots(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "strace")
	script := "for i in $(seq 1 300); do sleep 1 & done; wait"
	r := liveReport(t, "--", "sh", "-c", script)
	calls := map[string]int{}
	for _, s := range r.Syscalls {
		calls[s.Name] = s.Calls
	}
	if calls["execve"] != 302 || calls["clock_nanosleep"] != 300 { // sh, seq and 300 sleeps
		t.Errorf("%d execve, %d clock_nanosleep: want 302 and 300", calls["execve"], calls["clock_nanosleep"])
	}
	dropped := false
	for what := range r.Live.Drops {
		dropped = dropped || strings.Contains(what, "threads beyond 255 alive at once")
	}
	if !dropped {
		t.Errorf("drops %v: want the threads beyond 255 said", r.Live.Drops)
	}
	for _, p := range r.Processes {
		if p.Calls > 200 && filepath.Base(p.Exec) == "sleep" { // a sleep makes about 40
			t.Errorf("process %d (%s) credited with %d calls", p.PID, p.Exec, p.Calls)
		}
	}
}

// fdNamingWorkload opens files by relative paths after a chdir, moves one
// to a new fd with fcntl(F_DUPFD_CLOEXEC) (as find does with every
// directory) and reads it there, then leaves the directory: what it did
// must be named as strace -y names it, though the process has moved on (or
// exited) by the time its events are read. Then it waits 100 ms in poll on
// a FIFO, which must be named inside the pollfd array, and runs a thread,
// whose exit must be seen.
const fdNamingWorkload = `
import fcntl, os, select, sys, threading
os.chdir(sys.argv[1])
fd = os.open("sub/in.bin", os.O_RDONLY)
dup = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 20)
os.close(fd)
while os.read(dup, 1000):
    pass
os.close(dup)
fd = os.open("out.bin", os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"z" * 777)
os.close(fd)
os.mkfifo("idle.fifo")
fifo = os.open("idle.fifo", os.O_RDWR)
p = select.poll()
p.register(fifo, select.POLLIN)
p.poll(100)
os.close(fifo)
os.unlink("idle.fifo")
t = threading.Thread(target=os.getpid)
t.start()
t.join()
os.chdir("/")
`

// The live source names fds as strace -y does: an fd made by fcntl's
// F_DUPFD_CLOEXEC carries its file's name, and relative paths resolve
// against the directory the process was in when it opened them. The oracle
// is strace -y's own naming, analysed from its log.
func TestSyscallsLiveNamesFdsLikeStrace(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "strace", "python3")
	dir := t.TempDir()
	script, python, data := pythonScript(t, dir, fdNamingWorkload)
	os.Mkdir(filepath.Join(data, "sub"), 0o755)
	os.WriteFile(filepath.Join(data, "sub", "in.bin"), make([]byte, 4321), 0o644)

	live := liveReport(t, "--", python, script, data)
	log := filepath.Join(dir, "strace.log")
	e2e.Run(t, "strace", "-f", "-tt", "-T", "-y", "-o", log, python, script, data)
	fromLog := logReport(t, log)
	inData := func(r *profile.SyscallReport) map[string][2]int64 {
		m := map[string][2]int64{}
		for _, f := range r.Files {
			if strings.HasPrefix(f.Target, data) {
				m[f.Target] = [2]int64{f.BytesRead, f.BytesWritten}
			}
		}
		return m
	}
	want := map[string][2]int64{filepath.Join(data, "sub", "in.bin"): {4321, 0}, filepath.Join(data, "out.bin"): {0, 777}}
	fifo := filepath.Join(data, "idle.fifo")
	for name, r := range map[string]*profile.SyscallReport{"live": live, "strace log": fromLog} {
		got := inData(r)
		for target, bytes := range want {
			if got[target] != bytes {
				t.Errorf("%s: %s read/written %v, want %v (files under %s: %v)", name, target, got[target], bytes, data, got)
			}
		}
		if len(r.Waits) == 0 || r.Waits[0].Name != "poll" || r.Waits[0].Target != fifo {
			t.Errorf("%s: top wait %+v, want the poll on %s", name, r.Waits[:min(1, len(r.Waits))], fifo)
		}
		// One process of two threads (the thread made with CLONE_THREAD in
		// the log, of the same thread group live), seen to exit 0.
		if len(r.Processes) != 1 || r.Processes[0].Threads != 2 || r.Processes[0].Exit == nil || *r.Processes[0].Exit != 0 {
			t.Errorf("%s: processes %+v, want one of 2 threads that exited 0", name, r.Processes)
		}
	}
}

// A shell script names its fds in ways that race with a live tracer's
// user space: bash reads its script through fd 255 (dup2, close-on-exec,
// closed by the exec that ends the script, with no close call), and each
// command substitution's pipe is made and gone within a millisecond,
// before /proc can be asked about it. Every byte is still counted under a
// name, as strace -y names it: the script by its path, the pipes as pipes.
func TestSyscallsLiveNamesShellFds(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "strace", "bash")
	dir := t.TempDir()
	data, script := filepath.Join(dir, "data.txt"), filepath.Join(dir, "script.sh")
	os.WriteFile(data, bytes.Repeat([]byte("x"), 1000), 0o644)
	os.WriteFile(script, []byte("#!/bin/bash\nfor i in 1 2 3 4 5; do x=$(cat \"$1\"); done\nexec /bin/true\n"), 0o755)

	log := filepath.Join(dir, "strace.log")
	e2e.Run(t, "strace", "-f", "-tt", "-T", "-y", "-o", log, script, data)
	fromLog := logReport(t, log)
	type io struct{ scriptRead, dataRead, pipeRead, pipeWritten, unnamed int64 }
	sum := func(r *profile.SyscallReport) io {
		var s io
		for _, f := range r.Files {
			switch {
			case f.Target == script:
				s.scriptRead += f.BytesRead
			case f.Target == data:
				s.dataRead += f.BytesRead
			case f.Kind == "pipe":
				s.pipeRead += f.BytesRead
				s.pipeWritten += f.BytesWritten
			case strings.HasPrefix(f.Target, "fd:"):
				s.unnamed += f.BytesRead + f.BytesWritten
			}
		}
		return s
	}
	want := sum(fromLog)
	if want.dataRead != 5000 || want.pipeRead != 5000 || want.pipeWritten != 5000 || want.scriptRead == 0 {
		t.Fatalf("the strace log's I/O: %+v, want 5000 bytes of data through 5 pipes, and the script read", want)
	}
	for i := 0; i < 3; i++ { // the races go either way from run to run
		if got := sum(liveReport(t, "--", script, data)); got != want {
			t.Errorf("run %d: live I/O %+v, strace's %+v", i, got, want)
		}
	}
}

// -p attaches to a running process: the I/O it does after the tracer says
// it is attached is counted to the byte, by each of its threads; the
// threads are one process, running the program it ran at the attach; a
// socket it opened before is named by its address; and tracing ends when
// it exits.
func TestSyscallsLivePID(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "python3")
	dir := t.TempDir()
	file := filepath.Join(dir, "input.bin")
	os.WriteFile(file, make([]byte, 5000), 0o644)
	trigger := filepath.Join(dir, "go")
	python := pythonExecutable(t)
	prog := exec.Command(python, "-c", `
import os, socket, sys, threading, time
file, trigger = sys.argv[1], sys.argv[2]
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("127.0.0.1", 0))
udp.settimeout(0.05)
print(udp.getsockname()[1], flush=True)
def work():
    while not os.path.exists(trigger):
        time.sleep(0.01)
    for i in range(7):
        with open(file, "rb") as f:
            f.read()
workers = [threading.Thread(target=work) for _ in range(2)]
for w in workers:
    w.start()
work()
try:
    udp.recvfrom(1)
except socket.timeout:
    pass
for w in workers:
    w.join()
`, file, trigger)
	stdout, _ := prog.StdoutPipe()
	if err := prog.Start(); err != nil {
		t.Fatal(err)
	}
	defer prog.Process.Kill()
	port, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the program's UDP port: %v", err)
	}
	udp := "UDP:[127.0.0.1:" + strings.TrimSpace(port) + "]"
	out := filepath.Join(dir, "report.json")
	tr := exec.Command(e2e.Fusescope, "syscalls", "--json", "--top", "0", "-o", out, "-p", strconv.Itoa(prog.Process.Pid))
	tracer := proctest.Start(t, tr, "Hit Ctrl-C to end", 30*time.Second)
	os.WriteFile(trigger, nil, 0o644)
	prog.Wait()
	exited, err := tracer.Wait(10 * time.Second)
	switch {
	case !exited:
		t.Fatalf("fusescope syscalls -p did not stop when its process exited:\n%s", tracer.Output())
	case err != nil:
		t.Fatalf("fusescope syscalls -p: %v\n%s", err, tracer.Output())
	}
	r := decodeReport(t, out)
	var f profile.FileStat
	for _, x := range r.Files {
		if x.Target == file {
			f = x
		}
	}
	if f.Opens != 21 || f.BytesRead != 21*5000 {
		t.Errorf("%s: %+v, want 21 opens and 105000 bytes read (7 by each of 3 threads)", file, f)
	}
	if r.Live.PID != prog.Process.Pid {
		t.Errorf("live pid %d, want %d", r.Live.PID, prog.Process.Pid)
	}
	if len(r.Waits) == 0 || r.Waits[0].Target != udp {
		t.Errorf("top wait %+v, want the 50 ms wait on %s, a socket opened before the attach", r.Waits[:min(1, len(r.Waits))], udp)
	}
	exe, _ := filepath.EvalSymlinks(python)
	if len(r.Processes) != 1 || r.Processes[0].PID != prog.Process.Pid || r.Processes[0].Threads != 3 || r.Processes[0].Exec != exe {
		t.Errorf("processes %+v, want one: pid %d, 3 threads, running %s", r.Processes, prog.Process.Pid, exe)
	}
}

// fusescope syscalls -- CMD exits as the command did, as strace does: its
// exit status, or 128 plus the signal that killed it; the report is written
// all the same and says so.
func TestSyscallsLiveExitStatus(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		script string
		code   int
		status string
	}{
		{"exit 7", 7, `"exit_status": 7`},
		{"kill -9 $$", 128 + 9, `"killed_by": "SIGKILL"`},
		{"exit 0", 0, `"exit_status": 0`},
	} {
		out := filepath.Join(t.TempDir(), "report.json")
		err := exec.Command(e2e.Fusescope, "syscalls", "--json", "-o", out, "--", "sh", "-c", c.script).Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		report, _ := os.ReadFile(out)
		if code != c.code || !strings.Contains(string(report), c.status) {
			t.Errorf("sh -c %q: fusescope exited %d, report %s; want %d and %s", c.script, code, report, c.code, c.status)
		}
	}
}

// Bad input to the live source: one line and a non-zero exit, and nothing
// left attached.
func TestSyscallsLiveBadInput(t *testing.T) {
	t.Parallel()
	probes := e2e.WatchProbes(t)
	// An -o that cannot be written is refused before the command runs.
	marker := filepath.Join(t.TempDir(), "ran")
	for _, args := range [][]string{
		{"syscalls", "-o", "/nonexistent/dir/report.txt", "--", "touch", marker},
		{"syscalls", "-p", "999999999"},
		{"syscalls", "--"},
		{"syscalls", "--", "/nonexistent/command"},
		{"syscalls", "--", "/etc/passwd"}, // not executable
		{"syscalls", "--", "/tmp"},
		{"syscalls", "--comm", "true", "--timeline", "1", "--", "true"},
		{"syscalls", "-p", "1", "--", "true"},
		{"syscalls", "--min-wait", "-1ms", "--", "true"},
		{"syscalls"},
	} {
		out, err := exec.Command(e2e.Fusescope, args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Errorf("%v: want one line and a non-zero exit, got %v:\n%s", args, err, out)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran although its report could not be written")
	}
	probes.AssertNoneLeft(t)
}

// syscallsOf reads the system-call report of fusescope syscalls --json:
// a record with a syscalls section.
func syscallsOf(b []byte) (*profile.SyscallReport, error) {
	rec, err := profile.Parse(b)
	if err != nil {
		return nil, err
	}
	if rec.Syscalls == nil {
		return nil, fmt.Errorf("the record has no syscalls section")
	}
	return rec.Syscalls, nil
}

// TestSyscallsLiveTimeFromRelease: live, --since, --until and the
// timeline count from the command's start (its exec follows at once), as
// a log's count from its first line, and with -p
// from the attach; not from the programs' load before it (0.04 s here, up
// to a second on a loaded machine), with a run's own programs or a
// server's. The first bin of 20 ms holds the command's first calls.
func TestSyscallsLiveTimeFromRelease(t *testing.T) {
	// Not parallel: it times the run from the command's release.
	e2e.Need(t, "python3")
	dir := t.TempDir()
	sock := filepath.Join(dir, "syscalls.sock")
	server := proctest.Start(t, exec.Command(e2e.Fusescope, "syscalls", "--serve", "--socket", sock), "Serving", 30*time.Second)
	defer server.Interrupt(t, 10*time.Second)
	firstBin := func(r *profile.SyscallReport) float64 {
		first := -1.0
		for _, b := range r.Timeline {
			n := 0
			for _, c := range b.Calls {
				n += c
			}
			if n > 0 && (first < 0 || b.Start < first) {
				first = b.Start
			}
		}
		return first
	}
	host := "/etc/hostname"
	for _, via := range [][]string{{"--no-server"}, {"--socket", sock}} {
		// The command starts at once after time 0, and its exec follows:
		// within 20 ms, unless the load of the packages beside this one
		// delayed them (0.02 s once): measured again (e2e.Timed).
		e2e.Timed(t, 3, func() (stretched []string) {
			r := liveReport(t, append(via, "--timeline", "0.02", "--", "cat", host)...)
			if got := firstBin(r); got < 0 {
				t.Errorf("%v -- cat: no calls in the timeline", via)
			} else if got != 0 {
				stretched = append(stretched, e2e.Stretched("%v -- cat: the first calls in the bin at %.2f s (set-up %.3f s), want 0: the command's start", via, got, r.Live.SetupS))
			}
			// --until: the first cat, at once, is in; the second, 0.5 s later, is not.
			r = liveReport(t, append(via, "--until", "0.25", "--", "sh", "-c", "cat "+host+" >/dev/null; sleep 0.5; cat "+host+" >/dev/null")...)
			opens := 0
			for _, f := range r.Files {
				if f.Target == host {
					opens = f.Opens
				}
			}
			switch {
			case opens == 0:
				stretched = append(stretched, e2e.Stretched("%v --until 0.25: no open of %s, want the first cat's", via, host))
			case opens != 1:
				t.Errorf("%v --until 0.25: %d opens of %s, want the first cat's", via, opens, host)
			}
			return stretched
		})

		// -p: from the attach, before the process's next call, which comes
		// within 2 ms unless the load beside this package kept the process
		// off the processors for a bin (0.02 s once): measured again.
		e2e.Timed(t, 3, func() (stretched []string) {
			if got := firstBinUnderP(t, dir, via, firstBin); got != 0 {
				stretched = append(stretched, e2e.Stretched("%v -p: the first calls in the bin at %.2f s, want 0: the attach", via, got))
			}
			return stretched
		})
	}
}

// firstBinUnderP runs syscalls -p on a process that polls a file every 2
// ms until it appears, and returns the first timeline bin with its calls.
func firstBinUnderP(t *testing.T, dir string, via []string, firstBin func(*profile.SyscallReport) float64) float64 {
	t.Helper()
	trigger := filepath.Join(dir, "stop")
	os.Remove(trigger)
	prog := exec.Command(pythonExecutable(t), "-c", `
import os, sys, time
print("ready", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.002)
`, trigger)
	stdout, _ := prog.StdoutPipe()
	if err := prog.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "p.json")
	tracer := proctest.Start(t, exec.Command(e2e.Fusescope, append([]string{"syscalls", "--json", "--timeline", "0.02", "-o", out, "-p", strconv.Itoa(prog.Process.Pid)}, via...)...), "Hit Ctrl-C to end", 30*time.Second)
	os.WriteFile(trigger, nil, 0o644)
	prog.Wait()
	if exited, err := tracer.Wait(10 * time.Second); !exited || err != nil {
		t.Fatalf("%v -p: exited %v, %v\n%s", via, exited, err, tracer.Output())
	}
	return firstBin(decodeReport(t, out))
}
