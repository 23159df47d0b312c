package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
)

// gateEnv marks the process fusescope syscalls -- CMD starts: it waits on
// fd 3 until the tracer is attached, then executes the command, so that
// the trace begins exactly at the command's exec.
const gateEnv = "FUSESCOPE_SYSCALLS_GATE"

// gateFD is the gate's end of the pipe (exec.Cmd.ExtraFiles[0]).
const gateFD = 3

func runGate() {
	path := os.Getenv(gateEnv)
	os.Unsetenv(gateEnv)
	var b [1]byte
	if n, _ := syscall.Read(gateFD, b[:]); n != 1 {
		os.Exit(127) // the tracer gave up before attaching
	}
	syscall.Close(gateFD)
	err := syscall.Exec(path, os.Args[1:], os.Environ())
	fmt.Fprintf(os.Stderr, "fusescope: executing %s: %v\n", path, err)
	os.Exit(127)
}

// lookCommand finds the program a command names, as a shell would, or says
// in one line why it cannot run.
func lookCommand(name string) (string, error) {
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

// startGated starts argv held at the gate; release lets it execute.
func startGated(argv []string) (cmd *exec.Cmd, release func() error, err error) {
	path, err := lookCommand(argv[0])
	if err != nil {
		return nil, nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	cmd = exec.Command(self, argv...)
	cmd.Args = append([]string{self}, argv...)
	cmd.Env = append(os.Environ(), gateEnv+"="+path)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{r}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, nil, err
	}
	r.Close()
	release = func() error {
		_, err := w.Write([]byte{1})
		w.Close()
		return err
	}
	return cmd, release, nil
}
