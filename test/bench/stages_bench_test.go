package bench

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/stats"
)

// BenchmarkStagesCost measures what trace --stages costs, in one
// interleaved run:
//
//	(a) per FUSE request, every program included (send, end and the stage
//	    programs on the daemon's calls), from kernel.bpf_stats_enabled;
//	(b) the stat workload on bindfs untraced, under the plain trace and
//	    under --stages, in random order per round;
//	(c) a process that is not traced at all (read and write of 1 byte on
//	    tmpfs, dd bs=1's calls) untraced, under --stages, under the same
//	    programs returning at once (the floor of attaching them), and
//	    under empty programs on the raw sys_enter/sys_exit tracepoints
//	    (what the per-call tracepoints spare every other call).
func TestBenchStagesCost(t *testing.T) {
	setup(t)
	files, conn := statMount(t, 2000)
	holders, err := fuseconn.HoldersOf(conn)
	if err != nil || len(holders) == 0 {
		t.Fatalf("the bindfs daemon: %v %v", holders, err)
	}
	var daemons []int
	for _, h := range holders {
		daemons = append(daemons, h.PID)
	}
	open := func(o ktrace.Options) *ktrace.Tracer {
		o.Conns = []uint32{conn}
		tr, err := ktrace.Start(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.WatchDaemons(daemons); err != nil {
			t.Fatal(err)
		}
		tr.Pause()
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	plain := open(ktrace.Options{})
	staged := open(ktrace.Options{Stages: true})
	empty := open(ktrace.Options{Stages: true, StageCost: ktrace.StagesEmpty})
	raw := open(ktrace.Options{StageCost: ktrace.StagesRawEmpty, Stages: true})
	// --calls of another application: every process's calls run its raw
	// sys_enter/sys_exit programs, which return at the file-call table or
	// the application's bitmap.
	otherApp := open(ktrace.Options{Calls: true})
	setBPFStats(t, true)
	defer setBPFStats(t, false)

	const rounds = 10
	fmt.Printf("\n### trace --stages: cost\n\n")
	fmt.Printf("%d stats of distinct files on bindfs (entry/attr timeouts 0) per block; %d rounds, each runs the arms in random order; ratios to the untraced block of the same round.\n\n", len(files), rounds)
	stat := func() time.Duration { return statBlock(files) }
	arms := map[string]*ktrace.Tracer{"plain trace": plain, "--stages": staged, "floor: --stages' programs on the daemon's calls returning at once": empty}
	ratios := rounds3(t, rounds, stat, arms)
	fmt.Println("| stat workload | median | geometric mean [95% CI] | min-max |")
	fmt.Println("|---|---|---|---|")
	for _, name := range []string{"plain trace", "--stages", "floor: --stages' programs on the daemon's calls returning at once"} {
		fmt.Printf("| %s / untraced %s\n", name, summary(ratios[name]))
	}
	slowdown := func(rs []float64) float64 { return stats.Median(rs) - 1 }
	fmt.Printf("\nslowdowns (median ratio - 1): plain trace %.3f, --stages %.3f, floor %.3f\n", slowdown(ratios["plain trace"]), slowdown(ratios["--stages"]),
		slowdown(ratios["floor: --stages' programs on the daemon's calls returning at once"]))

	// (a): each tracer's programs per request, over its stat blocks.
	perRequest := func(name string, tr *ktrace.Tracer) float64 {
		progs, err := tr.ProgramStats()
		if err != nil {
			t.Fatal(err)
		}
		var total time.Duration
		var requests uint64
		for _, p := range progs {
			total += p.Runtime
			if p.Program == "fuse_end" {
				requests = p.Runs
			}
			if p.Runs > 0 {
				fmt.Printf("| %s | %s | %d | %.0f |\n", name, p.Program, p.Runs, float64(p.Runtime)/float64(p.Runs))
			}
		}
		return float64(total) / float64(requests)
	}
	fmt.Println("\n| tracer | program | runs | ns per run |")
	fmt.Println("|---|---|---|---|")
	plainNs, stagedNs, floorNs := perRequest("plain", plain), perRequest("--stages", staged), perRequest("floor", empty)
	fmt.Printf("\n(a) all programs per FUSE request: --stages %.0f ns; the floor (the same send and end, the daemon's programs returning at once) %.0f ns; plain trace %.0f ns (target <= 400 ns)\n", stagedNs, floorNs, plainNs)

	// (c): a process the trace does not watch.
	dir := "/dev/shm"
	if _, err := os.Stat(dir); err != nil {
		dir = t.TempDir()
	}
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer zero.Close()
	out, err := os.Create(filepath.Join(dir, "fusescope-bench-dd"))
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(out.Name())
	defer out.Close()
	const calls = 100_000
	dd := func() time.Duration {
		var b [1]byte
		out.Seek(0, 0)
		start := time.Now()
		for range calls {
			syscall.Read(int(zero.Fd()), b[:])
			syscall.Write(int(out.Fd()), b[:])
		}
		return time.Since(start)
	}
	arms = map[string]*ktrace.Tracer{"--stages": staged, "floor: same tracepoints, empty programs": empty, "raw sys_enter/sys_exit, empty programs": raw,
		"--calls of another application": otherApp}
	ratios = rounds3(t, rounds, dd, arms)
	fmt.Printf("\n(c) %d reads of /dev/zero and writes to tmpfs of 1 byte per block, by a process --stages does not watch:\n\n", calls)
	fmt.Println("| arm | median | geometric mean [95% CI] | min-max |")
	fmt.Println("|---|---|---|---|")
	for _, name := range []string{"--stages", "floor: same tracepoints, empty programs", "raw sys_enter/sys_exit, empty programs", "--calls of another application"} {
		fmt.Printf("| %s / untraced %s\n", name, summary(ratios[name]))
	}
	for name, tr := range map[string]*ktrace.Tracer{"--stages": staged, "floor": empty, "raw floor": raw} {
		progs, _ := tr.ProgramStats()
		var rt time.Duration
		var runs uint64
		for _, p := range progs {
			if p.Program != "fuse_send" && p.Program != "fuse_end" {
				rt, runs = rt+p.Runtime, runs+p.Runs
			}
		}
		if runs > 0 {
			fmt.Printf("%s: %.1f ns per system-call program run (%d runs)\n", name, float64(rt)/float64(runs), runs)
		}
	}
}

// rounds3 runs rounds of an untraced block and one block per arm, in random
// order within each round, and returns each arm's ratio to the round's
// untraced block.
func rounds3(t *testing.T, rounds int, block func() time.Duration, arms map[string]*ktrace.Tracer) map[string][]float64 {
	names := make([]string, 0, len(arms)+1)
	for name := range arms {
		names = append(names, name)
	}
	slices.Sort(names)
	names = append(names, "")
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	out := map[string][]float64{}
	block() // warm up
	for range rounds {
		r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		took := map[string]time.Duration{}
		for _, name := range names {
			if name == "" {
				time.Sleep(settle)
				took[name] = block()
				continue
			}
			if err := arms[name].Resume(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(settle)
			took[name] = block()
			arms[name].Pause()
		}
		for name := range arms {
			out[name] = append(out[name], float64(took[name])/float64(took[""]))
		}
	}
	return out
}
