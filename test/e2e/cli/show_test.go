package cli

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/report"
	"github.com/fusescope/fusescope/test/e2e"
)

// TestShowEveryRecordKind makes one record of each kind fusescope writes
// (a trace, an interval trace's lines, a trace with stages, a system-call
// report and a bench run) and reads each back with show as text, JSON and
// CSV, and with report: every view reads every kind. A bench run's text is
// what bench printed.
func TestShowEveryRecordKind(t *testing.T) {
	t.Parallel()
	src, mnt, _ := e2e.MountLabFS(t, e2e.Preset(t, "nocache"))
	for i := range 5 {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("f%d", i)), bytes.Repeat([]byte("x"), 10000), 0o644)
	}
	dir := t.TempDir()
	file := func(name string) string { return filepath.Join(dir, name) }
	cat := "cat " + mnt + "/* >/dev/null"
	e2e.Run(t, e2e.Fusescope, "trace", "--mount", mnt, "-o", file("trace.json"), "--", "ls", "-l", mnt)
	e2e.Run(t, e2e.Fusescope, "trace", "--mount", mnt, "--stages", "-o", file("stages.json"), "--", "sh", "-c", cat)
	lines := e2e.MustRead(t, e2e.Fusescope, "trace", "--mount", mnt, "--json", "0.2", "--", "sh", "-c", "for i in 1 2 3; do "+cat+"; sleep 0.2; done")
	os.WriteFile(file("stream.jsonl"), lines, 0o644)
	e2e.Run(t, e2e.Fusescope, "syscalls", "--json", "-o", file("sys.json"), "--", "cat", filepath.Join(mnt, "f0"))
	benchText := e2e.MustRead(t, e2e.Fusescope, "bench", "--native", "--labfs", "lab=--preset default", "--shell", "list=ls -lR . >/dev/null",
		"-n", "3", "--warmup", "0", "--scratch", "tmp", "--no-drop-caches", "--no-trace", "-o", file("bench.json"))

	kinds := []struct {
		file, kind string
		text       string // in show's text
	}{
		{"trace.json", report.KindRequests, "LOOKUP"},
		{"stages.json", report.KindRequests, "DAEMON("},
		{"stream.jsonl", report.KindRequests, "READ"},
		{"sys.json", report.KindSyscalls, "openat"},
		{"bench.json", report.KindBench, "list: elapsed"},
	}
	for _, k := range kinds {
		path := file(k.file)
		want, err := profile.ParseAll(e2e.Must(os.ReadFile(path)))
		if err != nil {
			t.Fatalf("%s: %v", k.file, err)
		}
		if got := report.Kind(want[0]); got != k.kind {
			t.Fatalf("%s is %s, want %s", k.file, got, k.kind)
		}
		show := func(flags ...string) string {
			out, err := exec.Command(e2e.Fusescope, append(append([]string{"show"}, flags...), path)...).CombinedOutput()
			if err != nil {
				t.Errorf("show %v %s: %v\n%s", flags, k.file, err, out)
			}
			return string(out)
		}
		if text := show(); !strings.Contains(text, k.text) {
			t.Errorf("show %s lacks %q:\n%s", k.file, k.text, text)
		}
		if got, err := profile.ParseAll([]byte(show("--json"))); err != nil || len(got) != len(want) || report.Kind(got[0]) != k.kind {
			t.Errorf("show --json %s: %d records (%v), want %d of %s", k.file, len(got), err, len(want), k.kind)
		}
		rows, err := csv.NewReader(strings.NewReader(show("--csv"))).ReadAll()
		if err != nil || len(rows) < 2 {
			t.Errorf("show --csv %s: %d rows (%v), want a header and rows", k.file, len(rows), err)
		}
		html := file(k.file + ".html")
		if out, err := exec.Command(e2e.Fusescope, "report", "-o", html, path).CombinedOutput(); err != nil {
			t.Errorf("report %s: %v\n%s", k.file, err, out)
		}
	}
	if got := string(e2e.MustRead(t, e2e.Fusescope, "show", file("bench.json"))); got != string(benchText) {
		t.Errorf("show of a bench run differs from what bench printed:\n--- bench\n%s\n--- show\n%s", benchText, got)
	}

	// What does not apply to a kind is refused in one line, as is a file
	// of two kinds.
	os.WriteFile(file("mixed.jsonl"), append(e2e.Must(os.ReadFile(file("trace.json"))), e2e.Must(os.ReadFile(file("bench.json")))...), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-m", file("bench.json")}, "bench.json is a bench run (bench -o) (use --json or --csv)"},
		{[]string{"--top", "3", file("bench.json")}, "--top applies to syscalls reports"},
		{[]string{"--csv", "--table", "slow", file("bench.json")}, "whose CSV is one table: leave out --table"},
		{[]string{"--counts", file("sys.json")}, "is a system-call report"},
		{[]string{file("mixed.jsonl")}, "mixes a record of FUSE requests (trace, fs stats) with a bench run (bench -o)"},
	} {
		out, err := exec.Command(e2e.Fusescope, append([]string{"show"}, c.args...)...).CombinedOutput()
		if text := strings.TrimSpace(string(out)); err == nil || strings.Contains(text, "\n") || !strings.Contains(text, c.want) {
			t.Errorf("show %v: %v, want one line with %q:\n%s", c.args, err, c.want, out)
		}
	}
}
