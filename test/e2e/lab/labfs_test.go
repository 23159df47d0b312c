package lab

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/labfs"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/test/e2e"
	"github.com/fusescope/fusescope/test/labmodes"
	"github.com/fusescope/fusescope/test/proctest"
	"golang.org/x/sys/unix"
)

// fsScript runs the same operations in a directory and returns a
// description of the result, so that a FUSE mount and a native directory can
// be compared side by side.
func fsScript(t *testing.T, dir string) string {
	t.Helper()
	var log strings.Builder
	note := func(format string, args ...any) { fmt.Fprintf(&log, format+"\n", args...) }
	p := func(name string) string { return filepath.Join(dir, name) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
	}
	must(os.WriteFile(p("a"), []byte("hello world\n"), 0o644))
	must(os.Rename(p("a"), p("b")))
	must(os.Link(p("b"), p("c")))
	must(os.Symlink("b", p("sym")))
	must(os.Symlink("/etc/outside", p("escape")))
	must(os.Mkdir(p("d"), 0o755))
	must(os.WriteFile(p("d/x"), bytes.Repeat([]byte("x"), 100000), 0o600))
	must(os.Chmod(p("d/x"), 0o640))
	must(os.Truncate(p("d/x"), 4097))
	must(unix.Setxattr(p("b"), "user.color", []byte("blue"), 0))
	for i := 0; i < 3; i++ {
		f, err := os.OpenFile(p("log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		must(err)
		fmt.Fprintf(f, "line %d\n", i)
		must(f.Close())
	}
	// Concurrent writers, each to its own region of one file.
	f, err := os.OpenFile(p("shared"), os.O_CREATE|os.O_RDWR, 0o644)
	must(err)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			buf := bytes.Repeat([]byte{byte('a' + w)}, 8192)
			for i := 0; i < 8; i++ {
				f.WriteAt(buf, int64((i*4+w)*8192))
			}
		}(w)
	}
	wg.Wait()
	must(f.Sync())
	must(f.Close())
	must(os.Remove(p("c")))
	must(os.WriteFile(p("mapped"), mappedBefore, 0o644))
	must(writeShared(p("mapped")))
	noName(t, dir, note)

	ents, err := os.ReadDir(dir)
	must(err)
	for _, e := range ents {
		fi, err := os.Lstat(p(e.Name()))
		must(err)
		line := fmt.Sprintf("%s %v size=%d", e.Name(), fi.Mode(), fi.Size())
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p(e.Name()))
			must(err)
			line += " -> " + target
		} else if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p(e.Name()))
			must(err)
			line += fmt.Sprintf(" crc=%08x", crc(data))
		}
		note("%s", line)
	}
	buf := make([]byte, 16)
	n, err := unix.Getxattr(p("b"), "user.color", buf)
	note("xattr user.color=%q err=%v", buf[:max(n, 0)], err)
	fi, err := os.Stat(p("d/x"))
	must(err)
	note("d/x %v size=%d", fi.Mode(), fi.Size())
	_, err = os.Stat(p("escape"))
	note("stat escape: %v", errors.Is(err, os.ErrNotExist))
	return log.String()
}

// noName works on files that have no name while open, as programs do: one
// unlinked while open (a temporary file), and one made with O_TMPFILE and
// linked into dir once written (an atomic create). Each call's result is
// noted; the tmpfile is listed with the rest.
func noName(t *testing.T, dir string, note func(string, ...any)) {
	t.Helper()
	try := func(what string, err error) { note("%s: %v", what, err) }
	onFile := func(fd int) {
		_, err := unix.Write(fd, []byte("written while nameless\n"))
		try("write", err)
		try("fchmod", unix.Fchmod(fd, 0o600))
		try("fchown", unix.Fchown(fd, 65534, 65534))
		try("fsetxattr", unix.Fsetxattr(fd, "user.k", []byte("v"), 0))
		buf := make([]byte, 8)
		n, err := unix.Fgetxattr(fd, "user.k", buf)
		try(fmt.Sprintf("fgetxattr %q", buf[:max(n, 0)]), err)
		try("ftruncate", unix.Ftruncate(fd, 7))
		try("futimens", unix.UtimesNanoAt(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), []unix.Timespec{{Sec: 1}, {Sec: 2}}, 0))
		var st unix.Stat_t
		err = unix.Fstat(fd, &st)
		try(fmt.Sprintf("fstat mode=%o uid=%d size=%d mtime=%d", st.Mode, st.Uid, st.Size, st.Mtim.Sec), err)
	}
	fd, err := unix.Open(filepath.Join(dir, "doomed"), unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	try("unlink while open", unix.Unlink(filepath.Join(dir, "doomed")))
	onFile(fd)
	unix.Close(fd)
	fd, err = unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	onFile(fd)
	try("linkat tmpfile", unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.AT_FDCWD, filepath.Join(dir, "tmpfile"), unix.AT_SYMLINK_FOLLOW))
	unix.Close(fd)
}

// mappedBefore is the "mapped" file as fsScript writes it; writeShared
// changes it into mappedAfter through a shared mapping.
var mappedBefore, mappedAfter = bytes.Repeat([]byte("m"), 3*4096), func() []byte {
	b := bytes.Repeat([]byte("m"), 3*4096)
	copy(b[4000:], "across a page boundary")
	copy(b[len(b)-4:], "end\n")
	return b
}()

// writeShared writes into a file through a shared mapping, as databases
// and git do, and syncs it, in a process of its own: a page fault on a
// mount this process serves can deadlock it, the faulting thread holding
// up the garbage collector's stop-the-world that the daemon goroutine
// answering the fault's READ waits for (it hung make test once).
func writeShared(name string) error {
	out, err := e2e.Helper("write-shared", name).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// writeSharedHere is writeShared's work, in the helper process.
func writeSharedHere(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, len(mappedBefore), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("shared mmap: %w", err)
	}
	copy(m[4000:], "across a page boundary")
	copy(m[len(m)-4:], "end\n")
	if err := unix.Msync(m, unix.MS_SYNC); err != nil {
		unix.Munmap(m)
		return fmt.Errorf("msync: %w", err)
	}
	return unix.Munmap(m)
}

func crc(b []byte) uint32 {
	var c uint32 = 0xffffffff
	for _, x := range b {
		c ^= uint32(x)
		for k := 0; k < 8; k++ {
			c = c>>1 ^ 0x82f63b78&-(c&1) // crc32c
		}
	}
	return ^c
}

// Every mode behaves as the source directory does, operation by operation.
func TestLabFSPresetsMatchNative(t *testing.T) {
	t.Parallel()
	want := fsScript(t, t.TempDir())
	for name, cfg := range labmodes.All() {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // a mount of its own
			src, mnt, _ := e2e.MountLabFS(t, cfg)
			if got := fsScript(t, mnt); got != want {
				t.Errorf("preset %s differs from a native directory:\n--- labfs\n%s--- native\n%s", name, got, want)
			}
			// What the mount shows is in the source directory.
			if _, err := os.Stat(filepath.Join(src, "shared")); err != nil {
				t.Errorf("source directory: %v", err)
			}
			// msync wrote what the shared mapping changed through.
			if b, err := os.ReadFile(filepath.Join(src, "mapped")); err != nil || !bytes.Equal(b, mappedAfter) {
				t.Errorf("source directory's mapped file after msync: %v, %d bytes, as written: %v", err, len(b), bytes.Equal(b, mappedAfter))
			}
			if target, _ := os.Readlink(filepath.Join(mnt, "escape")); target != "/etc/outside" {
				t.Errorf("a symlink must be returned as stored, got %q", target)
			}
		})
	}
}

// permissionScript is what another user (nobody) does in a directory that
// permissionSetup prepared; it prints each step's outcome and the owners,
// groups and modes that result.
const permissionScript = `
umask 022
try() { if "$@" 2>/dev/null; then echo "$*: ok"; else echo "$*: refused"; fi; }
try sh -c 'echo x >> readonly'
try cat secret
try chown 65534 readonly
try sh -c 'echo mine > own'
try sh -c 'echo in > shared/f'
try mkdir shared/sub
try sh -c 'echo more >> suid'
try cat acl-denied
try cat acl-granted
try sh -c 'echo in > inherit/f'
try mkdir inherit/sub
try sh -c 'umask 002; echo in > own002'
try setfacl -m u:65534:rwx,g::r-x sgid-theirs
stat -c '%n uid=%u gid=%g mode=%a' own shared/f shared/sub suid readonly secret inherit/f inherit/sub own002 sgid-theirs
`

// permissionSetup makes, as root, files that other users may not write or
// read, a set-group-ID directory of group 4321 that anyone may write, a
// set-user-ID program owned by nobody, files whose ACLs deny nobody what
// their modes allow and grant what they deny, a directory whose default ACL
// gives new files to the group to write (whatever the umask), and a
// set-group-ID file of nobody's in a group nobody is not in.
func permissionSetup(t *testing.T, dir string) {
	t.Helper()
	os.Chmod(filepath.Dir(dir), 0o755) // the test's own temp dir is 0700
	p := func(name string) string { return filepath.Join(dir, name) }
	for _, err := range []error{
		os.Chmod(dir, 0o777),
		os.WriteFile(p("readonly"), []byte("root's\n"), 0o644),
		os.WriteFile(p("secret"), []byte("root's\n"), 0o600),
		os.Mkdir(p("shared"), 0o777), os.Chown(p("shared"), 0, 4321), unix.Chmod(p("shared"), 0o2777),
		os.WriteFile(p("suid"), []byte("#!/bin/sh\n"), 0o755), os.Chown(p("suid"), 65534, 65534), unix.Chmod(p("suid"), 0o4755),
		os.WriteFile(p("acl-denied"), []byte("root's\n"), 0o644),
		os.WriteFile(p("acl-granted"), []byte("root's\n"), 0o640),
		os.Mkdir(p("inherit"), 0o777), unix.Chmod(p("inherit"), 0o777),
		os.WriteFile(p("sgid-theirs"), nil, 0o644), os.Chown(p("sgid-theirs"), 65534, 4321), unix.Chmod(p("sgid-theirs"), 0o2775),
		setfacl("-m", "u:65534:---", p("acl-denied")),
		setfacl("-m", "u:65534:r--", p("acl-granted")),
		setfacl("-d", "-m", "u::rwx,g::rwx,o::r-x", p("inherit")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func setfacl(args ...string) error {
	if out, err := exec.Command("setfacl", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("setfacl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// asNobody runs script as nobody in dir. The shell enters dir itself: the
// lab fs serving dir runs in this process, and a chdir by the child
// between fork and exec (exec.Cmd.Dir) can wait forever on a request that
// this process cannot serve until the child has exec'd.
func asNobody(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
		"sh", "-c", `cd "$1" && eval "$2"`, "sh", dir, script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody in %s: %v\n%s", dir, err, out)
	}
	return string(out)
}

// Another user meets the permissions, ownership and set-ID rules of a
// native directory in every mode: the kernel checks file modes
// (default_permissions; the daemon runs as root and would allow anything),
// what the user makes is theirs, of the directory's group in a
// set-group-ID directory, and the user's write clears set-user-ID, also
// where writes never reach the daemon (passthrough).
func TestLabFSPermissionsAsNative(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "setpriv", "setfacl")
	native := t.TempDir()
	permissionSetup(t, native)
	want := asNobody(t, native, permissionScript)
	for _, line := range []string{"cat secret: refused", "shared/f uid=65534 gid=4321", "cat acl-denied: refused",
		"cat acl-granted: ok", "inherit/f uid=65534 gid=65534 mode=664", "inherit/sub uid=65534 gid=65534 mode=775",
		"own002 uid=65534 gid=65534 mode=664", "sgid-theirs uid=65534 gid=4321 mode=775"} {
		if !strings.Contains(want, line) {
			t.Fatalf("the native directory did not behave as the test expects (%q):\n%s", line, want)
		}
	}
	for name, cfg := range labmodes.All() {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // a mount of its own
			src, mnt, _ := e2e.MountLabFS(t, cfg)
			permissionSetup(t, mnt)
			if got := asNobody(t, mnt, permissionScript); got != want {
				t.Errorf("as nobody, preset %s differs from a native directory:\n--- labfs\n%s--- native\n%s", name, got, want)
			}
			// The backing file is the oracle for the set-user-ID bit.
			if fi, err := os.Stat(filepath.Join(src, "suid")); err != nil || fi.Mode()&os.ModeSetuid != 0 {
				t.Errorf("backing file after nobody's write: %v, mode %v, want set-user-ID cleared", err, fi.Mode())
			}
		})
	}
	// Without the kernel's checks, other users may not use the mount at all.
	cfg := e2e.Preset(t, "default")
	cfg.NoDefaultPermissions = true
	_, mnt, _ := e2e.MountLabFS(t, cfg)
	permissionSetup(t, mnt)
	if out := asNobody(t, filepath.Dir(mnt), "cat "+filepath.Join(mnt, "readonly")+" 2>&1 || true"); !strings.Contains(out, "Permission denied") {
		t.Errorf("--default-permissions=false: nobody read %s: %q, want Permission denied", mnt, out)
	}
}

// fio write-then-verify (crc32c) in every mode, sequential, random and
// through a shared mapping.
func TestLabFSFioVerify(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "fio")
	for name, cfg := range labmodes.All() {
		// The third job mixes reads into unaligned writes of varying sizes:
		// partial pages, and reads meeting write-behind and read-ahead. The
		// last writes through a shared mapping, as databases do.
		for _, job := range []struct{ name, rw, engine, bs string }{
			{"write", "write", "sync", "--bs=4k"}, {"randwrite", "randwrite", "sync", "--bs=4k"},
			{"randrw", "randrw", "sync", "--bsrange=512-64k"}, {"mmap-randwrite", "randwrite", "mmap", "--bs=4k"},
		} {
			t.Run(name+"/"+job.name, func(t *testing.T) {
				t.Parallel() // a mount of its own
				_, mnt, _ := e2e.MountLabFS(t, cfg)
				args := []string{"--name=verify", "--directory=" + mnt, "--size=4m", "--ioengine=" + job.engine, "--rw=" + job.rw, job.bs,
					"--verify=crc32c", "--do_verify=1", "--fsync_on_close=1", "--verify_fatal=1",
					"--verify_state_save=0", "--output-format=terse"}
				if out, err := exec.Command("fio", args...).CombinedOutput(); err != nil {
					t.Fatalf("fio %s on preset %s: %v\n%s", job.name, name, err, out)
				}
			})
		}
	}
}

// --bandwidth holds READ data to the emulated link's rate.
func TestLabFSBandwidth(t *testing.T) {
	// Not parallel: it times a transfer against the bandwidth limit.
	cfg := e2e.Preset(t, "nocache")
	cfg.Bandwidth = 20 << 20
	src, mnt, _ := e2e.MountLabFS(t, cfg)
	if err := os.WriteFile(filepath.Join(src, "big"), make([]byte, 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := os.ReadFile(filepath.Join(mnt, "big")); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 190*time.Millisecond {
		t.Errorf("4 MiB at 20 MiB/s took %v, want at least 200 ms", took)
	}
}

// After SIGKILL of the daemon, the next mount finds the dead mount, cleans it
// and says so; SIGTERM unmounts cleanly.
func TestLabFSKilledDaemon(t *testing.T) {
	t.Parallel()
	src, mnt := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644)
	daemon := startDaemon(t, src, mnt)
	daemon.Cmd.Process.Kill()
	daemon.Wait(10 * time.Second)
	var sfs unix.Statfs_t
	if err := unix.Statfs(mnt, &sfs); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("after SIGKILL, statfs %s = %v, want ENOTCONN", mnt, err)
	}
	// Asked about the dead mount, stats and trace say what happened.
	for args, want := range map[string]string{
		"fs stats " + mnt:      "is a dead FUSE mount: its daemon is gone",
		"trace --mount " + mnt: "the connection was aborted (its daemon died",
	} {
		out, err := exec.Command(e2e.Fusescope, strings.Fields(args)...).CombinedOutput()
		if text := strings.TrimSpace(string(out)); err == nil || strings.Contains(text, "\n") || !strings.Contains(text, want) {
			t.Errorf("%s on a dead mount: want one line containing %q and a non-zero exit, got %v:\n%s", args, want, err, out)
		}
	}
	out, err := exec.Command(e2e.Fusescope, "fs", "mount", "--background", src, mnt).CombinedOutput()
	if err != nil {
		t.Fatalf("remount: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "dead FUSE mount") {
		t.Errorf("the remount did not say it cleaned a dead mount:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || string(b) != "x" {
		t.Errorf("after remount: %q %v", b, err)
	}
	e2e.Run(t, e2e.Fusescope, "fs", "umount", mnt)
	if e2e.Mounted(mnt) {
		t.Fatal("still mounted after fs umount")
	}
	// Nothing is left behind: the detached daemon removes its control
	// socket, and its log when it wrote nothing.
	sock := labfs.SocketPath(mnt)
	for _, p := range []string{sock, strings.TrimSuffix(sock, ".sock") + ".log"} {
		e2e.Eventually(t, 10*time.Second, p+" removed after fs umount", func() (bool, string) {
			_, err := os.Stat(p)
			return err != nil, "still there"
		})
	}

	term := startDaemon(t, src, mnt)
	term.Cmd.Process.Signal(syscall.SIGTERM)
	if _, err := term.Wait(30 * time.Second); err != nil {
		t.Errorf("SIGTERM: exit %v", err)
	}
	if e2e.Mounted(mnt) {
		t.Error("still mounted after SIGTERM")
		exec.Command("umount", "-l", mnt).Run()
	}
	if _, err := os.Stat(sock); err == nil {
		t.Errorf("control socket %s is left behind after SIGTERM", sock)
	}
}

// A detached daemon killed outright, with a shell still inside its mount:
// fs umount detaches the dead mount (as fs mount would) instead of calling
// it busy, and neither its control socket nor its empty log is left in the
// control directory.
func TestLabFSKilledBackgroundDaemon(t *testing.T) {
	t.Parallel()
	src, mnt := t.TempDir(), t.TempDir()
	out, err := exec.Command(e2e.Fusescope, "fs", "mount", "--background", src, mnt).CombinedOutput()
	if err != nil {
		t.Fatalf("fs mount --background: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`daemon pid (\d+)`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("fs mount --background did not name its daemon:\n%s", out)
	}
	sock, log := labfs.SocketPath(mnt), labfs.LogPath(mnt)
	for _, p := range []string{sock, log} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("while mounted: %v", err)
		}
	}
	shell := exec.Command("sh", "-c", `cd "$1" && echo in && exec sleep 60`, "sh", mnt)
	stdout, _ := shell.StdoutPipe()
	if err := shell.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { shell.Process.Kill(); shell.Wait() }()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "in\n" {
		t.Fatalf("the shell did not enter %s: %q", mnt, line)
	}
	pid, _ := strconv.Atoi(m[1])
	syscall.Kill(pid, syscall.SIGKILL)
	e2e.Eventually(t, 5*time.Second, mnt+" to stop answering after SIGKILL of its daemon", func() (bool, string) {
		var sfs unix.Statfs_t
		err := unix.Statfs(mnt, &sfs)
		return errors.Is(err, syscall.ENOTCONN), fmt.Sprintf("statfs: %v", err)
	})
	out, err = exec.Command(e2e.Fusescope, "fs", "umount", mnt).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "dead FUSE mount") {
		t.Errorf("fs umount of a dead mount with a shell inside: %v, want a line saying it was dead and exit 0:\n%s", err, out)
	}
	if e2e.Mounted(mnt) {
		t.Errorf("%s is still mounted", mnt)
		exec.Command("umount", "-l", mnt).Run()
	}
	for _, p := range []string{sock, log} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s is left behind by the killed daemon", p)
		}
	}
}

// SIGTERM writes out what write-behind holds, even with a file still open.
func TestLabFSSigtermFlushesWriteBehind(t *testing.T) {
	t.Parallel()
	src, mnt := t.TempDir(), t.TempDir()
	daemon := exec.Command(e2e.Fusescope, "fs", "mount", "--preset", "nocache", "--write-behind", "32", "--latency", "write=5ms", src, mnt)
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	waitMounted(t, mnt)
	fh, err := os.Create(filepath.Join(mnt, "pending"))
	if err != nil {
		t.Fatal(err)
	}
	block := bytes.Repeat([]byte("p"), 4096)
	for i := 0; i < 32; i++ {
		if _, err := fh.Write(block); err != nil {
			t.Fatal(err)
		}
	}
	// 32 writes of 5 ms each are still queued; the file stays open.
	daemon.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- daemon.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		daemon.Process.Kill()
		t.Fatal("the daemon did not exit within 15 s of SIGTERM")
	}
	fh.Close()
	if b, _ := os.ReadFile(filepath.Join(src, "pending")); len(b) != 32*4096 {
		t.Errorf("after SIGTERM the source holds %d bytes of the %d acknowledged", len(b), 32*4096)
	}
	if e2e.Mounted(mnt) {
		t.Error("still mounted after SIGTERM")
		exec.Command("umount", "-l", mnt).Run()
	}
}

// startDaemon starts `fusescope fs mount SRC MNT` in the foreground and
// returns once it says it has mounted. Not merely once the mount shows up:
// go-fuse then still opens a file of the new mount from inside the daemon,
// and a daemon killed while its own request is in flight hangs in the
// kernel, waiting for itself, with the mount alive.
func startDaemon(t *testing.T, src, mnt string) *proctest.Process {
	t.Helper()
	return proctest.Start(t, exec.Command(e2e.Fusescope, "fs", "mount", src, mnt), " mounted at ", 10*time.Second)
}

func waitMounted(t *testing.T, mnt string) {
	t.Helper()
	e2e.Eventually(t, 5*time.Second, mnt+" mounted", func() (bool, string) { return e2e.Mounted(mnt), "" })
}

// Bad input to fs mount gets one line and a non-zero exit.
func TestLabFSBadInput(t *testing.T) {
	t.Parallel()
	src, mnt := t.TempDir(), t.TempDir()
	_, bindfsMnt := e2e.MountBindfs(t, 1)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"fs", "mount", "/nonexistent", mnt}, "is not a directory"},
		{[]string{"fs", "mount", src, bindfsMnt}, "already a mount point: unmount it first (umount " + bindfsMnt + ")"},
		{[]string{"fs", "mount", src, filepath.Join(src, "inner")}, "inside the source"},
		{[]string{"fs", "mount", "--background", src, filepath.Join(src, "inner")}, "inside the source"}, // the daemon's error, passed on
		{[]string{"fs", "mount", src, mnt, "--preset", "fast"}, "unknown preset"},
		{[]string{"fs", "mount", src, mnt, "--latency", "lookup=fast"}, "not a duration"},
		{[]string{"fs", "mount", src, mnt, "--latency", "bogus=1ms"}, "unknown FUSE opcode"},
		{[]string{"fs", "mount", src, mnt, "--bandwidth", "lots"}, "give a rate"},
		{[]string{"fs", "mount", src, mnt, "--latency", ""}, "--latency was given an empty value"},
		{[]string{"fs", "mount", src, mnt, "--md-cache", "5"}, `--md-cache "5": give a duration with its unit, like --md-cache 10ms`},
		{[]string{"fs", "mount", src, mnt, "--max-background", "many"}, `--max-background "many": give a whole number`},
		{[]string{"fs", "mount", src, mnt, "--keep-cache", "--direct-io"}, "contradict"},
		{[]string{"fs", "mount", src, mnt, "--readdirplus", "maybe"}, "auto, on or off"},
		{[]string{"fs", "mount", src, mnt, "--preset", "passthrough", "--keep-cache"}, "fails opens"},       // EIO on every open
		{[]string{"fs", "mount", src, mnt, "--preset", "writeback", "--passthrough"}, "exclude each other"}, // passthrough silently off
		{[]string{"fs", "mount", src, mnt, "--passthrough", "--latency", "*=1ms,read=2ms"}, "--latency read=2ms delays READ requests, which passthrough files never send"},
		{[]string{"fs", "stats", mnt}, "no fusescope lab file system"},
		{[]string{"fs", "stats", mnt, "0"}, `interval "0": give a number of seconds from 0.01 to 1000000, e.g. fusescope fs stats ` + mnt + " 5"},
		{[]string{"fs", "stats", mnt, "1", "-2"}, "-2: an interval or a count is a positive number"},
		{[]string{"fs", "stats", mnt, "1", "x"}, `count "x": give a positive number of reports`},
		{[]string{"fs", "stats", bindfsMnt}, "is a fuse mount, not a fusescope lab file system, whose daemon keeps these statistics: fusescope trace --mount " + bindfsMnt},
		{[]string{"fs", "umount", mnt}, "not a mount point"},
		{[]string{"fs", "umount", "/"}, "not a fusescope lab file system"}, // refused, whatever it is
	}
	for _, c := range cases {
		out, err := exec.Command(e2e.Fusescope, c.args...).CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		text := strings.TrimSpace(string(out))
		if !ok || ee.ExitCode() == 0 || strings.Contains(text, "\n") || !strings.Contains(text, c.want) {
			t.Errorf("%v: want one line containing %q and a non-zero exit, got %v:\n%s", c.args, c.want, err, out)
		}
	}
	if e2e.Mounted(mnt) {
		t.Error("a failed mount left a mount behind")
	}
	// The detached daemon's log held only the error the user was shown.
	if _, err := os.Stat(strings.TrimSuffix(labfs.SocketPath(filepath.Join(src, "inner")), ".sock") + ".log"); !os.IsNotExist(err) {
		t.Errorf("a failed --background mount left its log behind: %v", err)
	}
}

// A missing name is answered ENOENT without a negative timeout, as libfuse
// does, and cached by the kernel for --negative-timeout when one is set: the
// daemon's own LOOKUP counts show both.
func TestLabFSNegativeLookups(t *testing.T) {
	t.Parallel()
	for _, neg := range []time.Duration{0, time.Hour} {
		cfg := e2e.Preset(t, "default")
		cfg.NegativeTimeout = neg
		_, mnt, f := e2e.MountLabFS(t, cfg)
		for range 3 {
			if _, err := os.Stat(filepath.Join(mnt, "missing")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("stat of a missing name: %v, want ENOENT", err)
			}
		}
		var lookups, enoent uint64
		for _, op := range f.Record().Profile.Ops {
			if op.Op == "LOOKUP" {
				lookups, enoent = op.Count, op.Errnos["ENOENT"]
			}
		}
		want := uint64(3)
		if neg > 0 {
			want = 1
		}
		if lookups != want {
			t.Errorf("negative timeout %v: %d LOOKUPs for 3 stats of a missing name, want %d", neg, lookups, want)
		}
		if neg == 0 && enoent != lookups {
			t.Errorf("negative timeout 0: %d of %d LOOKUPs answered ENOENT, want all", enoent, lookups)
		}
	}
}

// A directory of the source replaced by a symlink to somewhere else while
// the mount still knows it (an open descriptor of it, cached entries under
// it) must not take the daemon there. Two such directories: one the daemon
// has worked in before the swap, whose operations then go on in the same
// directory (renamed, still in the source), and one it has not, whose
// operations fail. Either way the directory the symlinks point to is left
// as it was.
func TestLabFSStaysInsideSource(t *testing.T) {
	t.Parallel()
	e2e.KeepsCaches(t) // the kernel's entries stay cached
	cfg := e2e.Preset(t, "default")
	cfg.EntryTimeout, cfg.AttrTimeout = labfs.Timeout(time.Hour), labfs.Timeout(time.Hour)
	src, mnt, _ := e2e.MountLabFS(t, cfg)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "victim"), []byte("outside"), 0o600)
	for _, used := range []bool{true, false} {
		name := map[bool]string{true: "used", false: "fresh"}[used]
		inside := filepath.Join(src, name)
		os.Mkdir(inside, 0o755)
		os.WriteFile(filepath.Join(inside, "victim"), []byte("inside"), 0o600)
		dir, err := os.Open(filepath.Join(mnt, name))
		if err != nil {
			t.Fatal(err)
		}
		defer dir.Close()
		dfd := int(dir.Fd())
		if used {
			var st unix.Stat_t
			if err := unix.Fstatat(dfd, "victim", &st, 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Rename(inside, inside+".moved"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, inside); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, outside)
		ops := map[string]func() error{
			"list": func() error {
				fd, err := unix.Openat(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
				unix.Close(fd)
				return err
			},
			"create": func() error {
				fd, err := unix.Openat(dfd, "new", unix.O_CREAT|unix.O_WRONLY, 0o644)
				unix.Close(fd)
				return err
			},
			"mkdir":    func() error { return unix.Mkdirat(dfd, "newdir", 0o755) },
			"mkfifo":   func() error { return unix.Mkfifoat(dfd, "fifo", 0o644) },
			"symlink":  func() error { return unix.Symlinkat("/etc", dfd, "link") },
			"chmod":    func() error { return unix.Fchmodat(dfd, "victim", 0o666, 0) },
			"chown":    func() error { return unix.Fchownat(dfd, "victim", 1234, 1234, 0) },
			"truncate": func() error { return unix.Truncate(fmt.Sprintf("/proc/self/fd/%d/victim", dfd), 1) },
			"utimes":   func() error { return unix.UtimesNanoAt(dfd, "victim", []unix.Timespec{{Sec: 1}, {Sec: 1}}, 0) },
			"setxattr": func() error {
				return unix.Setxattr(fmt.Sprintf("/proc/self/fd/%d/victim", dfd), "user.x", []byte("y"), 0)
			},
			"link": func() error { return unix.Linkat(dfd, "victim", dfd, "hardlink", 0) },
		}
		for op, f := range ops {
			if err := f(); err == nil && !used {
				t.Errorf("%s: %s under the swapped directory succeeded", name, op)
			}
		}
		if data, err := os.ReadFile(fmt.Sprintf("/proc/self/fd/%d/victim", dfd)); err == nil && string(data) != "i" {
			t.Errorf("%s: read %q under the swapped directory, want the source's (truncated to 1 byte) or an error", name, data)
		}
		if err := unix.Renameat(dfd, "victim", dfd, "renamed"); err == nil && !used {
			t.Errorf("%s: rename under the swapped directory succeeded", name)
		}
		if err := unix.Unlinkat(dfd, "renamed", 0); err == nil && !used {
			t.Errorf("%s: unlink under the swapped directory succeeded", name)
		}
		if after := snapshot(t, outside); after != before {
			t.Errorf("%s: the daemon changed %s, outside its source:\nbefore: %s\nafter:  %s", name, outside, before, after)
		}
		if used { // what the daemon did, it did in the directory it knew
			if _, err := os.Lstat(filepath.Join(inside+".moved", "new")); err != nil {
				t.Errorf("%s: the file created under the swapped directory is not in the source: %v", name, err)
			}
		}
	}
}

// snapshot describes every entry of dir: name, mode, owner, size, times, content.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range ents {
		var st unix.Stat_t
		p := filepath.Join(dir, e.Name())
		unix.Lstat(p, &st)
		var data []byte
		if st.Mode&unix.S_IFMT == unix.S_IFREG { // not a FIFO the daemon might have made: reading it blocks
			data, _ = os.ReadFile(p)
		}
		fmt.Fprintf(&b, "%s %o %d:%d %d %d %q; ", e.Name(), st.Mode, st.Uid, st.Gid, st.Size, st.Mtim.Nano(), data)
	}
	return b.String()
}

// A user who is not root mounts through fusermount3, asks for stats and
// unmounts; where /dev/fuse is not theirs to open (mode 0600 here, 0666 on
// a stock Debian), one line says so instead of fusermount's exit code.
func TestLabFSNotRoot(t *testing.T) {
	t.Parallel()
	bin := e2e.BinaryForNobody(t)
	dir := filepath.Dir(bin)
	src, mnt := filepath.Join(dir, "src"), filepath.Join(dir, "mnt")
	for _, d := range []string{src, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chown(d, 65534, 65534)
	}
	os.WriteFile(filepath.Join(src, "hello"), []byte("hello\n"), 0o644)
	t.Cleanup(func() {
		if e2e.Mounted(mnt) {
			exec.Command("fusermount3", "-u", "-z", mnt).Run()
		}
	})
	asNobody := func(args ...string) (string, error) {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", bin}, args...)...)
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR=") // root's is not nobody's
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	fi, err := os.Stat("/dev/fuse")
	if err != nil {
		t.Fatal(err)
	}
	out, err := asNobody("fs", "mount", "--background", src, mnt)
	if fi.Mode().Perm()&0o006 != 0o006 {
		if err == nil || strings.Contains(out, "\n") || !strings.Contains(out, "/dev/fuse: permission denied: mount as root") {
			t.Errorf("/dev/fuse is %v: want one line about it and a non-zero exit, got %v:\n%s", fi.Mode().Perm(), err, out)
		}
		if e2e.Mounted(mnt) {
			t.Error("a refused mount left a mount behind")
		}
		return
	}
	if err != nil || !e2e.Mounted(mnt) {
		t.Fatalf("mount as nobody (/dev/fuse %v): %v\n%s", fi.Mode().Perm(), err, out)
	}
	// Without allow_other only the mounting user may enter, root included.
	if _, err := os.ReadFile(filepath.Join(mnt, "hello")); !errors.Is(err, os.ErrPermission) {
		t.Errorf("root read through nobody's mount: %v, want permission denied (no allow_other)", err)
	}
	cat := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "cat", filepath.Join(mnt, "hello"))
	if b, err := cat.Output(); err != nil || string(b) != "hello\n" {
		t.Errorf("nobody's read through nobody's mount: %q, %v", b, err)
	}
	if out, err := asNobody("fs", "stats", "--no-hist", mnt); err != nil || !strings.Contains(out, "requests served") {
		t.Errorf("fs stats as nobody: %v\n%s", err, out)
	}
	if out, err := asNobody("fs", "umount", mnt); err != nil || e2e.Mounted(mnt) {
		t.Errorf("fs umount as nobody: %v, still mounted %v\n%s", err, e2e.Mounted(mnt), out)
	}
}

// fs stats MNT INTERVAL COUNT: each record holds what the daemon served in
// its interval alone. 40 stats of distinct files (timeouts 0: one LOOKUP
// each), spread over the intervals, sum to 40 LOOKUPs; every opcode's
// intervals sum to what the daemon served over the run; the intervals
// abut; show renders the stream with the configuration once.
func TestLabFSStatsIntervals(t *testing.T) {
	// Not parallel: its bursts of requests are paced to land in fs stats' 0.4 s intervals.
	cfg := e2e.Preset(t, "nocache")
	cfg.MDCacheTTL = time.Hour
	src, mnt, f := e2e.MountLabFS(t, cfg)
	for i := range 40 {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("f%02d", i)), nil, 0o644)
	}
	before := f.Record()
	cmd := exec.Command(e2e.Fusescope, "fs", "stats", "--json", mnt, "0.4", "4")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// It prints this once it holds the first snapshot, the intervals' base.
	if line, _ := bufio.NewReader(stderr).ReadString('\n'); !strings.HasPrefix(line, "Reporting what the daemon of "+mnt) {
		t.Fatalf("fs stats said %q", line)
	}
	for i := range 40 {
		if _, err := os.Stat(filepath.Join(mnt, fmt.Sprintf("f%02d", i))); err != nil {
			t.Fatal(err)
		}
		if i%10 == 9 {
			time.Sleep(400 * time.Millisecond)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("fs stats: %v", err)
	}
	after := f.Record()
	recs, err := profile.ParseAll(stdout.Bytes())
	if err != nil || len(recs) != 4 {
		t.Fatalf("%d records, %v, want 4:\n%s", len(recs), err, stdout.String())
	}
	whole, err := after.Profile.Sub(&before.Profile)
	if err != nil {
		t.Fatal(err)
	}
	sums, busy := map[string]uint64{}, 0
	var requests uint64
	for i, r := range recs {
		if i > 0 && !r.Meta.Start.Equal(recs[i-1].Meta.End) {
			t.Errorf("interval %d starts at %v, the previous ended at %v", i, r.Meta.Start, recs[i-1].Meta.End)
		}
		for _, s := range r.Profile.Ops {
			sums[s.Op] += s.Count
		}
		if r.Profile.Find(f.Conn, fuseproto.Lookup) != nil {
			busy++
		}
		requests += r.Meta.FS.Requests
	}
	if sums["LOOKUP"] != 40 || busy < 2 {
		t.Errorf("%d LOOKUPs over the intervals (want 40, the stats made), in %d intervals (want 2 or more)", sums["LOOKUP"], busy)
	}
	var total uint64
	for _, s := range whole.Ops {
		total += s.Count
		if sums[s.Op] != s.Count {
			t.Errorf("%s: %d over the intervals, %d served over the run", s.Op, sums[s.Op], s.Count)
		}
	}
	if requests != total {
		t.Errorf("requests over the intervals %d, served over the run %d", requests, total)
	}
	saved := filepath.Join(t.TempDir(), "stats.jsonl")
	os.WriteFile(saved, stdout.Bytes(), 0o644)
	text := string(e2e.MustRead(t, e2e.Fusescope, "show", "--no-hist", saved))
	if strings.Count(text, "config: the nocache preset") != 1 || strings.Count(text, "requests served") != 4 {
		t.Errorf("show of the intervals: want the configuration once and four reports:\n%s", text)
	}
}

// The kernel drops the FORGETs and RELEASEs still pending when a FUSE
// mount goes away, so a daemon that closes descriptors only when told keeps
// some of SRC open after the unmount. A daemon process exits and loses
// them; a lab file system embedded in a longer process (these tests, a
// library user) must close them itself, or SRC stays busy.
func TestLabFSUnmountClosesWhatItHeld(t *testing.T) {
	t.Parallel()
	src, mnt := t.TempDir(), t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "tmpfs", src).CombinedOutput(); err != nil {
		t.Fatalf("tmpfs: %v %s", err, out)
	}
	defer exec.Command("umount", "-l", src).Run()
	if err := os.MkdirAll(filepath.Join(src, "d", "e"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "d", "e", "f"), []byte("held"), 0o644)
	f, err := labfs.Mount(src, mnt, e2e.Preset(t, "default"))
	if err != nil {
		t.Fatal(err)
	}
	// Directories the daemon keeps descriptors of until FORGET, and a file
	// still open when the mount is detached: its RELEASE comes only as
	// the last reference to the mount goes.
	if _, err := os.Stat(filepath.Join(mnt, "d", "e", "f")); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(filepath.Join(mnt, "d", "e", "f"))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	f.Wait()
	var held []string
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, e := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(target, src) {
			held = append(held, e.Name()+" -> "+target)
		}
	}
	if len(held) > 0 {
		t.Errorf("after the unmount the process still holds %d descriptors in SRC:\n%s", len(held), strings.Join(held, "\n"))
	}
	if out, err := exec.Command("umount", src).CombinedOutput(); err != nil {
		t.Errorf("SRC cannot be unmounted after the lab file system was: %v %s", err, out)
	}
}

// fs stats by a user other than the one who mounted says whose statistics
// they are, not that no lab file system is there.
func TestLabFSStatsOfAnotherUser(t *testing.T) {
	t.Parallel()
	bin := e2e.BinaryForNobody(t)
	_, mnt, _ := e2e.MountLabFS(t, e2e.Preset(t, "default"))
	os.Chmod(filepath.Dir(mnt), 0o755)
	out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin, "fs", "stats", mnt).CombinedOutput()
	text := strings.TrimSpace(string(out))
	if err == nil || strings.Contains(text, "\n") || !strings.Contains(text, "was mounted by uid 0") {
		t.Errorf("fs stats as nobody of root's mount: %v, want one line saying it was mounted by uid 0:\n%s", err, out)
	}
}

// Ctrl-C on a foreground mount that a process is using says who uses it
// and goes on serving; the next Ctrl-C, once the process is gone, unmounts
// it cleanly.
func TestLabFSForegroundBusyCtrlC(t *testing.T) {
	t.Parallel()
	src, mnt := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644)
	fs := proctest.Start(t, exec.Command(e2e.Fusescope, "fs", "mount", src, mnt), "Ctrl-C or fusescope fs umount", 30*time.Second)
	user := exec.Command("sleep", "100")
	user.Dir = mnt
	if err := user.Start(); err != nil {
		t.Fatal(err)
	}
	defer user.Process.Kill()
	fs.Cmd.Process.Signal(syscall.SIGINT)
	e2e.WaitFor(t, "the busy message", func() bool { return strings.Contains(fs.Output(), "is busy, still serving") })
	if out := fs.Output(); !strings.Contains(out, fmt.Sprintf("%d sleep (its working directory)", user.Process.Pid)) {
		t.Errorf("the message does not name the process using the mount:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || string(b) != "x" {
		t.Fatalf("after the first Ctrl-C the mount no longer serves: %q, %v", b, err)
	}
	user.Process.Kill()
	user.Wait()
	if err := fs.Interrupt(t, 30*time.Second); err != nil {
		t.Fatalf("the second Ctrl-C: %v\n%s", err, fs.Output())
	}
	if e2e.Mounted(mnt) {
		t.Errorf("%s is still mounted", mnt)
	}
}
