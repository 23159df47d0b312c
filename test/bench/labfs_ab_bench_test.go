package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/fusescope/fusescope/internal/stats"
)

// TestBenchLabFSVsLoopback measures the second target as a paired
// A/B: the lab file system's default mode against go-fuse's loopback.
func TestBenchLabFSVsLoopback(t *testing.T) {
	setup(t)
	bin, _ := filepath.Abs("../../bin/fusescope")
	pairs, size, files := 8, "64m", 19000
	if os.Getenv("FUSESCOPE_BENCH_QUICK") != "" {
		pairs, size, files = 2, "16m", 2000
	}
	pairs = pairsFromEnv(pairs)
	pairedAB(t, "fusescope-ab", labfsConfig(bin, "default"), loopbackConfig(buildLoopback(t)), pairs, size, files)
}

// TestBenchPassthroughVsNative measures the first target the same
// way: the passthrough preset against the source file system itself. The
// matrix's single-run ratios of these two moved by 10-15% from run to run
// on this VM's disk.
func TestBenchPassthroughVsNative(t *testing.T) {
	setup(t)
	bin, _ := filepath.Abs("../../bin/fusescope")
	pairs, size := 20, "64m"
	if os.Getenv("FUSESCOPE_BENCH_QUICK") != "" {
		pairs, size = 2, "16m"
	}
	pairs = pairsFromEnv(pairs)
	pairedAB(t, "fusescope-pt", labfsConfig(bin, "passthrough"), nativeConfig, pairs, size, 0)
}

// pairsFromEnv is FUSESCOPE_BENCH_AB_PAIRS when set, else n.
func pairsFromEnv(n int) int {
	if v, err := strconv.Atoi(os.Getenv("FUSESCOPE_BENCH_AB_PAIRS")); err == nil && v > 0 {
		return v
	}
	return n
}

var nativeConfig = fsConfig{"native", func(t *testing.T, src, mnt string) (string, func()) { return src, func() {} }}

// pairedAB compares a with b: both are mounted at once over one source on
// a scratch file system, and each workload runs on both in turn, caches
// dropped before every run, pairs times. The order alternates from pair to
// pair, so neither side always runs first (the one that runs second reads
// blocks the host has just cached). Both sides write into the same
// directory of the source, one after the other, and each removes what it
// wrote: a directory of each side's own would put each side's files in
// block groups of its own for the whole run. files > 0 adds the metadata
// phases. It prints a/b ratios per workload.
func pairedAB(t *testing.T, scratch string, a, b fsConfig, pairs int, size string, files int) {
	base := scratchFS(t, fmt.Sprintf("%s-%d", scratch, os.Getpid()))
	src := filepath.Join(base, "src")
	if err := os.MkdirAll(filepath.Join(src, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	fio(t, filepath.Join(src, "read.dat"), fioJob{"read", []string{"--rw=write"}}, size)

	sides := []fsConfig{a, b}
	var dirs, work [2]string
	for i, c := range sides {
		mnt := filepath.Join(base, fmt.Sprint("mnt", i))
		os.MkdirAll(mnt, 0o755)
		dir, umount := c.mount(t, src, mnt)
		t.Cleanup(umount)
		dirs[i], work[i] = dir, filepath.Join(dir, "work")
	}
	results := map[string]*[2][]float64{}
	add := func(w string, side int, v float64) {
		if results[w] == nil {
			results[w] = &[2][]float64{}
		}
		results[w][side] = append(results[w][side], v)
	}
	for p := range pairs {
		order := []int{0, 1}
		if p%2 == 1 {
			order = []int{1, 0}
		}
		for _, job := range fioJobs {
			for _, i := range order {
				dropCaches(t)
				file := job.fileIn(dirs[i], work[i])
				add(job.name, i, fio(t, file, job, size))
				if !job.reads() {
					os.Remove(file)
				}
			}
		}
		if files == 0 {
			continue
		}
		for _, i := range order {
			dropCaches(t)
			for phase, v := range metadata(t, work[i], files) {
				add(phase, i, v)
			}
		}
	}

	what := fmt.Sprintf("fio %s", size)
	if files > 0 {
		what += fmt.Sprintf(", %d files", files)
	}
	fmt.Printf("\n### %s vs %s, paired A/B (%d pairs, alternating order; %s)\n\n", a.name, b.name, pairs, what)
	fmt.Printf("Ratios are %s / %s of the same pair; > 1 means the first is faster. The interval is Student's t on the log ratios.\n\n", a.name, b.name)
	fmt.Printf("| workload | %s (median) | %s (median) | median ratio | geometric mean ratio [95%% CI] | min-max | pairs faster |\n", a.name, b.name)
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, w := range []string{"read", "write", "randread", "randwrite", "create", "stat cold", "stat warm", "ls -l", "delete"} {
		r := results[w]
		if r == nil {
			continue
		}
		ratios := make([]float64, len(r[0]))
		for i := range r[0] {
			ratios[i] = r[0][i] / r[1][i]
		}
		s, _ := stats.SummariseRatios(ratios)
		fmt.Printf("| %s | %.1f | %.1f %s %d of %d |\n", w, stats.Median(r[0]), stats.Median(r[1]), summary(ratios), s.AtLeastOne, len(ratios))
	}
}
