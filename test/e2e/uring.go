package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// URingParam is fuse's switch for FUSE over io_uring (Linux 6.14 on), one
// for the whole machine: the kernel offers the ring to a daemon at INIT
// only while it is on.
const URingParam = "/sys/module/fuse/parameters/enable_uring"

// HoldURing keeps apart the tests, of every package, that set fuse's
// enable_uring or mount with it (a bench's io_uring configuration does):
// one test set it on for its mount while another restored it off would
// make the first's daemon fall back to /dev/fuse. t holds it to its end;
// its subtests hold it with it.
func HoldURing(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "fusescope-e2e-enable_uring.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
}

// SetURing sets enable_uring ("Y" or "N") for t, which holds it
// (HoldURing), and restores it when t ends; it skips where the kernel has
// no FUSE over io_uring.
func SetURing(t testing.TB, on string) {
	t.Helper()
	was, err := os.ReadFile(URingParam)
	if err != nil {
		t.Skipf("this kernel has no FUSE over io_uring (%v)", err)
	}
	if err := os.WriteFile(URingParam, []byte(on), 0o644); err != nil {
		t.Skipf("cannot set enable_uring: %v", err)
	}
	t.Cleanup(func() { os.WriteFile(URingParam, []byte(strings.TrimSpace(string(was))), 0o644) })
}
