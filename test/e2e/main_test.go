// Package e2e runs fusescope as a user would, as root, against real FUSE
// mounts (a go-fuse file system written here, and bindfs), and checks what it
// measures against oracles that share no code with it.
package e2e

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/test/proctest"
)

var (
	fusescopeBin string
	// plainBin is fusescope without the race detector, for daemons under
	// long workloads (the model checker), which it would slow several
	// times; fsxBin is the model checker (test/fsx/cmd/fsx).
	plainBin, fsxBin string
)

// raceBuild: this test binary has the race detector (race_test.go), and
// so has fusescopeBin.
var raceBuild bool

// helper runs this test binary as a helper process doing one of the
// helpers below, for work this process must not do itself.
func helper(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "FUSESCOPE_E2E_HELPER="+name)
	return cmd
}

var helpers = map[string]func(args []string) error{
	"write-shared": func(args []string) error { return writeSharedHere(args[0]) },
	"check-permissions": func(args []string) error {
		out, err := checkPermissions(args[0])
		fmt.Print(out)
		return err
	},
}

func TestMain(m *testing.M) {
	if name := os.Getenv("FUSESCOPE_E2E_HELPER"); name != "" {
		if err := helpers[name](os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e: skipped, these tests mount FUSE file systems and load BPF programs: run as root (make test)")
		os.Exit(0)
	}
	// The bpftrace oracle may start before fusescope has mounted tracefs.
	if _, err := ktrace.EnsureTracefs(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	// Everything the run makes goes under one directory (TMPDIR, which the
	// tests' t.TempDir and the programs they start use): what a run that
	// was killed or timed out left is found there, and removed.
	cleanStaleRuns()
	root, err := os.MkdirTemp("", runPrefix)
	if err != nil {
		panic(err)
	}
	os.Chmod(root, 0o755) // user nobody's tests go through it
	os.WriteFile(root+".pid", []byte(strconv.Itoa(os.Getpid())), 0o644)
	dir := filepath.Join(root, "bin")
	tmp := filepath.Join(root, "tmp")
	os.Mkdir(dir, 0o755)
	os.Mkdir(tmp, 0o755)
	os.Chmod(tmp, 0o1777) // as /tmp: the umask takes the sticky and write bits at mkdir
	os.Setenv("TMPDIR", tmp)
	flag.Parse()
	if d := flag.Lookup("test.timeout").Value.(flag.Getter).Get().(time.Duration); d > 0 {
		stopWatchdog := watchdog(root, d)
		defer stopWatchdog()
	}
	fusescopeBin, plainBin, fsxBin = filepath.Join(dir, "fusescope"), filepath.Join(dir, "fusescope-plain"), filepath.Join(dir, "fsx")
	builds := [][]string{{"-o", fusescopeBin, "github.com/fusescope/fusescope/cmd/fusescope"},
		{"-o", fsxBin, "github.com/fusescope/fusescope/test/fsx/cmd/fsx"}}
	if raceBuild {
		builds[0] = append([]string{"-race"}, builds[0]...)
		builds = append(builds, []string{"-o", plainBin, "github.com/fusescope/fusescope/cmd/fusescope"})
	} else {
		plainBin = fusescopeBin
	}
	for _, args := range builds {
		build := exec.Command("go", append([]string{"build"}, args...)...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: go build %v: %v\n", args, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	removeRun(root)
	os.Exit(code)
}

// runPrefix names a run's directory in the system's temporary directory.
const runPrefix = "fusescope-e2e-"

// watchdog ends the run a little before go test's -timeout would: go
// test's timeout panics and leaves every mount, process and file the run
// made (a loaded machine's make test left 90 MB in /tmp); this prints
// what was running, as go test would, then removes them.
func watchdog(root string, timeout time.Duration) (stop func()) {
	margin := min(time.Minute, timeout/10)
	t := time.AfterFunc(timeout-margin, func() {
		fmt.Fprintf(os.Stderr, "e2e: %v of go test's -timeout %v left: ending the run, and removing what it made in %s\n", margin, timeout, root)
		buf := make([]byte, 4<<20)
		os.Stderr.Write(buf[:runtime.Stack(buf, true)])
		removeRun(root)
		os.Exit(2)
	})
	return func() { t.Stop() }
}

// removeRun ends what a run started (its processes, the mounts under its
// directory) and removes the directory.
func removeRun(root string) {
	if b, err := os.ReadFile(root + ".pid"); err == nil {
		if pid, _ := strconv.Atoi(string(b)); pid == os.Getpid() {
			for _, p := range descendantsOf(pid) {
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
	}
	// Deepest first: a mount inside another's tree goes before it.
	mounts := mountsUnder(root)
	slices.SortFunc(mounts, func(a, b string) int { return len(b) - len(a) })
	for _, m := range mounts {
		syscall.Unmount(m, syscall.MNT_DETACH)
	}
	os.RemoveAll(root)
	os.Remove(root + ".pid")
}

// cleanStaleRuns removes what runs killed outright left (their process
// is gone), saying so.
func cleanStaleRuns() {
	pids, _ := filepath.Glob(filepath.Join(os.TempDir(), runPrefix+"*.pid"))
	for _, f := range pids {
		b, _ := os.ReadFile(f)
		pid, _ := strconv.Atoi(string(b))
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			continue // running
		}
		root := strings.TrimSuffix(f, ".pid")
		fmt.Fprintf(os.Stderr, "e2e: removing what a run that did not finish left: %s\n", root)
		removeRun(root)
	}
}

// mountsUnder lists the mount points under dir.
func mountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

// descendantsOf lists the processes under pid, children first.
func descendantsOf(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	children := map[int][]int{}
	for _, f := range stats {
		child, _ := strconv.Atoi(strings.Split(f, "/")[2])
		if parent := parentOf(child); parent > 0 {
			children[parent] = append(children[parent], child)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, children[p]...)
		queue = append(queue, children[p]...)
	}
	return out
}

// parentOf is a process's parent, or 0 if it is gone.
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 2 {
		return 0
	}
	parent, _ := strconv.Atoi(f[1])
	return parent
}

// tracer is a running `fusescope trace`.
type tracer struct {
	cmd    *exec.Cmd
	proc   *proctest.Process
	stdout lockedBuffer // complete once done has a value
	stderr stderrLines  // filled line by line while it runs
	done   chan error
}

// stderrLines is what a tracer wrote to standard error so far.
type stderrLines struct{ p **proctest.Process }

func (s stderrLines) String() string { return (*s.p).Output() }

// lockedBuffer is a buffer one goroutine fills while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) WriteString(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte { return []byte(l.String()) }

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startTrace runs fusescope trace with args and returns once its probes are
// attached (it prints "Tracing ..." on stderr then).
func startTrace(t *testing.T, args ...string) *tracer {
	t.Helper()
	tr := &tracer{cmd: exec.Command(fusescopeBin, append([]string{"trace"}, args...)...), done: make(chan error, 1)}
	tr.stderr = stderrLines{&tr.proc}
	tr.cmd.Stdout = &tr.stdout
	tr.proc = proctest.Start(t, tr.cmd, "Tracing FUSE requests", 30*time.Second)
	go func() {
		_, err := tr.proc.Wait(time.Hour)
		tr.done <- err
	}()
	return tr
}

// stop sends SIGINT, as Ctrl-C would, and waits for the report.
func (tr *tracer) stop(t *testing.T) string {
	t.Helper()
	tr.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-tr.done:
		if err != nil {
			t.Fatalf("fusescope trace: %v\n%s", err, tr.stderr.String())
		}
	case <-time.After(30 * time.Second):
		tr.cmd.Process.Kill()
		t.Fatal("fusescope trace did not stop within 30 s of SIGINT")
	}
	return tr.stdout.String()
}

// counts maps opcode name to count for one connection of a record.
func counts(r *profile.Record, conn uint32) map[string]uint64 {
	out := map[string]uint64{}
	for _, s := range r.Profile.Ops {
		if s.Conn == conn {
			out[s.Op] = s.Count
		}
	}
	return out
}

func loadRecord(t *testing.T, path string) *profile.Record {
	t.Helper()
	r, err := profile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// connOf returns the FUSE connection number of a mount point (its minor).
func connOf(t *testing.T, mnt string) uint32 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(mnt, &st); err != nil {
		t.Fatal(err)
	}
	return uint32(((st.Dev >> 12) & 0xfff00) | (st.Dev & 0xff))
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func need(t *testing.T, cmds ...string) {
	t.Helper()
	for _, c := range cmds {
		if _, err := exec.LookPath(c); err != nil {
			t.Fatalf("%s is not installed: run make test, which installs it", c)
		}
	}
}

// waitIdle waits until no request is in flight on a connection, as the
// kernel counts them (fusectl's waiting, decremented after the request's
// fuse_request_end has fired): every request made so far, the ones sent
// in the background at a close included, has been seen by the tracers.
func waitIdle(t *testing.T, conn uint32) {
	t.Helper()
	waitFor(t, fmt.Sprintf("no request in flight on connection %d", conn), func() bool {
		ci := fuseconn.Read(conn)
		return ci == nil || ci.Waiting == 0
	})
}
