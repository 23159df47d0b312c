package e2e

import (
	"strings"
	"testing"
)

// A test's leak check sees the programs of the tracers it started and is
// blind to those another test started beside it, in this process or not:
// tests that load programs run side by side.
func TestProbeWatchSeesOnlyItsOwn(t *testing.T) {
	_, mnt := MountBindfs(t, 1)
	probes := WatchProbes(t)
	beside := StartTrace(t, "--mount", mnt) // another test's, still running
	ours := StartTrace(t, "--mount", mnt)
	ours.Stop(t)
	probes.AssertNoneLeft(t, ours.Cmd.Process.Pid)

	// The other test's tracer, named as if it were this test's, is seen.
	left, err := probes.left([]int{beside.Cmd.Process.Pid})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) == 0 {
		t.Fatalf("a running tracer's programs, held by a process the check was given, were not seen")
	}
	for _, l := range left {
		if !strings.Contains(l, "held by [") {
			t.Errorf("%q: want the process holding it", l)
		}
	}
	beside.Stop(t)
}
