package session

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// The gate: where no cgroup can hold a command (hold.go), its process is
// fusescope started again, marked by gateEnv, which waits on a socket
// (at the fd gateFDEnv names) until the sources are attached and then
// executes the command. Its Go start-up (~5 ms) comes before the sources
// attach, not after.
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

// gateHold is a command held at the gate: our end of its socket.
type gateHold struct {
	cmd  *exec.Cmd
	sock *os.File
}

// startGate starts c, which executes path, as fusescope at the gate, its
// socket after the fds it inherits, and waits until the gate says it
// runs: its own exec is over, which no source may see. A socket pair,
// not a pipe: the gate says so before it waits for the release.
func startGate(c *exec.Cmd, path string) (*gateHold, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "gate"), os.NewFile(uintptr(fds[1]), "gate")
	defer theirs.Close()
	self, err := os.Executable()
	if err != nil {
		ours.Close()
		return nil, err
	}
	gateFD := 3 + len(c.ExtraFiles)
	c.Path, c.Args = self, append([]string{self}, c.Args...)
	c.ExtraFiles = append(c.ExtraFiles, theirs)
	c.Env = append(os.Environ(), gateEnv+"="+path, gateFDEnv+"="+strconv.Itoa(gateFD))
	if err := c.Start(); err != nil {
		ours.Close()
		return nil, err
	}
	if n, _ := ours.Read(make([]byte, 1)); n != 1 {
		ours.Close()
		c.Wait()
		return nil, errors.New("the gate ended before it ran")
	}
	return &gateHold{cmd: c, sock: ours}, nil
}

func (g *gateHold) release() error {
	_, err := g.sock.Write([]byte{1})
	g.sock.Close()
	if err != nil {
		g.cmd.Process.Kill()
		g.cmd.Wait()
	}
	return err
}

func (g *gateHold) abandon() {
	g.sock.Close() // the gate exits 127 on EOF; kill it in case it is stopped
	g.cmd.Process.Kill()
	g.cmd.Wait()
}
