package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/fuseconn"
	"golang.org/x/sys/unix"
)

// A process that still holds the /dev/fuse fd of a connection that has
// ended is not that number's daemon: the kernel may give the number to a
// new mount (a test binary whose in-process mount had ended was once named
// bindfs's daemon beside bindfs). The fd is listed while its mount lives
// and left out once it is unmounted.
func TestHoldersLeaveOutEndedConnections(t *testing.T) {
	t.Parallel()
	mnt := t.TempDir()
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	// A mount no daemon answers: nothing may touch it but its unmount.
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)
	if err := unix.Mount("fusescope-holders", mnt, "fuse.fusescope-holders", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		t.Fatal(err)
	}
	mounted := true
	defer func() {
		if mounted {
			unix.Unmount(mnt, unix.MNT_DETACH)
		}
	}()
	conn := mountMinor(t, mnt)
	ours := func() bool {
		hs, err := fuseconn.HoldersOf(conn)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			if h.PID == os.Getpid() && h.FD == fd {
				return true
			}
		}
		return false
	}
	if !ours() {
		t.Fatalf("the fd of a live mount (conn %d) is not among its holders", conn)
	}
	if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	mounted = false
	WaitFor(t, "the ended connection's fd to leave its number's holders", func() bool { return !ours() })
}

// mountMinor is the device minor of the mount at mnt, from mountinfo (a
// stat would wait for a daemon's INIT reply): a FUSE mount's connection.
func mountMinor(t *testing.T, mnt string) uint32 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == mnt {
			_, minor, _ := strings.Cut(f[2], ":")
			n, err := strconv.ParseUint(minor, 10, 32)
			if err != nil {
				t.Fatal(err)
			}
			return uint32(n)
		}
	}
	t.Fatalf("%s is not in mountinfo", mnt)
	return 0
}
