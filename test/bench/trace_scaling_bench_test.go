package bench

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/stats"
)

// parallelStat stats files with n threads, each its own share, and returns
// the elapsed time: n requests in flight at once on one connection, the
// case where the tracer's shared in-flight table could bounce cache lines.
func parallelStat(files []string, n int) time.Duration {
	runtime.GC()
	var wg sync.WaitGroup
	start := time.Now()
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			var st syscall.Stat_t
			for i := w; i < len(files); i += n {
				syscall.Stat(files[i], &st)
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// TestBenchTraceScaling measures the tracer as concurrency grows: 1 to 2x
// the CPUs' count of threads stat distinct files on one bindfs mount. For
// each, the BPF cost per event of fusescope's programs and of empty ones
// on the same tracepoints, and the slowdown of fusescope's programs in
// interleaved pairs.
func TestBenchTraceScaling(t *testing.T) {
	setup(t)
	const nFiles = 4000
	files, conn := statMount(t, nFiles)
	tr, err := ktrace.Start(ktrace.Options{Conns: []uint32{conn}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.Pause()
	empty := newEmptyPrograms(t, tr.Attach())
	attachEmpty, emptyStats := empty.arm(t), empty.stats(t)
	attached, ourStats := tracerArm(t, tr), tracerStats(t, tr)
	defer setBPFStats(t, false)

	npairs := 30
	if os.Getenv("FUSESCOPE_BENCH_QUICK") != "" {
		npairs = 5
	}
	fmt.Printf("\n### Scaling with concurrent requests (%d CPUs)\n\n", runtime.NumCPU())
	fmt.Printf("N threads stat %d distinct files on bindfs (entry/attr timeouts 0); per event = median of 5 blocks' run_time_ns / run_cnt with kernel.bpf_stats_enabled; slowdown = traced / untraced block time, %d interleaved pairs.\n\n", nFiles, npairs)
	fmt.Println("| threads | stat/s untraced | empty programs: ns/event | fusescope: ns/event | fusescope slowdown: median | geometric mean [95% CI] |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, n := range []int{1, 2, 4, 8, 16, 32} {
		if n > 2*runtime.NumCPU() {
			break
		}
		block := func() time.Duration { return parallelStat(files, n) }
		for range 3 {
			block()
		}
		untraced := block()
		// Statistics on only while measuring them: their two clock
		// reads per run would count in the slowdown.
		setBPFStats(t, true)
		detach := attachEmpty()
		emptyNs, _ := perEventBlocks(t, "empty programs", emptyStats, func() { block() }, 5)
		detach()
		detach = attached()
		ourNs, _ := perEventBlocks(t, "fusescope", ourStats, func() { block() }, 5)
		detach()
		setBPFStats(t, false)
		s := summaryOf(pairsOf(npairs, block, attached))
		fmt.Printf("| %d | %.0f | %.0f | %.0f %s\n", n, float64(nFiles)/untraced.Seconds(), stats.Median(emptyNs), stats.Median(ourNs), s)
	}
}
