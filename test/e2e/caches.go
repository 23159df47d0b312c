package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// machineTmp is the system's temporary directory, where the packages that
// go test runs side by side meet (each sets TMPDIR to a directory of its
// own).
var machineTmp = os.TempDir()

// DropsCaches waits until no test that counts on the kernel's caches runs,
// in this package or another, and keeps them waiting until t ends: t drops
// every mount's caches (drop_caches, or a bench's cold runs).
func DropsCaches(t testing.TB) { lockCaches(t, unix.LOCK_EX) }

// KeepsCaches waits until no test that drops the kernel's caches runs, and
// keeps them waiting until t ends: t counts on what the kernel cached (its
// pages, entries, attributes or inodes) staying cached while it runs.
func KeepsCaches(t testing.TB) { lockCaches(t, unix.LOCK_SH) }

func lockCaches(t testing.TB, how int) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(machineTmp, "fusescope-e2e-caches.lock"), os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		t.Fatalf("locking the kernel's caches: %v", err)
	}
	t.Cleanup(func() { f.Close() })
}
