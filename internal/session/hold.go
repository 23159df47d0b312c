package session

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// A run's -- CMD is held before its first instruction, so that the
// sources know its PID and its fds before it runs, in one of two ways:
//
//   - traced (this file): once the sources are attached, it is started as
//     our tracee (PTRACE_TRACEME in Go's child), and the kernel stops it
//     with a SIGTRAP when its exec is done: the sources armed for the
//     first exec by a child of ours (Target.CommandParent) have seen it.
//     Release detaches it. Nothing is executed but the command, and no
//     ptrace request is made but the one detach.
//   - at the gate (gate.go): where ptrace is not ours to use (canTrace),
//     fusescope started again before the sources attach, waiting on a
//     socket; released, it executes the command.
type hold interface {
	// release lets the command run on; the error says why it could not.
	release() error
	// abandon ends a command that was never released, and reaps it.
	abandon()
}

// ptraceHold is a command stopped after its exec, as our tracee.
type ptraceHold struct {
	cmd  *exec.Cmd
	pid  int
	act  chan bool  // true: detach; false: kill
	done chan error // what the detach said
}

// canTrace reports whether a child of ours can be our tracee: Yama's
// ptrace_scope 3 forbids it, 2 asks for CAP_SYS_PTRACE (which a
// container's root may lack), and a tracer of ours (strace -f) would take
// our children before we do.
func canTrace() bool {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil || !bytes.Contains(status, []byte("\nTracerPid:\t0\n")) {
		return false
	}
	scope, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	switch string(bytes.TrimSpace(scope)) {
	case "3":
		return false
	case "2":
		return err == nil && hasCapability(status, unix.CAP_SYS_PTRACE)
	}
	return true
}

// hasCapability reads a capability from /proc/PID/status's CapEff.
func hasCapability(status []byte, capability int) bool {
	_, rest, ok := bytes.Cut(status, []byte("\nCapEff:\t"))
	if !ok {
		return false
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	eff, err := strconv.ParseUint(string(line), 16, 64)
	return err == nil && eff&(1<<capability) != 0
}

// startTraced starts c as our tracee and waits until its exec is done.
// A tracee's ptrace requests must come from the thread that started it,
// so one goroutine, locked to its thread, starts it and detaches it; the
// thread ends with it.
func startTraced(c *exec.Cmd) (*ptraceHold, error) {
	h := &ptraceHold{cmd: c, act: make(chan bool), done: make(chan error, 1)}
	stopped := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		c.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
		if err := c.Start(); err != nil {
			stopped <- err
			return
		}
		pid := c.Process.Pid
		if err := waitExecStop(pid); err != nil {
			stopped <- err
			return
		}
		stopped <- nil
		if <-h.act {
			h.done <- unix.PtraceDetach(pid)
			return
		}
		unix.Kill(pid, unix.SIGKILL)
		h.done <- nil
	}()
	if err := <-stopped; err != nil {
		return nil, err
	}
	h.pid = c.Process.Pid
	return h, nil
}

// waitExecStop waits for the SIGTRAP that stops a tracee after its exec.
// A signal that came first (a Ctrl-C before the exec) is delivered.
func waitExecStop(pid int) error {
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(pid, &ws, unix.WALL, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return err
		case ws.Exited():
			return fmt.Errorf("it exited with status %d before it ran", ws.ExitStatus())
		case ws.Signaled():
			return fmt.Errorf("%s killed it before it ran", unix.SignalName(ws.Signal()))
		case ws.Stopped() && ws.StopSignal() == unix.SIGTRAP:
			return nil
		case ws.Stopped():
			if err := unix.PtraceCont(pid, int(ws.StopSignal())); err != nil {
				return err
			}
		}
	}
}

func (h *ptraceHold) release() error {
	h.act <- true
	if err := <-h.done; err != nil {
		h.cmd.Process.Kill()
		h.cmd.Wait()
		return fmt.Errorf("detaching from it: %v", err)
	}
	return nil
}

func (h *ptraceHold) abandon() {
	h.act <- false
	<-h.done
	h.cmd.Wait()
}
