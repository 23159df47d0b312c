package e2e

import (
	"bytes"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/test/proctest"
)

// Tracer is a running `fusescope trace`.
type Tracer struct {
	Cmd    *exec.Cmd
	Proc   *proctest.Process
	Stdout LockedBuffer // complete once Done has a value
	Stderr StderrLines  // filled line by line while it runs
	Done   chan error
}

// StderrLines is what a tracer wrote to standard error so far.
type StderrLines struct{ p **proctest.Process }

func (s StderrLines) String() string { return (*s.p).Output() }

// LockedBuffer is a buffer one goroutine fills while the test reads it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) WriteString(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) Bytes() []byte { return []byte(l.String()) }

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// StartTrace runs fusescope trace with args and returns once its probes are
// attached (it prints "Tracing ..." on stderr then).
func StartTrace(t testing.TB, args ...string) *Tracer {
	t.Helper()
	tr := &Tracer{Cmd: exec.Command(Fusescope, append([]string{"trace"}, args...)...), Done: make(chan error, 1)}
	tr.Stderr = StderrLines{&tr.Proc}
	tr.Cmd.Stdout = &tr.Stdout
	tr.Proc = proctest.Start(t, tr.Cmd, "Tracing FUSE requests", 30*time.Second)
	go func() {
		_, err := tr.Proc.Wait(time.Hour)
		tr.Done <- err
	}()
	return tr
}

// Stop sends SIGINT, as Ctrl-C would, and waits for the report.
func (tr *Tracer) Stop(t testing.TB) string {
	t.Helper()
	tr.Cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-tr.Done:
		if err != nil {
			t.Fatalf("fusescope trace: %v\n%s", err, tr.Stderr.String())
		}
	case <-time.After(30 * time.Second):
		tr.Cmd.Process.Kill()
		t.Fatal("fusescope trace did not stop within 30 s of SIGINT")
	}
	return tr.Stdout.String()
}

// Counts maps opcode name to count for one connection of a record.
func Counts(r *profile.Record, conn uint32) map[string]uint64 {
	out := map[string]uint64{}
	for _, s := range r.Profile.Ops {
		if s.Conn == conn {
			out[s.Op] = s.Count
		}
	}
	return out
}

// LoadRecord reads a record fusescope wrote.
func LoadRecord(t testing.TB, path string) *profile.Record {
	t.Helper()
	r, err := profile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ConnOf returns the FUSE connection number of a mount point (its minor).
func ConnOf(t testing.TB, mnt string) uint32 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(mnt, &st); err != nil {
		t.Fatal(err)
	}
	return uint32(((st.Dev >> 12) & 0xfff00) | (st.Dev & 0xff))
}

// WaitIdle waits until no request is in flight on a connection, as the
// kernel counts them (fusectl's waiting, decremented after the request's
// fuse_request_end has fired): every request made so far, the ones sent
// in the background at a close included, has been seen by the tracers.
func WaitIdle(t testing.TB, conn uint32) {
	t.Helper()
	Eventually(t, 10*time.Second, fmt.Sprintf("no request in flight on connection %d", conn), func() (bool, string) {
		ci := fuseconn.Read(conn)
		if ci == nil {
			return true, ""
		}
		return ci.Waiting == 0, fmt.Sprintf("%d requests in flight", ci.Waiting)
	})
}
