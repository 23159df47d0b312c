package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/stats"
)

// benchRecord runs fusescope bench with args and returns its record.
func benchRecord(t *testing.T, args ...string) *profile.BenchReport {
	t.Helper()
	bin, _ := filepath.Abs("../../bin/fusescope")
	rec := filepath.Join(t.TempDir(), "bench.json")
	cmd := exec.Command(bin, append([]string{"bench", "-o", rec}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fusescope bench %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	var r profile.Record
	if err := json.Unmarshal(b, &r); err != nil || r.Bench == nil {
		t.Fatalf("the bench's record: %v", err)
	}
	return r.Bench
}

// The bench's own cost on what it measures: the same fio job run by hand
// and by fusescope bench (one run per invocation, both on a directory of
// /var/tmp), interleaved, pairs times; the ratio of fio's bandwidths
// (bench / by hand) should be 1 within 2%. The job reads a file the page
// cache holds for 2 s, with caches kept: a cold read of the virtual disk
// varied 9-fold from run to run, which would hide any cost.
func TestBenchBenchOverhead(t *testing.T) {
	setup(t)
	pairs := pairsFromEnv(10)
	job := []string{"rw=read", "bs=128k", "size=64m", "ioengine=sync", "runtime=2", "time_based"}
	dir := t.TempDir()
	file := filepath.Join(dir, "hand.dat")
	if out, err := exec.Command("fio", "--name=layout", "--filename="+file, "--rw=write", "--bs=1m", "--size=64m", "--fsync_on_close=1").CombinedOutput(); err != nil {
		t.Fatalf("fio: %v\n%s", err, out)
	}
	var ratios, hand, bench []float64
	for i := range pairs {
		byHand := func() float64 {
			args := []string{"--name=hand", "--filename=" + file, "--output-format=json", "--fadvise_hint=0"}
			for _, kv := range job {
				args = append(args, "--"+kv)
			}
			out, err := exec.Command("fio", args...).Output()
			if err != nil {
				t.Fatal(err)
			}
			var res struct {
				Jobs []struct {
					Read struct {
						BWBytes float64 `json:"bw_bytes"`
					} `json:"read"`
				} `json:"jobs"`
			}
			if err := json.Unmarshal(out, &res); err != nil || len(res.Jobs) == 0 {
				t.Fatalf("fio's output: %v", err)
			}
			return res.Jobs[0].Read.BWBytes / (1 << 20)
		}
		byBench := func() float64 {
			r := benchRecord(t, "--native", "--fio", "seqread="+strings.Join(job, ","), "-n", "1", "--scratch", "tmp", "--no-trace", "--no-drop-caches")
			if len(r.Runs) != 1 || len(r.Runs[0].Metrics) == 0 {
				t.Fatalf("bench runs: %+v", r.Runs)
			}
			return r.Runs[0].Metrics[0].Value
		}
		var h, b float64
		if i%2 == 0 {
			h, b = byHand(), byBench()
		} else {
			b, h = byBench(), byHand()
		}
		hand, bench = append(hand, h), append(bench, b)
		ratios = append(ratios, b/h)
	}
	fmt.Printf("\n### fusescope bench against fio by hand (fio read of a cached 64 MiB file, 128 KiB blocks, 2 s, %d pairs, alternating order)\n\n", pairs)
	fmt.Println("| by hand MiB/s (median) | bench MiB/s (median) | median ratio | geometric mean ratio [95% CI] | min-max |")
	fmt.Println("|---|---|---|---|---|")
	fmt.Printf("| %.0f | %.0f %s\n", stats.Median(hand), stats.Median(bench), summary(ratios))
}

// What tracing does to the figures: the lab file system not traced, traced
// plain and traced with stages, in one matrix (the tracer attached for
// each traced run only), on a request-heavy fio job and the metadata tree.
func TestBenchTraceEffect(t *testing.T) {
	setup(t)
	reps := pairsFromEnv(8)
	spec := filepath.Join(t.TempDir(), "trace-effect.yaml")
	os.WriteFile(spec, []byte(`name: trace-effect
configurations:
  - {name: untraced, labfs: [--preset, default], trace: false}
  - {name: plain, labfs: [--preset, default], trace: plain}
  - {name: stages, labfs: [--preset, default], trace: stages}
workloads:
  - name: randread-4k
    fio: {rw: randread, bs: 4k, size: 64m, ioengine: sync, direct: "1", runtime: "3", time_based: ""}
  - name: tree
    tree: {files: 2000, dirs: 10}
`), 0o644)
	r := benchRecord(t, spec, "-n", fmt.Sprint(reps), "--warmup", "1")
	fmt.Printf("\n### The trace's effect on the figures (fusescope bench, lab fs default traced, plain and with stages, against untraced, %d rounds, shuffled)\n\n", reps)
	fmt.Println("| workload | figure | trace | untraced (median) | traced (median) | ratio traced/untraced [95% CI] | delta | p |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	med := map[string]float64{}
	for _, res := range r.Results {
		med[res.Workload+res.Metric+res.Configuration] = res.Summary.Median
	}
	for _, res := range r.Results {
		if res.Configuration == "untraced" || res.VsBaseline == nil || strings.HasPrefix(res.Metric, "clat") || res.Metric == "iops" {
			continue
		}
		c := res.VsBaseline
		fmt.Printf("| %s | %s (%s) | %s | %.4g | %.4g | %.3f [%.3f, %.3f] | %s | %.3f |\n", res.Workload, res.Metric, res.Unit, res.Configuration,
			med[res.Workload+res.Metric+"untraced"], res.Summary.Median, c.Ratio, c.CILow, c.CIHigh, c.Delta(), c.P)
	}
}

// The presets, each as make bench runs it; docs/performance.md quotes the
// tables. FUSESCOPE_BENCH_PRESETS picks some (comma-separated).
func TestBenchPresets(t *testing.T) {
	setup(t)
	bin, _ := filepath.Abs("../../bin/fusescope")
	presets := []string{"pipelining", "writeback", "kernel-cache", "readdir", "passthrough", "scaling", "fast17"}
	if v := os.Getenv("FUSESCOPE_BENCH_PRESETS"); v != "" {
		presets = strings.Split(v, ",")
	}
	for _, p := range presets {
		out, err := exec.Command(bin, "bench", "--preset", p).Output()
		if err != nil {
			t.Errorf("preset %s: %v", p, err)
		}
		fmt.Printf("\n### fusescope bench --preset %s\n\n```\n%s```\n", p, out)
	}
}
