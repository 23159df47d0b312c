package bench

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/stats"
	"golang.org/x/sys/unix"
)

// TestBenchMechanisms is what each way of attaching costs per FUSE request,
// in one run on one kernel: the tracepoints (tp_btf, classic)
// where the kernel has them, fentry and kprobes on its functions where it
// has those, each plain and with --stages (the system-call side on the
// tracepoints, the kernel's side of /dev/fuse on fentry and kprobes).
// Meant for the kernel matrix's guests, where all four coexist from 6.12
// (scripts/bench-guest.sh boots one with this binary): emulation inflates
// absolute times, so the figures that count are ratios within a run.
//
// Per round, in random order: an untraced block and a block under each
// tracer, every block 1,000 stats of distinct files on the lab file system
// with its caches off (a LOOKUP and a GETATTR each). Two figures per
// tracer: its programs' run time per request (kernel.bpf_stats_enabled:
// the programs alone, not what attaching them costs the kernel: a
// trampoline, a kprobe's breakpoint or ftrace call), and the block's time
// beyond the round's untraced block, per request (all of it). Under qemu
// with -icount shift=0,sleep=off (scripts/bench-guest.sh) a guest's clock
// counts the instructions it executes and skips its idle time, so both are
// instruction counts, free of the host's load.
func TestBenchMechanisms(t *testing.T) {
	setup(t)
	files, conn, daemons := labStatMount(t, 1000)
	type tracer struct {
		name string
		tr   *ktrace.Tracer
		per  []float64 // programs' ns per request, per block
		rel  []float64 // block time / the round's untraced block
		// (block time - the round's untraced block) / requests: all a
		// request costs traced, the mechanism's own work included
		extra []float64
		reqs  uint64 // of the last block
		// stage programs' share, ns per request
		stagePer []float64
		// each program's run time and runs over all blocks
		byProg map[string]totals
	}
	var tracers []*tracer
	attaches := []string{ktrace.AttachBTF, ktrace.AttachTracepoint, ktrace.AttachFentry, ktrace.AttachKprobe}
	if s := os.Getenv("FUSESCOPE_BENCH_ATTACH"); s != "" {
		attaches = strings.Split(s, ",")
	}
	// Each way plain, with --stages, and with --stages' programs whose
	// end counts nothing (the floor under the stages' accounting).
	variants := []struct {
		suffix string
		staged bool
		cost   ktrace.StageCost
	}{{"", false, ktrace.StagesMeasured}, {" --stages", true, ktrace.StagesMeasured}, {" --stages uncounted", true, ktrace.StagesUncounted}}
	for _, attach := range attaches {
		for _, v := range variants {
			name, staged := attach+v.suffix, v.staged
			tr, err := ktrace.Start(ktrace.Options{Attach: attach, Conns: []uint32{conn}, Stages: staged, StageCost: v.cost})
			if err != nil {
				fmt.Printf("note: %s: %v\n", name, err)
				continue
			}
			tr.Pause()
			t.Cleanup(func() { tr.Close() })
			if staged {
				if err := tr.WatchDaemons(daemons); err != nil {
					t.Fatal(err)
				}
				name += " (" + stageSide(tr) + ")"
			}
			tracers = append(tracers, &tracer{name: name, tr: tr, byProg: map[string]totals{}})
		}
	}
	if len(tracers) == 0 {
		t.Fatal("no way of attaching loads on this kernel")
	}
	setBPFStats(t, true)
	defer setBPFStats(t, false)
	rounds := 12
	if s := os.Getenv("FUSESCOPE_BENCH_ROUNDS"); s != "" {
		fmt.Sscan(s, &rounds)
	}
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 40))
	statBlock(files) // warm the daemon and the dentries' slab
	for range rounds {
		order := r.Perm(len(tracers) + 1)
		times := make([]time.Duration, len(tracers)+1)
		for _, i := range order {
			if i == len(tracers) {
				time.Sleep(settle)
				times[i] = statBlock(files)
				continue
			}
			tc := tracers[i]
			if err := tc.tr.Resume(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(settle)
			before := programTotals(t, tc.tr)
			times[i] = statBlock(files)
			after := programTotals(t, tc.tr)
			tc.tr.Pause()
			reqs := after.ends - before.ends
			if reqs == 0 {
				t.Fatalf("%s: no request ended", tc.name)
			}
			tc.per = append(tc.per, float64(after.all-before.all)/float64(reqs))
			tc.reqs = reqs
			tc.stagePer = append(tc.stagePer, float64(after.stage-before.stage)/float64(reqs))
			for name, a := range after.byProg {
				b := before.byProg[name]
				sum := tc.byProg[name]
				sum.all += a.all - b.all
				sum.ends += a.ends - b.ends
				sum.reqs += reqs
				tc.byProg[name] = sum
			}
		}
		for i, tc := range tracers {
			tc.rel = append(tc.rel, float64(times[i])/float64(times[len(tracers)]))
			tc.extra = append(tc.extra, float64(times[i]-times[len(tracers)])/float64(tc.reqs))
		}
	}
	rel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	fmt.Printf("\nKernel %s, %d rounds of %d stats (LOOKUP + GETATTR each) on the lab file system (--preset nocache).\n\n", strings.TrimSpace(string(rel)), rounds, len(files))
	fmt.Println("| tracer | programs per request: ns, median | of which stage programs | against plain tp_btf | traced block's extra time per request: ns, median | against plain tp_btf | block / untraced: geometric mean [95% CI] |")
	fmt.Println("|---|---|---|---|---|---|---|")
	var base, baseExtra float64
	for _, tc := range tracers {
		if tc.name == ktrace.AttachBTF {
			base, baseExtra = median(tc.per), median(tc.extra)
		}
	}
	ratio := func(x, of float64) string {
		if of <= 0 {
			return ""
		}
		return fmt.Sprintf("%.2fx", x/of)
	}
	for _, tc := range tracers {
		s, err := stats.SummariseRatios(tc.rel)
		slow := fmt.Sprint(err)
		if err == nil {
			slow = fmt.Sprintf("%.3f [%.3f, %.3f]", s.GeoMean, s.CILow, s.CIHigh)
		}
		fmt.Printf("| %s | %.0f | %.0f | %s | %.0f | %s | %s |\n", tc.name, median(tc.per), median(tc.stagePer), ratio(median(tc.per), base),
			median(tc.extra), ratio(median(tc.extra), baseExtra), slow)
	}
	fmt.Println("\nRequests split into stages (the rest lacked a stamp):")
	for _, tc := range tracers {
		if !tc.tr.Stages() || strings.Contains(tc.name, "uncounted") {
			continue
		}
		p, err := tc.tr.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		var all, staged uint64
		for _, o := range p.Ops {
			all += o.Count
			if len(o.Stages) > 0 {
				staged += o.Stages[0].Latency.Count
			}
		}
		fmt.Printf("- %s: %d of %d (%.1f%%)\n", tc.name, staged, all, 100*float64(staged)/float64(max(all, 1)))
	}
	fmt.Println("\nPer program: runs per request, ns per run (all blocks).")
	for _, tc := range tracers {
		var parts []string
		for _, name := range slices.Sorted(maps.Keys(tc.byProg)) {
			p := tc.byProg[name]
			if p.ends == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %.2f x %.0f", name, float64(p.ends)/float64(p.reqs), float64(p.all)/float64(p.ends)))
		}
		fmt.Printf("- %s: %s\n", tc.name, strings.Join(parts, ", "))
	}
	// --stages against the same mechanism's plain trace (point 8: at most
	// 1.5x through the kernel's side).
	fmt.Println()
	for _, tc := range tracers {
		plain, side, ok := strings.Cut(tc.name, " --stages")
		if !ok {
			continue
		}
		for _, p := range tracers {
			if p.name == plain {
				fmt.Printf("%s: --stages%s %.2fx the plain trace's programs per request (%.0f / %.0f ns)\n", plain, side, median(tc.per)/median(p.per), median(tc.per), median(p.per))
			}
		}
	}
}

// stageSide names where a --stages tracer stamps requests.
func stageSide(tr *ktrace.Tracer) string {
	progs, _ := tr.ProgramStats()
	for _, p := range progs {
		if strings.HasPrefix(p.Program, "stage:fuse_") && p.Program != "stage:fuse_request_sent" {
			return "kernel side"
		}
	}
	return "system calls"
}

// totals are a tracer's programs' cumulative run time (all, the stage
// programs'), the end program's runs (ends); per program, all and ends
// are that program's time and runs, reqs the requests of its blocks.
type totals struct {
	all, stage time.Duration
	ends, reqs uint64
	byProg     map[string]totals
}

// programTotals sums the tracer's programs' run time (bpf_stats), its
// stage programs' apart, and counts the end program's runs: requests.
func programTotals(t *testing.T, tr *ktrace.Tracer) totals {
	progs, err := tr.ProgramStats()
	if err != nil {
		t.Fatal(err)
	}
	s := totals{byProg: map[string]totals{}}
	for _, p := range progs {
		s.byProg[p.Program] = totals{all: p.Runtime, ends: p.Runs}
		s.all += p.Runtime
		if strings.HasPrefix(p.Program, "stage:") {
			s.stage += p.Runtime
		}
		if p.Program == "fuse_end" {
			s.ends = p.Runs
		}
	}
	return s
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// labStatMount mounts the lab file system (FUSESCOPE_BIN, as the kernel
// matrix's guests have it, else built) over n empty files with its caches
// off, so that every stat is a LOOKUP and a GETATTR, and returns the
// files, the connection and the daemon's process.
func labStatMount(t *testing.T, n int) (files []string, conn uint32, daemons []int) {
	bin := os.Getenv("FUSESCOPE_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "fusescope")
		if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/fusescope").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v %s", err, out)
		}
	}
	src, mnt := t.TempDir(), t.TempDir()
	for i := 0; i < n; i++ {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("f%05d", i)), nil, 0o644)
		files = append(files, filepath.Join(mnt, fmt.Sprintf("f%05d", i)))
	}
	if out, err := exec.Command(bin, "fs", "mount", src, mnt, "--preset", "nocache", "--background").CombinedOutput(); err != nil {
		t.Fatalf("fs mount: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command(bin, "fs", "umount", mnt).Run() })
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); err != nil {
		t.Fatal(err)
	}
	conn = unix.Minor(st.Dev)
	// Conn 0: before 6.13 fdinfo names no connection (RequestSource
	// watches those holders too).
	holders, err := fuseconn.Holders()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range holders {
		if h.Conn == conn || h.Conn == 0 {
			daemons = append(daemons, h.PID)
		}
	}
	if len(daemons) == 0 {
		t.Fatal("no process holds the mount's /dev/fuse")
	}
	return files, conn, daemons
}
