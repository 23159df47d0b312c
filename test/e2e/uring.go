package e2e

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/kernel"
	"golang.org/x/sys/unix"
)

// URingParam is fuse's switch for FUSE over io_uring, the machine's.
const URingParam = kernel.FuseURingParam

// LibfuseExample is the path of libfuse 3.18's example daemon name
// (passthrough_hp...), which make test builds (scripts/libfuse-examples.sh).
func LibfuseExample(t testing.TB, name string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", ".cache", "libfuse", "build", "example", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not built: run make test, which builds libfuse's examples (scripts/libfuse-examples.sh)", name)
	}
	return p
}

// HoldURing keeps apart the tests, of every package, that set fuse's
// enable_uring or mount with it (a bench's io_uring configuration does):
// one test set it on for its mount while another restored it off would
// make the first's daemon fall back to /dev/fuse. t holds it to its end;
// its subtests hold it with it. A test that holds the kernel's caches too
// (DropsCaches, KeepsCaches) takes this lock first, as every test does:
// the other order deadlocked with a bench waiting for the caches.
func HoldURing(t testing.TB) {
	t.Helper()
	// machineTmp, not TMPDIR: each package's run has a TMPDIR of its own.
	f, err := os.OpenFile(filepath.Join(machineTmp, "fusescope-e2e-enable_uring.lock"), os.O_CREATE|os.O_RDWR, 0o600)
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

// URingOff turns fuse's enable_uring off for t, which holds it
// (HoldURing), and restores it when t ends, where the kernel has it: a
// test whose daemons cannot use the ring (the lab fs) would otherwise be
// told of the ring they do not use while another test has it on.
func URingOff(t testing.TB) {
	t.Helper()
	was, err := os.ReadFile(URingParam)
	if err != nil {
		return // no FUSE over io_uring here
	}
	if err := os.WriteFile(URingParam, []byte("N"), 0o644); err != nil {
		t.Fatalf("turning enable_uring off: %v", err)
	}
	t.Cleanup(func() { os.WriteFile(URingParam, []byte(strings.TrimSpace(string(was))), 0o644) })
}
