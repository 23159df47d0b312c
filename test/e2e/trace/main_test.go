// Package trace runs fusescope trace, kfunc and top against real FUSE
// mounts (a go-fuse file system written here, the lab file system, bindfs,
// libfuse's examples, sshfs) and checks what they measure against oracles
// that share no code with them: the daemons' own counts, bpftrace, strace.
package trace

import (
	"testing"

	"github.com/fusescope/fusescope/test/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, e2e.Options{}) }
