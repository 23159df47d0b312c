package session

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// LookCommand finds the program a command names, as a shell would, or
// says in one line why it cannot run.
func LookCommand(name string) (string, error) {
	path, err := exec.LookPath(name)
	switch {
	case errors.Is(err, syscall.EISDIR):
		return "", fmt.Errorf("%s is a directory: give a program on $PATH or a path to one", name)
	case errors.Is(err, fs.ErrPermission):
		return "", fmt.Errorf("%s: not an executable program (permission denied): give a program on $PATH or a path to one", name)
	case err != nil:
		return "", fmt.Errorf("%s: command not found: give a program on $PATH or a path to one", name)
	}
	return path, nil
}

// command is a run's -- CMD: held before its first instruction (hold.go)
// until the sources are attached; its exit ends the run.
type command struct {
	cmd       *exec.Cmd
	name      string     // as the user gave it, for messages
	pid       int        // its process, once started
	fds       []int      // the fds it has when it executes
	inherited []*os.File // our fds it inherits, kept from the garbage collector's finalizers

	mu       sync.Mutex
	held     hold // nil until started, and once released or abandoned
	released bool
	done     chan struct{} // closed when it has been waited for
	exit     Exit
}

// Exit is how a run's command ended.
type Exit struct {
	Status   *int          // its exit status; nil if a signal killed it
	KilledBy string        // the signal that killed it ("SIGTERM")
	Ran      time.Duration // from its release to its exit
}

// prepareCommand finds argv's program and, where it cannot be held as our
// tracee, starts it at the gate: before the sources attach, which must
// not see fusescope's own exec.
func prepareCommand(argv []string) (*command, error) {
	path, err := LookCommand(argv[0])
	if err != nil {
		return nil, err
	}
	if err := checkExecutable(path); err != nil {
		return nil, err
	}
	// The fds we inherited without close-on-exec go on to the command at
	// their numbers, as a shell's would.
	var inherited []*os.File
	fds := []int{0, 1, 2}
	for _, fd := range inheritedFDs() {
		for len(inherited) < fd-3 {
			inherited = append(inherited, nil) // closed in the child: close-on-exec here anyway
		}
		inherited = append(inherited, os.NewFile(uintptr(fd), "inherited"))
		fds = append(fds, fd)
	}
	c := &command{name: argv[0], fds: fds, inherited: inherited, done: make(chan struct{}),
		cmd: &exec.Cmd{Path: path, Args: argv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, ExtraFiles: slices.Clip(inherited)}}
	if selfGate || !canTrace() {
		h, err := startGate(c.cmd, path)
		if err != nil {
			return nil, fmt.Errorf("starting %s: %v", argv[0], err)
		}
		c.held, c.pid = h, c.cmd.Process.Pid
	}
	return c, nil
}

// start starts a command to be traced, once the sources are attached, and
// returns when its exec is done; one at the gate has started already.
func (c *command) start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held != nil {
		return nil
	}
	h, err := startTraced(c.cmd)
	if err != nil {
		return fmt.Errorf("starting %s: %v", c.name, err)
	}
	c.held, c.pid = h, h.pid
	return nil
}

// selfGate holds commands at fusescope's gate always: tests of that hold.
var selfGate = false

// checkExecutable refuses, in one line, a file the kernel would not
// execute: neither a program nor a script with its #! line.
func checkExecutable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // the exec says why
	}
	defer f.Close()
	var head [4]byte
	n, _ := io.ReadFull(f, head[:])
	if n >= 2 && string(head[:2]) == "#!" || n == 4 && string(head[:]) == "\x7fELF" {
		return nil
	}
	return fmt.Errorf("%s is neither a program nor a script with a #! line: run it with its interpreter, as in sh %[1]s", path)
}

// inheritedFDs lists our fds from 3 on without close-on-exec: the ones
// fusescope was started with, that a command run by a shell would get.
func inheritedFDs() []int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	var fds []int
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			fds = append(fds, fd)
		}
	}
	sort.Ints(fds)
	return fds
}

// release lets the command execute; ended is called when it has exited.
func (c *command) release(ended func()) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.held
	c.held = nil
	start := time.Now()
	if err := h.release(); err != nil {
		return fmt.Errorf("starting %s: %v", c.name, err)
	}
	c.released = true
	go func() {
		c.cmd.Wait()
		e := Exit{Ran: time.Since(start)}
		if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Exited() {
			st := ws.ExitStatus()
			e.Status = &st
		} else if ok && ws.Signaled() {
			e.KilledBy = unix.SignalName(ws.Signal())
		}
		c.mu.Lock()
		c.exit = e
		c.mu.Unlock()
		close(c.done)
		ended()
	}()
	return nil
}

// signal passes a signal on to a released command; it reports whether
// the command was released.
func (c *command) signal(s os.Signal) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		c.cmd.Process.Signal(s)
	}
	return c.released
}

// abandon kills a command that was never released (the run failed before
// its sources were attached) and waits for it; one never started is left.
func (c *command) abandon() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held != nil {
		c.held.abandon()
		c.held = nil
	}
}

// ended is how the command ended, or nil while it runs (the run ended
// under it: terminate ends it).
func (c *command) ended() *Exit {
	select {
	case <-c.done:
	default:
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.exit
	return &e
}

// ExitError makes fusescope exit as the command did: with its exit status,
// or 128 plus the number of the signal that killed it, as a shell reports
// it. The report has been written: there is nothing more to say.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return "" }

// Err is the error that passes the exit on: nil for status 0.
func (e *Exit) Err() error {
	switch {
	case e == nil:
		return nil
	case e.Status != nil && *e.Status != 0:
		return &ExitError{Code: *e.Status}
	case e.Status == nil && e.KilledBy != "":
		if sig := unix.SignalNum(e.KilledBy); sig != 0 {
			return &ExitError{Code: 128 + int(sig)}
		}
		return &ExitError{Code: 1}
	}
	return nil
}
