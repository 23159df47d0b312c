package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/labfs"
)

// MountLabFS mounts the lab file system in this process over a new source
// directory and unmounts it when the test ends.
func MountLabFS(t testing.TB, cfg labfs.Config) (src, mnt string, f *labfs.FS) {
	t.Helper()
	src, mnt = t.TempDir(), t.TempDir()
	f, err := labfs.Mount(src, mnt, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Unmount(t, mnt, f.Unmount) })
	return src, mnt, f
}

// Preset is the lab file system's preset of that name.
func Preset(t testing.TB, name string) labfs.Config {
	t.Helper()
	cfg, err := labfs.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Mounted says whether something is mounted at mnt.
func Mounted(mnt string) bool {
	b, _ := os.ReadFile("/proc/self/mounts")
	return strings.Contains(string(b), " "+mnt+" ")
}

// MountBindfs mounts bindfs (an independent libfuse daemon) over a directory
// of n files, with entry and attr timeouts of 0.
func MountBindfs(t testing.TB, n int) (src, mnt string) {
	t.Helper()
	Need(t, "bindfs", "fusermount3")
	src, mnt = t.TempDir(), t.TempDir()
	for i := 0; i < n; i++ {
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("f%03d", i)), []byte("data\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	Run(t, "bindfs", "-o", "entry_timeout=0,attr_timeout=0,negative_timeout=0", src, mnt)
	t.Cleanup(func() {
		if out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err != nil {
			exec.Command("umount", "-l", mnt).Run()
			t.Logf("fusermount3 -u %s: %v %s", mnt, err, out)
		}
	})
	return src, mnt
}

// NewServer is fuse.NewServer for the tests' in-process file systems, with
// its /dev/fuse fd close-on-exec: go-fuse opens it without O_CLOEXEC, and
// processes other tests started meanwhile (prometheus, fusescope) inherited
// it and held on to the connection after its unmount, whose number a later
// mount reused (TestTraceBindfsAgainstBpftrace found them among bindfs's
// daemons). ForkLock, held for reading, keeps every fork of this process out
// between the open and the flag; DirectMountStrict, since a fallback to
// fusermount would fork under it.
func NewServer(fsys fuse.RawFileSystem, mnt string, opts *fuse.MountOptions) (*fuse.Server, error) {
	o := *opts
	o.DirectMountStrict = true
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	srv, err := fuse.NewServer(fsys, mnt, &o)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return srv, nil
	}
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == "/dev/fuse" {
			if fd, err := strconv.Atoi(e.Name()); err == nil {
				unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
			}
		}
	}
	return srv, nil
}

// Unmount runs unmount (a daemon's, which has the kernel unmount mnt)
// until it succeeds, or for 10 s while mnt is busy: a process of another
// test may be in the mount for a moment. If it stays busy, the failure
// names the processes that use it, as fuser -m would.
func Unmount(t testing.TB, mnt string, unmount func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for wait := firstPoll; ; wait = min(2*wait, lastPoll) {
		err := unmount()
		if err == nil {
			return
		}
		busy := errors.Is(err, unix.EBUSY) || strings.Contains(err.Error(), "busy")
		if !busy || time.Now().After(deadline) {
			users, _ := fuseconn.Users(mnt)
			t.Errorf("unmount %s: %v; processes using it: %+v", mnt, err, users)
			return
		}
		time.Sleep(wait)
	}
}

// MountDaemon runs a FUSE daemon's command line (one that mounts and
// detaches, as libfuse's do), waits for its mount and unmounts it when the
// test ends.
func MountDaemon(t testing.TB, mnt string, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", filepath.Base(name), args, err, out)
	}
	WaitFor(t, mnt+" mounted", func() bool { return Mounted(mnt) })
	t.Cleanup(func() {
		if out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err != nil {
			exec.Command("umount", "-l", mnt).Run()
			t.Logf("fusermount3 -u %s: %v %s", mnt, err, out)
		}
	})
}
