package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fusescope/fusescope/test/e2e"
)

// runDemo runs `make demo`'s script with the test's fusescope, its work
// directories under tmp, and returns what it printed.
func runDemo(t *testing.T, tmp string) string {
	t.Helper()
	cmd := exec.Command("../../../scripts/demo.sh", e2e.Fusescope)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	return string(out)
}

// opCounts reads the COUNT column of the first table after the line that
// starts with heading.
func opCounts(t *testing.T, out, heading string) map[string]string {
	t.Helper()
	i := strings.Index(out, heading)
	if i < 0 {
		t.Fatalf("no %q in the demo's output:\n%s", heading, out)
	}
	counts := map[string]string{}
	inTable := false
	for _, line := range strings.Split(out[i:], "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 2 && f[0] == "MOUNT" && f[1] == "OP":
			inTable = true
		case inTable && len(f) > 2:
			counts[f[1]] = f[2]
		case inTable:
			return counts
		}
	}
	return counts
}

// leftovers lists the mounts and processes that name a directory under tmp.
func leftovers(t *testing.T, tmp string) []string {
	t.Helper()
	var left []string
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if strings.Contains(line, tmp) {
			left = append(left, "mount: "+line)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(tmp)) && !bytes.Contains(b, []byte("demo.sh")) {
			left = append(left, "process: "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return left
}

// `make demo` runs end to end, the kernel's and the daemon's views agree on
// the workload's known request counts (cat and grep each open the 1,000
// files once), and nothing is left mounted or running.
func TestDemo(t *testing.T) {
	t.Parallel()
	e2e.DropsCaches(t) // the demo's bench drops the kernel's caches before each run, every mount's
	tmp := t.TempDir()
	// A finished demo's directory: its record, and no pid file.
	previous := filepath.Join(tmp, "fusescope-demo.previous")
	if err := os.MkdirAll(previous, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(previous, "record.json"), []byte("{}"), 0o644)
	out := runDemo(t, tmp)
	kernel := opCounts(t, out, "== The kernel's view")
	daemon := opCounts(t, out, "== The daemon's view")
	if kernel["OPEN"] != "2000" || daemon["OPEN"] != "2000" {
		t.Errorf("OPEN: kernel %s, daemon %s, want 2000 each\n%s", kernel["OPEN"], daemon["OPEN"], out)
	}
	for _, op := range []string{"READ", "OPENDIR", "READDIRPLUS", "RELEASE"} {
		if kernel[op] == "" || kernel[op] != daemon[op] {
			t.Errorf("%s: kernel %q, daemon %q: the two views saw different requests", op, kernel[op], daemon[op])
		}
	}
	// A newcomer finishes it knowing what each part means:
	// each part is explained, the two views' counts too where they differ,
	// grep's status, the bench's columns, and what to try next; and the
	// previous demo's directory is gone, this one's alone is left.
	for _, want := range []string{"files found: 1000", "op = READ", "/usr/bin/grep", "fusescope show ", "bench quick: 3 configurations, 4 of 4 rounds", "vs native [95% CI]",
		"Each row is one kind of FUSE request the kernel sent the daemon", "The lab daemon times each request itself",
		`"exit status 1" is grep's`, "[small-writes] on ", "--writeback-cache would gather them", "cat: read, the mean MiB/s of its reads, and best, the", "== What to try next",
		"== Removed the previous demo's record: " + previous} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the demo's output:\n%s", want, out)
		}
	}
	for op, k := range kernel {
		if d := daemon[op]; d != k && !strings.Contains(out, fmt.Sprintf("   %s: the kernel counted %s, the daemon %s.", op, k, d)) {
			t.Errorf("%s: the kernel counted %s, the daemon %s, and the demo does not say why", op, k, d)
		}
	}
	if dirs, _ := filepath.Glob(filepath.Join(tmp, "fusescope-demo.*")); len(dirs) != 1 {
		t.Errorf("demo directories left: %v, want this demo's alone", dirs)
	}
	if left := leftovers(t, tmp); len(left) > 0 {
		t.Errorf("the demo left behind:\n%s", strings.Join(left, "\n"))
	}
}

// A demo killed outright leaves its mount and its tracer behind; the next
// demo finds them, cleans them up and says so.
func TestDemoCleansUpAKilledDemo(t *testing.T) {
	t.Parallel()
	e2e.DropsCaches(t) // the demo's bench drops the kernel's caches before each run, every mount's
	tmp := t.TempDir()
	cmd := exec.Command("../../../scripts/demo.sh", e2e.Fusescope)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill it once the lab file system is mounted and the tracer attached.
	t.Cleanup(func() { cmd.Process.Kill() })
	var work string
	e2e.Eventually(t, 60*time.Second, "the demo to start its tracer", func() (bool, string) {
		errs, _ := filepath.Glob(filepath.Join(tmp, "fusescope-demo.*", "trace.err"))
		for _, e := range errs {
			if b, _ := os.ReadFile(e); bytes.HasPrefix(b, []byte("Tracing")) {
				work = filepath.Dir(e)
			}
		}
		return work != "", fmt.Sprintf("trace.err: %v", errs)
	})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if len(leftovers(t, tmp)) == 0 {
		t.Fatal("the killed demo left nothing behind: the test cannot tell whether the next one cleans up")
	}

	out := runDemo(t, tmp)
	if !regexp.MustCompile(`(?m)^== Cleaning up after an earlier demo that did not finish: ` + regexp.QuoteMeta(work) + `$`).MatchString(out) {
		t.Errorf("the next demo did not say it cleaned %s:\n%s", work, out)
	}
	if _, err := os.Stat(work); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v)", work, err)
	}
	if left := leftovers(t, tmp); len(left) > 0 {
		t.Errorf("left behind:\n%s", strings.Join(left, "\n"))
	}
}
