// Package e2e runs fusescope as a user would, as root, against real FUSE
// mounts (a go-fuse file system written here, and bindfs), and checks what it
// measures against oracles that share no code with it.
package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	dir, err := os.MkdirTemp("", "fusescope-e2e")
	if err != nil {
		panic(err)
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
	os.RemoveAll(dir)
	os.Exit(code)
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
