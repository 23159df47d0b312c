package trace

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/test/e2e"
)

// A count of intervals ends trace and fs stats by themselves: the line
// that starts them says when, not "Hit Ctrl-C to end"; without a count
// it says Ctrl-C ends them.
func TestIntervalCountSaysWhenItEnds(t *testing.T) {
	t.Parallel()
	_, mnt, _ := e2e.MountLabFS(t, e2e.Preset(t, "nocache"))
	for _, args := range [][]string{
		{"trace", "--mount", mnt, "0.2", "2"},
		{"fs", "stats", mnt, "0.2", "2"},
	} {
		cmd := exec.Command(e2e.Fusescope, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr.String())
		}
		if line, _, _ := strings.Cut(stderr.String(), "\n"); !strings.HasSuffix(line, "... 2 reports, ending in 400ms.") || strings.Contains(stderr.String(), "Ctrl-C") {
			t.Errorf("%v said %q, want when it ends", args, line)
		}
	}
	tr := e2e.StartTrace(t, "--mount", mnt, "0.2")
	if !strings.Contains(tr.Stderr.String(), "reporting every 200ms... Hit Ctrl-C to end.") {
		t.Errorf("trace 0.2 said %q, want Ctrl-C to end it", tr.Stderr.String())
	}
	tr.Stop(t)
}
