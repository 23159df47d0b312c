// Package e2e holds what fusescope's end-to-end test packages share: a
// TestMain that builds fusescope once per package into the run's own
// directory (and removes what the run left), and the helpers the tests of
// more than one package call. The tests themselves are in lab (the lab file
// system, no BPF), trace (the tracer, its views and its oracles), syscalls,
// cli (the commands' edges) and doctor (its rules against the lab fs and
// independent daemons), which go test runs side by side.
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
	"syscall"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/ktrace"
)

var (
	// Fusescope is the fusescope binary the tests run; with the race
	// detector when the test binary has it (make test).
	Fusescope string
	// FusescopePlain is fusescope without the race detector, for daemons
	// under long workloads (the model checker), which it would slow several
	// times; Fsx is the model checker (test/fsx/cmd/fsx). Built only for
	// the packages that ask for them (Options).
	FusescopePlain, Fsx string
)

// raceBuild: this test binary has the race detector (race.go), and so has
// Fusescope.
var raceBuild bool

// Options say what a package's TestMain needs beyond fusescope.
type Options struct {
	// Helpers are the helper processes the package runs with Helper.
	Helpers map[string]func(args []string) error
	// ModelChecker builds FusescopePlain and Fsx too.
	ModelChecker bool
	// Plain builds FusescopePlain too.
	Plain bool
}

// helperEnv names, in a helper process's environment, the helper it runs.
const helperEnv = "FUSESCOPE_E2E_HELPER"

// Helper runs this test binary as a helper process doing one of the
// package's Options.Helpers, for work the test process must not do itself.
func Helper(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+name)
	return cmd
}

// Main is an end-to-end package's TestMain: it runs a helper process's
// helper, or skips the package when not root, or builds fusescope into a
// directory of this run's (TMPDIR too, which t.TempDir and the programs the
// tests start use), runs the tests and removes what they left.
func Main(m *testing.M, opts Options) {
	if name := os.Getenv(helperEnv); name != "" {
		if err := opts.Helpers[name](os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e: skipped, these tests mount FUSE file systems and load BPF programs: run as root (make test)")
		os.Exit(0)
	}
	// File systems served in this process wait for a P like any goroutine,
	// and a thread of this process blocked in the kernel on one of them
	// can hold its P (a vfork waiting for a child that flushes an inherited
	// file of the mount): with one P a core, two such threads left the lab
	// package with none to serve them (a hang, its goroutine runnable).
	runtime.GOMAXPROCS(max(8, runtime.GOMAXPROCS(0)))
	// The bpftrace oracle may start before fusescope has mounted tracefs.
	if _, err := ktrace.EnsureTracefs(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	// Everything the run makes goes under one directory: what a run that
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
	Fusescope = filepath.Join(dir, "fusescope")
	builds := [][]string{{"-o", Fusescope, "github.com/fusescope/fusescope/cmd/fusescope"}}
	if raceBuild {
		builds[0] = append([]string{"-race"}, builds[0]...)
	}
	if opts.ModelChecker || opts.Plain {
		FusescopePlain = Fusescope
		if opts.ModelChecker {
			Fsx = filepath.Join(dir, "fsx")
			builds = append(builds, []string{"-o", Fsx, "github.com/fusescope/fusescope/test/fsx/cmd/fsx"})
		}
		if raceBuild {
			FusescopePlain = filepath.Join(dir, "fusescope-plain")
			builds = append(builds, []string{"-o", FusescopePlain, "github.com/fusescope/fusescope/cmd/fusescope"})
		}
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
			for _, p := range DescendantsOf(pid) {
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
// is gone), saying so; the runs of packages running beside this one are
// left alone.
func cleanStaleRuns() {
	pids, _ := filepath.Glob(filepath.Join(os.TempDir(), runPrefix+"*.pid"))
	for _, f := range pids {
		b, _ := os.ReadFile(f)
		pid, _ := strconv.Atoi(string(b))
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			continue // running
		}
		if pid == 0 {
			// Being written by a package that has just started: a
			// killed run's file has its pid.
			continue
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

// DescendantsOf lists the processes under pid, children first.
func DescendantsOf(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	children := map[int][]int{}
	for _, f := range stats {
		child, _ := strconv.Atoi(strings.Split(f, "/")[2])
		if parent := ParentOf(child); parent > 0 {
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

// ParentOf is a process's parent, or 0 if it is gone.
func ParentOf(pid int) int {
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
