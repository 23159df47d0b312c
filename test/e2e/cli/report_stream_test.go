package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/report"
	"github.com/fusescope/fusescope/test/e2e"
)

// TestReportSumsIntervalStream traces a workload as 0.3 s interval
// records and, in the same run, as the whole run's record (-o): the
// report of the intervals shows the whole run's application calls, page
// cache and files, as it shows its opcodes, not the first interval's.
func TestReportSumsIntervalStream(t *testing.T) {
	t.Parallel()
	src, mnt, _ := e2e.MountLabFS(t, e2e.Preset(t, "default")) // the page cache on
	for i := range 16 {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("f%02d", i)), bytes.Repeat([]byte{byte(i)}, 20000), 0o644)
	}
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole.json")
	// Each round stats every file and reads two it never read, so that
	// every interval has calls, pages added and files of its own.
	script := fmt.Sprintf(`for i in 0 1 2 3 4 5 6 7; do stat %[1]s/* >/dev/null; cat %[1]s/f0$i %[1]s/f1$i >/dev/null 2>&1; cat %[1]s/f$((i+10)) >/dev/null 2>&1; sleep 0.12; done`, mnt)
	lines := e2e.MustRead(t, e2e.Fusescope, "trace", "--mount", mnt, "--calls", "--page-cache", "--files", "1000", "--json", "0.3", "-o", whole, "--", "sh", "-c", script)
	stream := filepath.Join(dir, "stream.jsonl")
	os.WriteFile(stream, lines, 0o644)
	recs, err := profile.ParseAll(lines)
	if err != nil {
		t.Fatal(err)
	}
	want := e2e.LoadRecord(t, whole)
	if len(recs) < 3 || len(want.Calls) == 0 || len(want.PageCache) == 0 || len(want.Files) < 10 || len(want.Files) >= 1000 {
		t.Fatalf("%d interval records; the whole run has %d calls, %d page caches, %d files: want 3 or more records and 10-999 files",
			len(recs), len(want.Calls), len(want.PageCache), len(want.Files))
	}
	// The sum of the intervals is the run, figure by figure (every file
	// was in its intervals' 1,000; there are 17, more where another test
	// drops the kernel's caches and the nodes are looked up again).
	sum := report.WholeRun(recs)
	for _, c := range want.Calls {
		i := slices.IndexFunc(sum.Calls, func(s profile.CallStats) bool { return s.Syscall == c.Syscall })
		if i < 0 || sum.Calls[i].Count != c.Count || sum.Calls[i].Requests != c.Requests || sum.Calls[i].FuseNs != c.FuseNs || sum.Calls[i].Latency.Sum != c.Latency.Sum {
			t.Errorf("%s: the intervals sum to %+v, the run counted %+v", c.Syscall, sum.Calls[max(i, 0)], c)
		}
	}
	if !slices.Equal(sum.PageCache, want.PageCache) {
		t.Errorf("page cache: the intervals sum to %+v, the run counted %+v", sum.PageCache, want.PageCache)
	}
	if len(sum.Files) != len(want.Files) {
		t.Errorf("%d files in the intervals, %d in the run", len(sum.Files), len(want.Files))
	}
	for _, f := range want.Files {
		i := slices.IndexFunc(sum.Files, func(s profile.FileStats) bool { return s.Conn == f.Conn && s.Node == f.Node })
		if i < 0 || sum.Files[i] != f {
			t.Errorf("node %d: the intervals sum to %+v, the run counted %+v", f.Node, sum.Files[max(i, 0)], f)
		}
	}

	// The page shows them.
	html := filepath.Join(dir, "report.html")
	if out, err := exec.Command(e2e.Fusescope, "report", "-o", html, stream).CombinedOutput(); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	page := string(e2e.Must(os.ReadFile(html)))
	for _, c := range want.Calls {
		if !regexp.MustCompile(fmt.Sprintf(`<td class="l">%s</td><td>%d</td>`, c.Syscall, c.Count)).MatchString(page) {
			t.Errorf("the page does not show the run's %d %s calls", c.Count, c.Syscall)
		}
	}
	for _, pc := range want.PageCache {
		if !regexp.MustCompile(fmt.Sprintf(`</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td>`, pc.ReadPages, pc.Added, pc.Removed, pc.ReadaheadSync)).MatchString(page) {
			t.Errorf("the page does not show the run's page cache %+v", pc)
		}
	}
	for _, f := range want.Files[:min(len(want.Files), 40)] { // the page lists 50
		if !regexp.MustCompile(fmt.Sprintf(`<td>%d</td><td>%d</td><td>%d</td>`, f.Node, f.Count, f.Errors)).MatchString(page) {
			t.Errorf("the page does not show node %d's %d requests", f.Node, f.Count)
		}
	}
}
