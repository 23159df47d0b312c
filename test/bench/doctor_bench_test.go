package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/test/e2e"
)

// doctorFix is a finding of fusescope doctor on a daemon no one here wrote
// (test/e2e/doctor's TestDoctorIndependentDaemons) and the fix the daemon
// has an option for: the bench runs the daemon with the option that makes
// the anti-pattern (the baseline) and without it, interleaved, and the fix
// must gain in the direction the finding predicts.
type doctorFix struct {
	rule, daemon string
	bad, fixed   string // mount commands; {src} {mnt}
	workload     string // a bench workload, YAML
	fixedIOURing bool
	needs        []string
}

func doctorFixes(hp string, sshfs func(opts string) string) []doctorFix {
	walk := `{name: walk, walk: {files: 1000, dirs: 20, passes: 3}}`
	read4k := `{name: read-4k, fio: {rw: read, bs: 4k, size: 32m, ioengine: sync}}`
	create := `{name: create, shell: {run: 'rm -rf c && mkdir c && s=$(date +%s%N) && i=0 && while [ $i -lt 1000 ]; do : > c/f$i; i=$((i+1)); done && e=$(date +%s%N) && echo "creates/s $((1000000000000 / (e - s)))"', metric: 'creates/s (\d+)', unit: files/s, higher_is_better: true}}`
	return []doctorFix{
		{rule: "attr-storm", daemon: "bindfs", bad: "bindfs -o entry_timeout=0,attr_timeout=0 {src} {mnt}", fixed: "bindfs {src} {mnt}", workload: walk, needs: []string{"bindfs"}},
		{rule: "direct-io", daemon: "bindfs", bad: "bindfs -o direct_io {src} {mnt}", fixed: "bindfs {src} {mnt}", workload: read4k, needs: []string{"bindfs"}},
		{rule: "attr-storm", daemon: "passthrough_hp", bad: hp + " --nocache {src} {mnt}", fixed: hp + " {src} {mnt}", workload: walk},
		{rule: "passthrough", daemon: "passthrough_hp", bad: hp + " --nopassthrough {src} {mnt}", fixed: hp + " {src} {mnt}", workload: read4k},
		{rule: "io-uring", daemon: "passthrough_hp", bad: hp + " --nopassthrough {src} {mnt}", fixed: hp + " --nopassthrough -o io_uring {src} {mnt}", workload: create, fixedIOURing: true},
		{rule: "direct-io", daemon: "sshfs", bad: sshfs("direct_io"), fixed: sshfs(""), workload: read4k},
	}
}

// TestBenchDoctorFixes measures, with fusescope bench in one run per
// finding, what the fix of each finding doctor made on an independent
// daemon gains, and checks its direction. docs/performance.md records the
// tables.
func TestBenchDoctorFixes(t *testing.T) {
	setup(t)
	port, key := e2e.StartSshd(t)
	sshfs := func(opts string) string {
		args := e2e.SshfsArgs(port, key, opts, "{src}", "{mnt}")
		return "sshfs " + strings.Join(args, " ")
	}
	for _, f := range doctorFixes(e2e.LibfuseExample(t, "passthrough_hp"), sshfs) {
		t.Run(f.daemon+"/"+f.rule, func(t *testing.T) {
			for _, n := range f.needs {
				if _, err := exec.LookPath(n); err != nil {
					t.Skipf("%s is not installed", n)
				}
			}
			umount := "fusermount3 -u {mnt}"
			spec := fmt.Sprintf(`name: doctor-%s-%s
repetitions: 5
warmup: 1
configurations:
  - {name: with-the-finding, mount: %q, umount: %q}
  - {name: fixed, mount: %q, umount: %q, io_uring: %v}
workloads:
  - %s
`, f.daemon, f.rule, f.bad, umount, f.fixed, umount, f.fixedIOURing, f.workload)
			path := filepath.Join(t.TempDir(), "fix.yaml")
			if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
				t.Fatal(err)
			}
			b := benchRecord(t, path)
			for _, r := range b.Results {
				if r.Configuration != "fixed" || r.VsBaseline == nil {
					continue
				}
				c := r.VsBaseline
				fmt.Printf("%-15s %-12s %-10s %-12s fixed / with the finding %.3gx [%.3g, %.3g] p=%.3f\n", f.daemon, f.rule, r.Workload, r.Metric, c.Ratio, c.CILow, c.CIHigh, c.P)
				if r.Metric != b.Results[0].Metric {
					continue
				}
				if better := c.Ratio > 1 == r.HigherIsBetter; !better || !c.Significant {
					t.Errorf("%s's fix for %s: %s %.3gx [%.3g, %.3g] p=%.3f: not the gain the finding predicts", f.daemon, f.rule, r.Metric, c.Ratio, c.CILow, c.CIHigh, c.P)
				}
			}
		})
	}
}
