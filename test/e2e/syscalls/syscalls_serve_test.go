package syscalls

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/test/e2e"
	"github.com/fusescope/fusescope/test/proctest"
)

// TestSyscallsServe: syscalls --serve keeps the programs loaded; runs
// through its socket count exactly what a run that loads its own does and
// what the script is known to do, run after run (the maps are cleared
// between runs); a run that finds it busy loads its own; bad uses are one
// line; its end, by SIGTERM or SIGKILL, leaves no program loaded and no
// socket in the way.
func TestSyscallsServe(t *testing.T) {
	t.Parallel()
	probes := e2e.WatchProbes(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "syscalls.sock")
	data := filepath.Join(dir, "data")
	if err := os.WriteFile(data, []byte("0123456789\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Known counts: five cats open the file once and read its 11 bytes.
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nfor i in 1 2 3 4 5; do cat "+data+" >/dev/null; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	server := proctest.Start(t, exec.Command(e2e.Fusescope, "syscalls", "--serve", "--socket", sock), "Serving the live source's programs", 30*time.Second)
	defer server.Interrupt(t, 10*time.Second)
	if st, err := os.Stat(sock); err != nil || st.Mode().Perm() != 0o600 || st.Mode().Type() != os.ModeSocket {
		t.Fatalf("the socket: %v %v, want a socket with mode 0600", st.Mode(), err)
	}

	check := func(what string, r *profile.SyscallReport, viaServer bool) map[string]int {
		t.Helper()
		if (r.Live.LoadedBy != "") != viaServer || viaServer && !strings.Contains(r.Live.LoadedBy, sock) {
			t.Errorf("%s: loaded_by %q, want the server's: %v", what, r.Live.LoadedBy, viaServer)
		}
		var f *profile.FileStat
		for i := range r.Files {
			if r.Files[i].Target == data {
				f = &r.Files[i]
			}
		}
		if f == nil || f.Opens != 5 || f.BytesRead != 5*11 {
			t.Errorf("%s: %s: %+v, want 5 opens and 55 bytes read", what, data, f)
		}
		if len(r.Processes) != 6 || r.Live.ExitStatus == nil || *r.Live.ExitStatus != 0 {
			t.Errorf("%s: %d processes, exit status %v; want the shell and five cats, 0", what, len(r.Processes), r.Live.ExitStatus)
		}
		// Tracing begins at the command's exec: the gate's own is never seen.
		for _, p := range r.Processes {
			if len(p.Execs) != 1 {
				t.Errorf("%s: process %d executed %+v, want one program", what, p.PID, p.Execs)
			}
		}
		calls := map[string]int{}
		for _, s := range r.Syscalls {
			calls[s.Name] = s.Calls
		}
		return calls
	}
	own := check("a run's own programs", liveReport(t, "--no-server", "--", script), false)
	for i := range 5 {
		got := check("through the server", liveReport(t, "--socket", sock, "--", script), true)
		// The same calls, exactly: nothing left over from the run before.
		for _, name := range []string{"execve", "openat", "read", "close", "vfork", "wait4"} {
			if got[name] != own[name] || got[name] == 0 {
				t.Errorf("run %d through the server: %s %d times, %d with its own programs", i+1, name, got[name], own[name])
			}
		}
	}

	// Busy: while a run holds the programs, another loads its own.
	long := exec.Command(e2e.Fusescope, "syscalls", "--socket", sock, "-o", filepath.Join(dir, "long.txt"), "--", "sleep", "3")
	if err := long.Start(); err != nil {
		t.Fatal(err)
	}
	// Its command starts only once it holds the server's programs (a
	// sys_enter link in bpftool's list may be another package's test).
	e2e.WaitFor(t, "the long run's command, started once it is attached", func() bool {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", long.Process.Pid))
		for _, task := range tasks {
			b, _ := os.ReadFile(task)
			for _, child := range strings.Fields(string(b)) {
				if exe, _ := os.Readlink("/proc/" + child + "/exe"); filepath.Base(exe) == "sleep" {
					return true
				}
			}
		}
		return false
	})
	check("beside a run on the server", liveReport(t, "--socket", sock, "--", script), false)
	if err := long.Wait(); err != nil {
		t.Errorf("the long run: %v", err)
	}

	// One line each, and the command never runs.
	marker := filepath.Join(dir, "ran")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"syscalls", "--serve", "--socket", sock}, "a server already listens on " + sock},
		{[]string{"syscalls", "--serve", "--", "touch", marker}, "--serve takes no logs, command or -p"},
		{[]string{"syscalls", "--socket", filepath.Join(dir, "none.sock"), "--", "touch", marker}, "start fusescope syscalls --serve --socket"},
		{[]string{"syscalls", "--socket", "/tmp/" + strings.Repeat("x", 120), "--", "touch", marker}, "a Unix socket's may have 107 at most"},
		{[]string{"syscalls", "--serve", "--socket", "/tmp/" + strings.Repeat("x", 120)}, "a Unix socket's may have 107 at most"},
	} {
		out, err := exec.Command(e2e.Fusescope, c.args...).CombinedOutput()
		if err == nil || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 || !strings.Contains(string(out), c.want) {
			t.Errorf("fusescope %v: %v\n%s\nwant one line with %q", c.args, err, out, c.want)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("a refused run ran its command")
	}

	// SIGTERM: the socket goes, and so do the programs.
	if err := server.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if exited, err := server.Wait(10 * time.Second); !exited || err != nil {
		t.Fatalf("the server after SIGTERM: exited %v, %v", exited, err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("the socket is still there: %v", err)
	}
	probes.AssertNoneLeft(t, server.Cmd.Process.Pid)

	// SIGKILL leaves the socket file; the next server replaces it, and a
	// run finds that no server answers there.
	killed := proctest.Start(t, exec.Command(e2e.Fusescope, "syscalls", "--serve", "--socket", sock), "Serving", 30*time.Second)
	killed.Cmd.Process.Kill()
	killed.Wait(10 * time.Second)
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("after SIGKILL: %v", err)
	}
	out, err := exec.Command(e2e.Fusescope, "syscalls", "--socket", sock, "--", "true").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "connection refused") {
		t.Errorf("a run on a dead server's socket: %v\n%s", err, out)
	}
	again := proctest.Start(t, exec.Command(e2e.Fusescope, "syscalls", "--serve", "--socket", sock), "Serving", 30*time.Second)
	check("through a server on a stale socket", liveReport(t, "--socket", sock, "--", script), true)
	if err := again.Interrupt(t, 10*time.Second); err != nil {
		t.Errorf("Ctrl-C: %v", err)
	}
	probes.AssertNoneLeft(t, again.Cmd.Process.Pid, killed.Cmd.Process.Pid)
}

// TestSyscallsServeKeepsWhatIsNotASocket: --serve --socket PATH runs as
// root, and replaces only a socket no server answers on; a file, a
// directory or a link at PATH is refused in one line and left as it was.
func TestSyscallsServeKeepsWhatIsNotASocket(t *testing.T) {
	t.Parallel()
	probes := e2e.WatchProbes(t)
	dir := t.TempDir()
	file, empty, link := filepath.Join(dir, "file"), filepath.Join(dir, "empty"), filepath.Join(dir, "link")
	if err := os.WriteFile(file, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	for path, kind := range map[string]string{file: "a regular file", empty: "a directory", link: "a symbolic link"} {
		// Had it taken the path, it would serve there until killed.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, e2e.Fusescope, "syscalls", "--serve", "--socket", path).CombinedOutput()
		cancel()
		want := "--socket " + path + ": the path is " + kind + ", not a socket"
		if err == nil || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 || !strings.Contains(string(out), want) {
			t.Errorf("--serve --socket %s: %v\n%s\nwant one line with %q", path, err, out, want)
		}
	}
	if data, err := os.ReadFile(file); err != nil || string(data) != "precious\n" {
		t.Errorf("the file: %q, %v; want it untouched", data, err)
	}
	if st, err := os.Lstat(empty); err != nil || !st.IsDir() {
		t.Errorf("the empty directory: %v, %v; want it untouched", st, err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode().Type() != os.ModeSymlink {
		t.Errorf("the link: %v, %v; want it untouched", st, err)
	}
	probes.AssertNoneLeft(t)
}

// TestSyscallsClientChecksServer: with --socket in a world-writable
// directory, anyone can listen there first. A run asks the listener's
// credentials (SO_PEERCRED) before it sends anything: one that is neither
// root nor the run's own user gets nothing, and the run ends at once in
// one line, its command never run.
func TestSyscallsClientChecksServer(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "setpriv", "/usr/bin/python3")
	dir, err := os.MkdirTemp("", "fusescope-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil { // as /tmp
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "syscalls.sock")
	// A listener run as nobody, which counts the bytes a client sends it.
	listener := `import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(1)
print("listening", flush=True)
c, _ = s.accept()
c.settimeout(3)
n = 0
try:
    while True:
        b = c.recv(4096)
        if not b:
            break
        n += len(b)
except socket.timeout:
    pass
print("received", n, flush=True)
`
	impostor := proctest.Start(t, exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", listener, sock), "listening", 10*time.Second)
	marker := filepath.Join(t.TempDir(), "ran")
	start := time.Now()
	out, err := exec.Command(e2e.Fusescope, "syscalls", "--socket", sock, "--", "touch", marker).CombinedOutput()
	took := time.Since(start)
	want := "the server on " + sock + " runs as uid 65534"
	if err == nil || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 || !strings.Contains(string(out), want) {
		t.Errorf("a run on nobody's socket: %v\n%s\nwant one line with %q", err, out, want)
	}
	if took > 3*time.Second {
		t.Errorf("the run took %v: it waited for the listener", took)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the refused run ran its command")
	}
	if exited, _ := impostor.Wait(10 * time.Second); !exited || !strings.Contains(impostor.Output(), "received 0\n") {
		t.Errorf("the listener (exited %v):\n%s\nwant it to have received nothing", exited, impostor.Output())
	}
}
