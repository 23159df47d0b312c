package trace

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"github.com/fusescope/fusescope/test/e2e"
	"golang.org/x/sys/unix"
)

// oneLineExit runs fusescope and holds it to a refusal: a non-zero exit
// and one line starting "fusescope: " that contains want.
func oneLineExit(t *testing.T, want string, args ...string) string {
	t.Helper()
	out, err := exec.Command(e2e.Fusescope, args...).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() == 0 {
		t.Errorf("%v: want a non-zero exit, got %v\n%s", args, err, out)
	}
	text := strings.TrimSpace(string(out))
	if strings.Count(text, "\n") != 0 || !strings.Contains(text, want) || !strings.HasPrefix(text, "fusescope: ") || strings.Count(text, "usage:") > 1 {
		t.Errorf("%v: want one line containing %q, got:\n%s", args, want, out)
	}
	return text
}

// On a kernel with neither kprobes nor fentry (this project's machines:
// built without CONFIG_KPROBES, and BPF tracing programs refused), kfunc
// says so in one line naming the release, what it lacks and what to use
// instead, whichever way it is asked to attach. Kernels that have them
// are test/guest's (kfunc_test.go).
func TestKfuncRefusedWithoutKprobesOrFentry(t *testing.T) {
	t.Parallel()
	_, pmu := os.Stat("/sys/bus/event_source/devices/kprobe")
	_, events := os.Stat("/sys/kernel/tracing/kprobe_events")
	_, debugEvents := os.Stat("/sys/kernel/debug/tracing/kprobe_events")
	if pmu == nil || events == nil || debugEvents == nil {
		t.Skip("this kernel has kprobes: test/guest's TestKfuncCounts runs kfunc on it")
	}
	if features.HaveProgramType(ebpf.Tracing) == nil {
		t.Skip("this kernel loads fentry programs: test/guest's TestKfuncCounts runs kfunc on it")
	}
	var uts unix.Utsname
	unix.Uname(&uts)
	release := unix.ByteSliceToString(uts.Release[:])
	line := oneLineExit(t, "kernel "+release+" has neither kprobes (", "kfunc", "fuse_*")
	for _, want := range []string{"CONFIG_KPROBES", "nor fentry (", "fusescope trace"} {
		if !strings.Contains(line, want) {
			t.Errorf("the refusal does not name %q: %s", want, line)
		}
	}
	oneLineExit(t, "kernel "+release+" has no kprobes (", "kfunc", "--attach", "kprobe", "fuse_*")
	oneLineExit(t, "kernel "+release+" has no fentry (", "kfunc", "--attach", "fentry", "--latency", "fuse_lookup")
	oneLineExit(t, "has neither kprobes", "kfunc", "fuse_*", "1", "1", "--", "true") // refused before the command runs
	t.Logf("%s", line)
}

// Bad input gets one line that names the problem and a non-zero exit,
// before anything is attached.
func TestKfuncBadInput(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"kfunc"}, "give the functions to count, as a glob such as 'fuse_*'"},
		{[]string{"kfunc", "5"}, "give the functions to count"},
		{[]string{"kfunc", "fuse_["}, `function pattern "fuse_[" is not a glob`},
		{[]string{"kfunc", "fuse lookup"}, "no spaces or slashes"},
		{[]string{"kfunc", "--latency", "fuse_[x"}, `--latency: function pattern "fuse_[x" is not a glob`},
		{[]string{"kfunc", "--latency", ""}, "--latency was given an empty value"},
		{[]string{"kfunc", "fuse_*", "0"}, "give a number of seconds from 0.01"},
		{[]string{"kfunc", "fuse_*", "1", "x"}, "positive number of reports"},
		{[]string{"kfunc", "fuse_*", "1", "-5"}, "-5: an interval or a count is a positive number: usage: fusescope kfunc"},
		{[]string{"kfunc", "fuse_*", "1", "2", "3"}, "accepts at most 3 arg(s), received 4"},
		{[]string{"kfunc", "--latency", "fuse_lookup", "1", "2", "3"}, `"3": give one pattern, then the interval and the count`},
		{[]string{"kfunc", "fuse_*", "-d", "0"}, "-d 0: give the run's length in seconds"},
		{[]string{"kfunc", "fuse_*", "-d", "5", "1", "3"}, "-d and a count both say when to end: give one"},
		{[]string{"kfunc", "fuse_*", "-p", "999999999"}, "-p 999999999: no such process"},
		{[]string{"kfunc", "fuse_*", "-p", "-3"}, "-p -3: give a positive process id"},
		{[]string{"kfunc", "fuse_*", "-p", "1", "--", "true"}, "-p and -- CMD both say when to count: give one"},
		{[]string{"kfunc", "fuse_*", "--"}, "nothing after --: give the command"},
		{[]string{"kfunc", "fuse_*", "--", "/nonexistent/cmd"}, "/nonexistent/cmd: command not found"},
		{[]string{"kfunc", "fuse_*", "--attach", "uprobe"}, `--attach "uprobe": give auto, fentry or kprobe`},
		{[]string{"kfunc", "fuse_*", "--json", "--csv"}, "give one of --json, --csv"},
		{[]string{"kfunc", "fuse_*", "-m", "--ns"}, "-m and --ns cannot be used together"},
		{[]string{"kfunc", "fuse_*", "-o", filepath.Join(t.TempDir(), "missing", "calls.json")}, "writable directory"},
	} {
		oneLineExit(t, c.want, c.args...)
	}
}

// A kfunc record renders with show as the live run printed it (the
// golden record of internal/report), in text with a unit, CSV and JSON;
// report and diff render it; what does not apply to it says so in one
// line.
func TestShowKfuncRecord(t *testing.T) {
	t.Parallel()
	rec := "../../../internal/report/testdata/functions.json.golden"
	want, err := os.ReadFile("../../../internal/report/testdata/functions.golden")
	if err != nil {
		t.Fatal(err)
	}
	if got := e2e.MustRead(t, e2e.Fusescope, "show", rec); string(got) != string(want) {
		t.Errorf("show differs from the view's golden file:\n%s\nwant\n%s", got, want)
	}
	wantMs, _ := os.ReadFile("../../../internal/report/testdata/functions_msecs.golden")
	if got := e2e.MustRead(t, e2e.Fusescope, "show", "-m", rec); string(got) != string(wantMs) {
		t.Errorf("show -m:\n%s\nwant\n%s", got, wantMs)
	}
	wantCSV, _ := os.ReadFile("../../../internal/report/testdata/functions.csv.golden")
	if got := e2e.MustRead(t, e2e.Fusescope, "show", "--csv", rec); !strings.HasPrefix(string(wantCSV), string(got)) || !strings.HasPrefix(string(got), "end_time,func,module,count,") {
		t.Errorf("show --csv:\n%s\nwant the golden file's first record\n%s", got, wantCSV)
	}
	wantJSON, _ := os.ReadFile(rec)
	if got := e2e.MustRead(t, e2e.Fusescope, "show", "--json", rec); string(got) != string(wantJSON) {
		t.Errorf("show --json changed the record:\n%s", got)
	}
	oneLineExit(t, "--counts applies to records of FUSE requests", "show", "--counts", rec)
	oneLineExit(t, "--top applies to syscalls reports", "show", "--top", "3", rec)
	page := filepath.Join(t.TempDir(), "r.html")
	if out, err := exec.Command(e2e.Fusescope, "report", rec, "-o", page).CombinedOutput(); err != nil {
		t.Errorf("report: %v\n%s", err, out)
	} else if b, _ := os.ReadFile(page); !strings.Contains(string(b), "Kernel functions (kfunc)") || !strings.Contains(string(b), "fuse_copy_finish") {
		t.Errorf("the HTML report of a kfunc record has no functions' table")
	}
	if got := e2e.MustRead(t, e2e.Fusescope, "diff", rec, rec); !strings.Contains(string(got), "fuse_lookup") || !strings.Contains(string(got), "+0.0%") {
		t.Errorf("diff of a kfunc record with itself:\n%s", got)
	}
	oneLineExit(t, "is "+"a record of FUSE requests (trace, fs stats) and", "diff", "../../../internal/report/testdata/record.json.golden", rec)
}
