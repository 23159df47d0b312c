package lab

import (
	"os"
	"testing"

	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/test/e2e"
)

// The processes that hold a connection's /dev/fuse are its daemons: this
// test process for the lab file system it mounts (go-fuse), the bindfs
// process for bindfs's (libfuse 3, started by fusermount3).
func TestConnectionHolders(t *testing.T) {
	t.Parallel()
	_, _, lab := e2e.MountLabFS(t, e2e.Preset(t, "default"))
	_, bindMnt := e2e.MountBindfs(t, 1)
	bindConn := e2e.ConnOf(t, bindMnt)

	// A daemon of an earlier test's connection with the same number, not
	// yet exited after its unmount, holds it too for a while.
	var holders []fuseconn.Holder
	e2e.WaitFor(t, "this process alone to hold the lab file system's connection", func() bool {
		var err error
		if holders, err = fuseconn.HoldersOf(lab.Conn); err != nil {
			t.Fatal(err)
		}
		return len(holders) == 1 && holders[0].PID == os.Getpid()
	})
	e2e.WaitFor(t, "bindfs alone to hold its connection", func() bool {
		var err error
		if holders, err = fuseconn.HoldersOf(bindConn); err != nil {
			t.Fatal(err)
		}
		for _, h := range holders {
			if h.Comm != "bindfs" {
				return false
			}
		}
		return len(holders) > 0
	})
}
