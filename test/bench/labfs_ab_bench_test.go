package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestBenchLabFSVsLoopback measures the second target as a paired
// A/B: the lab file system's default mode and go-fuse's loopback, mounted at
// once over one source, each workload run on both in turn, caches dropped
// before every run. The order alternates from pair to pair, so neither side
// always runs first (the one that runs second reads blocks the host has just
// cached). The matrix (TestBenchLabFS) runs seven configurations in random
// order, whose position effects blur a comparison of two.
func TestBenchLabFSVsLoopback(t *testing.T) {
	setup(t)
	bin, _ := filepath.Abs("../../bin/fusescope")
	loop := buildLoopback(t)
	pairs, size, files := 8, "64m", 19000
	if os.Getenv("FUSESCOPE_BENCH_QUICK") != "" {
		pairs, size, files = 2, "16m", 2000
	}
	base := scratchFS(t, fmt.Sprintf("fusescope-ab-%d", os.Getpid()))
	src := filepath.Join(base, "src")
	os.MkdirAll(src, 0o755)
	fio(t, filepath.Join(src, "read.dat"), fioJob{"read", []string{"--rw=write"}}, size)

	sides := []fsConfig{labfsConfig(bin, "default"), loopbackConfig(loop)}
	var dirs, work [2]string
	for i, c := range sides {
		mnt := filepath.Join(base, fmt.Sprint("mnt", i))
		os.MkdirAll(mnt, 0o755)
		dir, umount := c.mount(t, src, mnt)
		t.Cleanup(umount)
		dirs[i], work[i] = dir, filepath.Join(dir, fmt.Sprint("side", i))
		if err := os.MkdirAll(work[i], 0o755); err != nil {
			t.Fatal(err)
		}
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
		for _, i := range order {
			dropCaches(t)
			for phase, v := range metadata(t, work[i], files) {
				add(phase, i, v)
			}
		}
	}

	fmt.Printf("\n### labfs default vs %s, paired A/B (%d pairs, alternating order; fio %s, %d files)\n\n", loopbackName, pairs, size, files)
	fmt.Println("Ratios are labfs default / loopback of the same pair; > 1 means the lab file system is faster.")
	fmt.Println()
	fmt.Println("| workload | labfs default (median) | loopback (median) | median ratio | geometric mean ratio [95% CI] | min-max | pairs faster |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, w := range []string{"read", "write", "randread", "randwrite", "create", "stat cold", "stat warm", "ls -l", "delete"} {
		r := results[w]
		var ratios []float64
		faster := 0
		for i := range r[0] {
			ratios = append(ratios, r[0][i]/r[1][i])
			if r[0][i] >= r[1][i] {
				faster++
			}
		}
		fmt.Printf("| %s | %.1f | %.1f %s %d of %d |\n", w, median(r[0]), median(r[1]), summary(ratios), faster, len(ratios))
	}
}
