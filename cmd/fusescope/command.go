package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// commandRun is the command of "fusescope trace -- CMD": started once the
// probes are attached, its exit ends the trace. The terminal's Ctrl-C
// reaches it (and a signal sent to fusescope alone is passed on); a second
// one ends the trace without waiting for it.
type commandRun struct {
	cmd  *exec.Cmd
	end  func() // ends the trace
	sigs chan os.Signal

	mu       sync.Mutex
	started  bool
	startErr error
	done     chan struct{} // closed when the command has been waited for
	status   *int
	killedBy string
}

func newCommandRun(program string, argv []string, end func()) *commandRun {
	c := exec.Command(program, argv[1:]...)
	c.Args = argv
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	r := &commandRun{cmd: c, end: end, sigs: make(chan os.Signal, 2), done: make(chan struct{})}
	signal.Notify(r.sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go r.forward()
	return r
}

// start runs the command; called once the probes are attached.
func (r *commandRun) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.cmd.Start(); err != nil {
		r.startErr = fmt.Errorf("starting %s: %v", r.cmd.Args[0], err)
		close(r.done)
		r.end()
		return
	}
	r.started = true
	go func() {
		r.cmd.Wait()
		if ws, ok := r.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Exited() {
			st := ws.ExitStatus()
			r.status = &st
		} else if ok && ws.Signaled() {
			r.killedBy = unix.SignalName(ws.Signal())
		}
		close(r.done)
		r.end()
	}()
}

// forward passes signals on to the command; the second ends the trace.
func (r *commandRun) forward() {
	n := 0
	for s := range r.sigs {
		n++
		r.mu.Lock()
		started := r.started
		r.mu.Unlock()
		if started {
			r.cmd.Process.Signal(s)
		}
		if n > 1 || !started {
			r.end()
		}
	}
}

// finish stops passing signals on and returns how the command ended: an
// error carrying its exit status, or why it did not start. A command still
// running (the trace was ended under it) is left to the signals it got.
func (r *commandRun) finish() error {
	signal.Stop(r.sigs)
	select {
	case <-r.done:
	default:
		return nil
	}
	if r.startErr != nil {
		return r.startErr
	}
	return exitStatus(r.status, r.killedBy)
}
