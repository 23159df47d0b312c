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

// A run's -- CMD starts as a gate: a process that waits on a socket until the
// sources are attached, then executes the command, so that tracing begins
// exactly at the command's exec and a source knows the command's PID
// before it runs. The socket is the first fd after those the command
// inherits from us (a shell's 3>&1 reaches the command as it would without
// fusescope). The gate is a small program of its own (gate_amd64.go) or,
// where that cannot run, fusescope itself, marked by gateEnv, with
// gateFDEnv saying which fd the socket is.
const (
	gateEnv   = "FUSESCOPE_GATE"
	gateFDEnv = "FUSESCOPE_GATE_FD"
)

// RunGateIfAsked executes the command this process was started to hold
// at the gate, once released; it returns at once in any other process.
// main calls it first.
func RunGateIfAsked() {
	path := os.Getenv(gateEnv)
	if path == "" {
		return
	}
	fd, err := strconv.Atoi(os.Getenv(gateFDEnv))
	os.Unsetenv(gateEnv)
	os.Unsetenv(gateFDEnv)
	b := []byte{1}
	if n, _ := syscall.Write(fd, b); err != nil || n != 1 { // it runs
		os.Exit(127)
	}
	if n, _ := syscall.Read(fd, b); n != 1 {
		os.Exit(127) // the run gave up before attaching
	}
	syscall.Close(fd)
	err = syscall.Exec(path, os.Args[1:], os.Environ())
	fmt.Fprintf(os.Stderr, "fusescope: executing %s: %v\n", path, err)
	os.Exit(127)
}

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

// command is a run's -- CMD: started held at the gate, released once the
// sources are attached; its exit ends the run.
type command struct {
	cmd       *exec.Cmd
	gate      *os.File   // our end of the gate's socket; nil once released
	gateFD    int        // the gate's end, in the command
	inherited []*os.File // our fds it inherits, kept from the garbage collector's finalizers

	mu       sync.Mutex
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

// startGated starts argv held at the gate, and waits until the gate runs.
func startGated(argv []string) (*command, error) {
	path, err := LookCommand(argv[0])
	if err != nil {
		return nil, err
	}
	if err := checkExecutable(path); err != nil {
		return nil, err
	}
	// A socket pair, not a pipe: the gate says it runs before it waits for
	// the release. Until then its own exec may still be under way, and a
	// source attached meanwhile would see it (a server's programs attach
	// in a millisecond).
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "gate"), os.NewFile(uintptr(fds[1]), "gate")
	defer theirs.Close()
	// The fds we inherited without close-on-exec go on to the command at
	// their numbers, as a shell's would; the gate's socket comes after them.
	var inherited []*os.File
	for _, fd := range inheritedFDs(ours.Fd()) {
		for len(inherited) < fd-3 {
			inherited = append(inherited, nil) // closed in the child: close-on-exec here anyway
		}
		inherited = append(inherited, os.NewFile(uintptr(fd), "inherited"))
	}
	gateFD := 3 + len(inherited)
	c, err := startGate(path, argv, append(slices.Clip(inherited), theirs), gateFD)
	if err != nil {
		ours.Close()
		return nil, fmt.Errorf("starting %s: %v", argv[0], err)
	}
	if n, _ := ours.Read(make([]byte, 1)); n != 1 {
		ours.Close()
		c.Wait()
		return nil, fmt.Errorf("starting %s: the gate ended before it ran", argv[0])
	}
	return &command{cmd: c, gate: ours, gateFD: gateFD, inherited: inherited, done: make(chan struct{})}, nil
}

// selfGate makes fusescope the gate always: tests of that gate.
var selfGate = false

// startGate starts the gate for path (argv as given) with files from fd 3
// on: the small gate, or fusescope itself where the kernel will not
// execute a memfd (vm.memfd_noexec) or the small gate does not exist.
func startGate(path string, argv []string, files []*os.File, gateFD int) (*exec.Cmd, error) {
	gate := func() *exec.Cmd {
		return &exec.Cmd{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, ExtraFiles: files}
	}
	if small, err := newGate(gateFD); err == nil && !selfGate {
		defer small.Close() // its exec has opened it, through our fd table, when Start returns
		c := gate()
		c.Path = fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), small.Fd())
		c.Args = append([]string{"fusescope-gate", path}, argv...)
		if err := c.Start(); err == nil {
			return c, nil
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c := gate()
	c.Path, c.Args = self, append([]string{self}, argv...)
	c.Env = append(os.Environ(), gateEnv+"="+path, gateFDEnv+"="+strconv.Itoa(gateFD))
	return c, c.Start()
}

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

// inheritedFDs lists our fds from 3 on without close-on-exec, but for
// skip (our end of the gate's socket, which the command must not hold): the ones
// fusescope was started with, that a command run by a shell would get.
func inheritedFDs(skip uintptr) []int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	var fds []int
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 || uintptr(fd) == skip {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			fds = append(fds, fd)
		}
	}
	sort.Ints(fds)
	return fds
}

// pid is the command's process, at the gate and after its exec.
func (c *command) pid() int { return c.cmd.Process.Pid }

// release lets the command execute; ended is called when it has exited.
func (c *command) release(ended func()) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.gate.Write([]byte{1})
	c.gate.Close()
	c.gate = nil
	if err != nil {
		c.cmd.Process.Kill()
		c.cmd.Wait()
		return fmt.Errorf("starting %s: %v", c.cmd.Args[1], err)
	}
	c.released = true
	start := time.Now()
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
// its sources were attached) and waits for it.
func (c *command) abandon() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released || c.gate == nil {
		return
	}
	c.gate.Close() // the gate exits 127 on EOF; kill it in case it is stopped
	c.gate = nil
	c.cmd.Process.Kill()
	c.cmd.Wait()
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
