// Package proctest starts the processes end-to-end tests and benchmarks
// drive (fusescope trace, bpftrace, a traced command) and waits for the
// line that says one is ready, instead of sleeping.
package proctest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Process is a started process whose watched output is kept, line by line.
type Process struct {
	Cmd  *exec.Cmd
	done chan error

	mu  sync.Mutex
	out bytes.Buffer
	err error
	end bool
}

// Start starts cmd and returns once a line of its standard error (and of
// its standard output too, when cmd.Stdout is nil) contains ready; it
// fails t if the process exits first or says nothing of the kind within
// timeout. The process is killed when the test ends.
func Start(t testing.TB, cmd *exec.Cmd, ready string, timeout time.Duration) *Process {
	t.Helper()
	p := &Process{Cmd: cmd, done: make(chan error, 1)}
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if cmd.Stdout == nil {
		cmd.Stdout = pw
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	isReady, scanned := make(chan bool, 1), make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if strings.Contains(sc.Text(), ready) {
				select { // once: a second would block the scan
				case isReady <- true:
				default:
				}
			}
		}
		io.Copy(io.Discard, pr) // a line too long: keep the pipe flowing
	}()
	go func() {
		err := cmd.Wait()
		pw.Close()
		<-scanned // its last lines are in the output
		p.done <- err
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	select {
	case <-isReady:
		return p
	case err := <-p.done:
		p.done <- err
		t.Fatalf("%v exited before it was ready (%q): %v\n%s", cmd.Args, ready, err, p.Output())
	case <-time.After(timeout):
		cmd.Process.Kill()
		t.Fatalf("%v was not ready (%q) within %v\n%s", cmd.Args, ready, timeout, p.Output())
	}
	return nil
}

// Output is what the process wrote so far to the watched streams.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Wait waits up to timeout for the process to exit, with its output read;
// exited is false on a timeout, err is its exit error.
func (p *Process) Wait(timeout time.Duration) (exited bool, err error) {
	p.mu.Lock()
	if p.end {
		defer p.mu.Unlock()
		return true, p.err
	}
	p.mu.Unlock()
	select {
	case err := <-p.done:
		p.mu.Lock()
		p.err, p.end = err, true
		p.mu.Unlock()
		return true, err
	case <-time.After(timeout):
		return false, nil
	}
}

// Interrupt sends SIGINT, as Ctrl-C would, and waits up to timeout for the
// process to exit; it fails t if it does not.
func (p *Process) Interrupt(t testing.TB, timeout time.Duration) error {
	t.Helper()
	p.Cmd.Process.Signal(syscall.SIGINT)
	exited, err := p.Wait(timeout)
	if !exited {
		p.Cmd.Process.Kill()
		t.Fatalf("%v did not end within %v of SIGINT\n%s", p.Cmd.Args, timeout, p.Output())
	}
	return err
}

// bpftraceMarker is the argument of the getpgid calls that tell a bpftrace
// program it is attached: no process has this id.
const bpftraceMarker = 424242

// BpftraceReady is a probe to append to a bpftrace program: it prints
// "fusescope-ready" when this process calls getpgid(bpftraceMarker). bpftrace
// prints "Attaching N probes" before it attaches them and runs BEGIN before
// them too, so neither says the program is attached.
var BpftraceReady = fmt.Sprintf("\ntracepoint:syscalls:sys_enter_getpgid /args->pid == %d/ { printf(\"fusescope-ready\\n\"); }\n", bpftraceMarker)

// StartBpftrace runs bpftrace with args (whose program, the last argument
// of -e, must end with BpftraceReady) and returns once its probes are
// attached: it calls getpgid(marker) until the program says so.
func StartBpftrace(t testing.TB, cmd *exec.Cmd, timeout time.Duration) *Process {
	t.Helper()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				unix.Getpgid(bpftraceMarker)
			}
		}
	}()
	return Start(t, cmd, "fusescope-ready", timeout)
}
