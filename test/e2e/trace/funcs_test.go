package trace

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/test/e2e"
)

// --attach fentry and --attach kprobe trace the kernel's fuse functions
// (the kernels that have them are test/guest's). A kernel that
// has neither, as this project's machines, refuses each in one line that
// says what it lacks and what to do, and exits non-zero; an unknown
// mechanism is refused with the list of the known ones.
func TestTraceAttachFunctionsRefused(t *testing.T) {
	t.Parallel()
	_, pmu := os.Stat("/sys/bus/event_source/devices/kprobe")
	_, events := os.Stat("/sys/kernel/tracing/kprobe_events")
	cases := map[string]string{"bogus": `--attach "bogus": give auto, tp_btf, tracepoint, fentry or kprobe`}
	if pmu != nil && events != nil {
		for _, mech := range []string{"fentry", "kprobe"} {
			cases[mech] = "which --attach " + mech + " needs: leave out --attach " + mech
		}
	} else {
		t.Log("this kernel has kprobes: --attach fentry and kprobe are test/guest's to check")
	}
	for mech, want := range cases {
		out, err := exec.Command(e2e.Fusescope, "trace", "--attach", mech, "1", "1").CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() == 0 {
			t.Errorf("--attach %s: want a non-zero exit, got %v", mech, err)
		}
		text := strings.TrimSpace(string(out))
		if strings.Contains(text, "\n") || !strings.HasPrefix(text, "fusescope: ") || !strings.Contains(text, want) {
			t.Errorf("--attach %s: want one line containing %q, got:\n%s", mech, want, out)
		}
	}
}
