package session

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// runGate starts the small gate for argv (path first), with its socket at
// fd 3, waits for its byte and writes release before closing our end.
func runGate(t *testing.T, release []byte, argv ...string) (stdout, stderr string, code int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, r := os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "gate's")
	gate, err := newGate(3)
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Close()
	c := exec.Command(fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), gate.Fd()))
	c.Args = append([]string{"fusescope-gate"}, argv...)
	c.Env = []string{"FOO=bar baz", "EMPTY="}
	c.ExtraFiles = []*os.File{r}
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if n, err := w.Read(make([]byte, 1)); n != 1 {
		t.Fatalf("the gate did not say it runs: %v", err)
	}
	w.Write(release)
	w.Close()
	c.Wait()
	return out.String(), errOut.String(), c.ProcessState.ExitCode()
}

// The gate executes the command as given: argv[0] as the caller wrote it,
// the arguments, the environment untouched, the socket closed.
func TestGateExecutes(t *testing.T) {
	script := `tr '\0' '|' </proc/$$/cmdline; echo; tr '\0' '|' </proc/$$/environ; echo; [ -e /proc/$$/fd/3 ] && echo socket-open || echo socket-closed`
	out, errOut, code := runGate(t, []byte{1}, "/bin/sh", "NAME", "-c", script, "ARG")
	want := "NAME|-c|" + script + "|ARG|\nFOO=bar baz|EMPTY=|\nsocket-closed\n"
	if code != 0 || errOut != "" || out != want {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// A run that gives up before the release leaves the command unexecuted:
// exit status 127 and nothing said.
func TestGateGivenUp(t *testing.T) {
	out, errOut, code := runGate(t, nil, "/bin/sh", "sh", "-c", "echo ran")
	if code != 127 || out != "" || errOut != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// A command the kernel refuses: one line, exit status 127.
func TestGateExecFails(t *testing.T) {
	_, errOut, code := runGate(t, []byte{1}, "/nonexistent/program", "program")
	if code != 127 || errOut != string(gateFailed) {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}
