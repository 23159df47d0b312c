// Package bench holds fusescope's benchmarks. They are not tests: `make
// bench` runs them (FUSESCOPE_BENCH=1) and they print the tables that
// docs/performance.md records, as ratios measured in one interleaved run.
package bench

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/stats"
	"github.com/fusescope/fusescope/test/proctest"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"github.com/fusescope/fusescope/internal/ktrace"
	"golang.org/x/sys/unix"
)

// setup prepares a quiet machine: root, tracefs, and the CPUs kept out of
// idle states for the benchmark's duration. On this project's VMs a halted
// vCPU takes tens of microseconds to wake, which made identical 1,000-stat
// blocks vary from 170 to 550 ms; with /dev/cpu_dma_latency held at 0 they
// vary by a few percent (the latency-performance practice of tuned).
func setup(t *testing.T) {
	if os.Getenv("FUSESCOPE_BENCH") == "" {
		t.Skip("benchmark: run with make bench")
	}
	if os.Geteuid() != 0 {
		t.Fatal("benchmarks need root")
	}
	if _, err := ktrace.EnsureTracefs(); err != nil {
		t.Fatal(err)
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile("/dev/cpu_dma_latency", os.O_WRONLY, 0)
	if err != nil {
		// Some VMs have no PM QoS device; their vCPUs' idle states are
		// the host's business, so say so and go on.
		fmt.Printf("note: /dev/cpu_dma_latency not held: %v\n", err)
		return
	}
	binary.Write(f, binary.LittleEndian, int32(0))
	t.Cleanup(func() { f.Close() })
}

// statMount mounts bindfs over n empty files with entry
// and attr timeouts of 0, so that every stat() is a LOOKUP and a GETATTR
// round trip: the worst case for a per-request tracer.
func statMount(t *testing.T, n int) (files []string, conn uint32) {
	src, mnt := t.TempDir(), t.TempDir()
	for i := 0; i < n; i++ {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("f%05d", i)), nil, 0o644)
		files = append(files, filepath.Join(mnt, fmt.Sprintf("f%05d", i)))
	}
	if out, err := exec.Command("bindfs", "-o", "entry_timeout=0,attr_timeout=0", src, mnt).CombinedOutput(); err != nil {
		t.Fatalf("bindfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("fusermount3", "-u", mnt).Run() })
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); err != nil {
		t.Fatal(err)
	}
	return files, unix.Minor(st.Dev)
}

// statBlock stats every file once and returns the elapsed time. Nothing is
// pinned: pinning the workload and the daemon apart forces a cross-CPU wakeup
// per request, which on these VMs is both slow and erratic.
func statBlock(files []string) time.Duration {
	runtime.GC()
	var st syscall.Stat_t
	start := time.Now()
	for _, f := range files {
		syscall.Stat(f, &st)
	}
	return time.Since(start)
}

// settle is the pause before every timed block.
var settle = 50 * time.Millisecond

// pairs runs n pairs of stat blocks over files, one untraced and one
// traced (see pairsOf), and returns traced/untraced per pair.
func pairs(t *testing.T, n int, files []string, arm func() func()) []float64 {
	return pairsOf(n, func() time.Duration { return statBlock(files) }, arm)
}

// pairsOf runs n pairs of blocks, one untraced and one traced, in random
// order within each pair; arm attaches a tracer before the traced block (not
// timed) and returns what detaches it. It returns traced/untraced per pair.
func pairsOf(n int, block func() time.Duration, arm func() func()) []float64 {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	ratios := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		var plain, traced time.Duration
		for _, tracedFirst := range [][]bool{{false, true}, {true, false}}[r.IntN(2)] {
			// Both blocks start after the same pause, so that work the
			// kernel defers after an attach (or anything else) settles.
			if tracedFirst {
				disarm := arm()
				time.Sleep(settle)
				traced = block()
				disarm()
			} else {
				time.Sleep(settle)
				plain = block()
			}
		}
		ratios = append(ratios, float64(traced)/float64(plain))
	}
	return ratios
}

// summary is "| median | geometric mean [95% CI] | min-max |" of ratios. The
// geometric mean is the mean of log ratios, whose noise is symmetric: a pair
// twice as slow and one twice as fast cancel out; the interval uses
// Student's t, as a few pairs call for.
func summary(rs []float64) string {
	s, err := stats.SummariseRatios(rs)
	if err != nil {
		return fmt.Sprintf("| %v | | |", err)
	}
	return fmt.Sprintf("| %.4f | %.4f [%.4f, %.4f] | %.3f-%.3f |", s.Median, s.GeoMean, s.CILow, s.CIHigh, s.Min, s.Max)
}

// summaryOf is "| median | geometric mean [95% CI] |" of ratios.
func summaryOf(rs []float64) string {
	s, err := stats.SummariseRatios(rs)
	if err != nil {
		return fmt.Sprintf("| %v | |", err)
	}
	return fmt.Sprintf("| %.4f | %.4f [%.4f, %.4f] |", s.Median, s.GeoMean, s.CILow, s.CIHigh)
}

// emptyPrograms are two programs that do nothing, for fuse_request_send
// and fuse_request_end: what any tracer of those tracepoints pays, attached
// as attach says (ktrace.AttachBTF or ktrace.AttachTracepoint).
type emptyPrograms struct {
	attach string
	progs  []*ebpf.Program
}

var fuseEvents = []string{"fuse_request_send", "fuse_request_end"}

func newEmptyPrograms(t *testing.T, attach string) emptyPrograms {
	e := emptyPrograms{attach: attach}
	for _, ev := range fuseEvents {
		e.progs = append(e.progs, newProgram(t, attach, ev, asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}))
	}
	return e
}

// newProgram loads insns as a program for the fuse tracepoint ev.
func newProgram(t *testing.T, attach, ev string, insns asm.Instructions) *ebpf.Program {
	spec := &ebpf.ProgramSpec{Type: ebpf.TracePoint, License: "GPL", Instructions: insns}
	if attach == ktrace.AttachBTF {
		spec.Type, spec.AttachType, spec.AttachTo = ebpf.Tracing, ebpf.AttachTraceRawTp, ev
	}
	p, err := ebpf.NewProgram(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// attachProgram attaches p, made by newProgram, to ev.
func attachProgram(t *testing.T, attach, ev string, p *ebpf.Program) link.Link {
	var l link.Link
	var err error
	if attach == ktrace.AttachBTF {
		l, err = link.AttachTracing(link.TracingOptions{Program: p})
	} else {
		l, err = link.Tracepoint("fuse", ev, p, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// arm returns an arm function for pairsOf: it attaches the programs and
// returns what detaches them.
func (e emptyPrograms) arm(t *testing.T) func() func() {
	return func() func() {
		var links []link.Link
		for i, ev := range fuseEvents {
			links = append(links, attachProgram(t, e.attach, ev, e.progs[i]))
		}
		return func() {
			for _, l := range links {
				l.Close()
			}
		}
	}
}

// stats returns the programs' cumulative run time and runs.
func (e emptyPrograms) stats(t *testing.T) func() (time.Duration, uint64) {
	return func() (time.Duration, uint64) {
		var rt time.Duration
		var n uint64
		for _, p := range e.progs {
			st, err := p.Stats()
			if err != nil {
				t.Fatal(err)
			}
			rt, n = rt+st.Runtime, n+st.RunCount
		}
		return rt, n
	}
}

// tracerArm is the arm function of a loaded, paused tracer: each traced
// block attaches it and each untraced one runs detached, so no load,
// verification or map freeing falls into a timed block.
func tracerArm(t *testing.T, tr *ktrace.Tracer) func() func() {
	return func() func() {
		if err := tr.Resume(); err != nil {
			t.Fatal(err)
		}
		return tr.Pause
	}
}

// tracerStats returns the cumulative run time and runs of the tracer's
// programs, or of the one named (fuse_send, fuse_end) if a name is given.
func tracerStats(t *testing.T, tr *ktrace.Tracer, only ...string) func() (time.Duration, uint64) {
	return func() (time.Duration, uint64) {
		progs, err := tr.ProgramStats()
		if err != nil {
			t.Fatal(err)
		}
		var rt time.Duration
		var runs uint64
		for _, p := range progs {
			if len(only) == 0 || slices.Contains(only, p.Program) {
				rt, runs = rt+p.Runtime, runs+p.Runs
			}
		}
		return rt, runs
	}
}

// perEventBlocks runs block k times and returns run_time_ns / run_cnt of
// each run, from the cumulative statistics read returns, and the events
// counted in all. One block's figure depends on where the scheduler put
// the daemon, so callers report the median.
func perEventBlocks(t *testing.T, name string, read func() (time.Duration, uint64), block func(), k int) ([]float64, uint64) {
	var per []float64
	var events uint64
	for range k {
		rt0, n0 := read()
		block()
		rt1, n1 := read()
		if n1 == n0 {
			t.Fatalf("%s: no program runs counted", name)
		}
		per, events = append(per, float64(rt1-rt0)/float64(n1-n0)), events+n1-n0
	}
	return per, events
}

// startProcess runs a tracer process and returns once it says its probes
// are attached (fusescope trace's "Tracing" line, or, for bpftrace, the
// marker probe proctest.BpftraceReady); stop sends SIGINT and waits.
func startProcess(t *testing.T, ready string, name string, args ...string) func() {
	var p *proctest.Process
	if name == "bpftrace" {
		args[len(args)-1] += proctest.BpftraceReady
		p = proctest.StartBpftrace(t, exec.Command(name, args...), 60*time.Second)
	} else {
		p = proctest.Start(t, exec.Command(name, args...), ready, 60*time.Second)
	}
	return func() { p.Interrupt(t, time.Minute) }
}

// bpftraceProg does what fusescope trace does, the bpftrace way: match send
// and end by (connection, unique), one log2 histogram per (connection, opcode).
const bpftraceProg = `tracepoint:fuse:fuse_request_send { @start[args->connection, args->unique] = nsecs; @op[args->connection, args->unique] = args->opcode; }
tracepoint:fuse:fuse_request_end /@start[args->connection, args->unique]/ { @lat[args->connection, @op[args->connection, args->unique]] = hist(nsecs - @start[args->connection, args->unique]); delete(@start[args->connection, args->unique]); delete(@op[args->connection, args->unique]); }`

func TestBenchTraceOverhead(t *testing.T) {
	setup(t)
	bin, _ := filepath.Abs("../../bin/fusescope")
	if _, err := os.Stat(bin); err != nil {
		t.Fatal("build first: make bench builds bin/fusescope")
	}
	const nFiles = 1000
	files, conn := statMount(t, nFiles)
	for i := 0; i < 5; i++ {
		statBlock(files) // warm up
	}
	// The tracer as fusescope trace runs it (tp_btf), and the same
	// programs on the classic tracepoints.
	var tracers [2]*ktrace.Tracer
	for i, attach := range []string{ktrace.AttachBTF, ktrace.AttachTracepoint} {
		tr, err := ktrace.Start(ktrace.Options{Conns: []uint32{conn}, Attach: attach})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		tr.Pause()
		tracers[i] = tr
	}
	tr, classic := tracers[0], tracers[1]

	fmt.Printf("\n### Slowdown of a stat-heavy workload\n\n")
	fmt.Printf("Blocks of %d stat() of distinct files on bindfs with entry/attr timeouts 0 (each stat reaches the daemon), /dev/cpu_dma_latency held at 0, nothing pinned. Each pair runs one untraced and one traced block in random order; ratio = traced / untraced time of the pair.\n\n", nFiles)
	fmt.Println("| tracer | pairs | median ratio | geometric mean ratio [95% CI] | min-max |")
	fmt.Println("|---|---|---|---|---|")
	n, nProcess := 400, 30
	if os.Getenv("FUSESCOPE_BENCH_QUICK") != "" {
		n, nProcess = 20, 5
	}
	if v, err := strconv.Atoi(os.Getenv("FUSESCOPE_BENCH_PAIRS")); err == nil && v > 1 {
		n = v
	}
	fmt.Printf("| untraced vs untraced (the method's noise) | %d %s\n", n, summary(pairs(t, n, files, func() func() { return func() {} })))
	fmt.Printf("| reference: empty programs on the classic tracepoints | %d %s\n", n, summary(pairs(t, n, files, newEmptyPrograms(t, ktrace.AttachTracepoint).arm(t))))
	fmt.Printf("| reference: empty programs on the raw tracepoints (tp_btf) | %d %s\n", n, summary(pairs(t, n, files, newEmptyPrograms(t, ktrace.AttachBTF).arm(t))))
	fmt.Printf("| fusescope's BPF programs on the classic tracepoints (--attach tracepoint) | %d %s\n", n, summary(pairs(t, n, files, tracerArm(t, classic))))
	fmt.Printf("| fusescope's BPF programs on tp_btf (the default; loaded once, attached for traced blocks) | %d %s\n", n, summary(pairs(t, n, files, tracerArm(t, tr))))
	fmt.Printf("| `fusescope trace --mount` (process) | %d %s\n", nProcess, summary(pairs(t, nProcess, files, func() func() {
		return startProcess(t, "Tracing", bin, "trace", "--mount", filepath.Dir(files[0]), "-o", os.DevNull)
	})))
	_, noBpftrace := exec.LookPath("bpftrace")
	if noBpftrace == nil {
		fmt.Printf("| bpftrace, same aggregation (process) | %d %s\n", nProcess, summary(pairs(t, nProcess, files, func() func() {
			return startProcess(t, "", "bpftrace", "-e", bpftraceProg)
		})))
	} else {
		// make bench installs bpftrace; a machine it cannot reach
		// (the device machine) runs the rest.
		fmt.Println("| bpftrace, same aggregation (process) | not installed here | | | |")
	}

	// One block's figure moved by 20% from run to run: each program is
	// measured over several blocks and the median reported.
	blocks := 15
	if os.Getenv("FUSESCOPE_BENCH_QUICK") != "" {
		blocks = 3
	}
	fmt.Printf("\n### BPF cost per event (kernel.bpf_stats_enabled)\n\n")
	fmt.Printf("run_time_ns / run_cnt of each of %d blocks of %d stat(); the median and the range.\n\n", blocks, nFiles)
	fmt.Println("| program | events | run_time_ns / run_cnt, median | min-max |")
	fmt.Println("|---|---|---|---|")
	setBPFStats(t, true)
	defer setBPFStats(t, false)
	report := func(name string, read func() (time.Duration, uint64)) {
		per, events := perEventBlocks(t, name, read, func() { statBlock(files) }, blocks)
		fmt.Printf("| %s | %d | %.0f ns | %.0f-%.0f |\n", name, events, stats.Median(per), slices.Min(per), slices.Max(per))
	}
	for _, cal := range []struct {
		name  string
		insns asm.Instructions
	}{
		{"reference: empty program, tp_btf (accounting floor)", asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}},
		{"reference: one bpf_ktime_get_ns(), tp_btf", asm.Instructions{asm.FnKtimeGetNs.Call(), asm.Mov.Imm(asm.R0, 0), asm.Return()}},
	} {
		prog := newProgram(t, ktrace.AttachBTF, fuseEvents[0], cal.insns)
		l := attachProgram(t, ktrace.AttachBTF, fuseEvents[0], prog)
		report(cal.name, func() (time.Duration, uint64) {
			st, err := prog.Stats()
			if err != nil {
				t.Fatal(err)
			}
			return st.Runtime, st.RunCount
		})
		l.Close()
		prog.Close()
	}
	if err := classic.Resume(); err != nil {
		t.Fatal(err)
	}
	report("fusescope on the classic tracepoints (fuse_send + fuse_end)", tracerStats(t, classic))
	classic.Pause()
	if err := tr.Resume(); err != nil {
		t.Fatal(err)
	}
	report("fusescope on tp_btf (fuse_send_btf + fuse_end_btf)", tracerStats(t, tr))
	report("fusescope on tp_btf: fuse_send_btf alone", tracerStats(t, tr, "fuse_send"))
	report("fusescope on tp_btf: fuse_end_btf alone", tracerStats(t, tr, "fuse_end"))
	tr.Pause()

	if noBpftrace != nil {
		fmt.Println("| bpftrace, same aggregation | not installed here | | |")
	} else {
		before := progs(t)
		stop := startProcess(t, "", "bpftrace", "-e", bpftraceProg)
		report("bpftrace, same aggregation", func() (time.Duration, uint64) {
			var ns, cnt uint64
			for id, p := range progs(t) {
				if _, old := before[id]; !old && p.Type == "tracepoint" {
					ns += p.RunTimeNs
					cnt += p.RunCnt
				}
			}
			return time.Duration(ns), cnt
		})
		stop()
	}

	if err := tr.Resume(); err != nil {
		t.Fatal(err)
	}
	placements(t, tr, files, blocks)
	tr.Pause()
}

// TestBenchTracePerEvent measures only the per-event cost by placement, as
// the end of TestBenchTraceOverhead does (about 20 s): the quick way to
// compare two builds, running their test binaries in turn.
func TestBenchTracePerEvent(t *testing.T) {
	setup(t)
	files, conn := statMount(t, 1000)
	for i := 0; i < 5; i++ {
		statBlock(files) // warm up
	}
	tr, err := ktrace.Start(ktrace.Options{Conns: []uint32{conn}, Attach: ktrace.AttachBTF})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	setBPFStats(t, true)
	defer setBPFStats(t, false)
	placements(t, tr, files, 9)
}

type progStat struct {
	ID        int    `json:"id"`
	Type      string `json:"type"`
	RunTimeNs uint64 `json:"run_time_ns"`
	RunCnt    uint64 `json:"run_cnt"`
}

// progs lists loaded BPF programs with their statistics (bpftool).
func progs(t *testing.T) map[int]progStat {
	out, err := exec.Command("bpftool", "-j", "prog", "show").Output()
	if err != nil {
		t.Fatalf("bpftool prog show: %v", err)
	}
	var list []progStat
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatal(err)
	}
	m := map[int]progStat{}
	for _, p := range list {
		m[p.ID] = p
	}
	return m
}

func setBPFStats(t *testing.T, on bool) {
	v := "0"
	if on {
		v = "1"
	}
	if err := os.WriteFile("/proc/sys/kernel/bpf_stats_enabled", []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
}

// placements measures fusescope's cost per event with the application and
// the daemon held on one CPU, then on two: a request is sent on the
// application's CPU and ended on the daemon's, and the in-flight slot the
// two share is the only memory the programs do not keep to one CPU.
func placements(t *testing.T, tr *ktrace.Tracer, files []string, blocks int) {
	daemon := daemonThreads(t, filepath.Dir(files[0]))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer pin(t, nil, -1)
	defer pin(t, daemon, -1)
	fmt.Printf("\n### Per event, by where the application and the daemon run\n\n")
	fmt.Printf("The same blocks with the benchmark's thread and every bindfs thread pinned (sched_setaffinity); median and range of %d blocks.\n\n", blocks)
	fmt.Println("| placement | fuse_send: ns, median | fuse_end: ns, median | both: ns per event, median | min-max |")
	fmt.Println("|---|---|---|---|---|")
	for _, p := range []struct {
		name          string
		app, daemonAt int
	}{{"application and daemon on CPU 0", 0, 0}, {"application on CPU 0, daemon on CPU 1", 0, 1}} {
		if p.daemonAt >= runtime.NumCPU() {
			continue
		}
		pin(t, nil, p.app)
		pin(t, daemon, p.daemonAt)
		statBlock(files)
		var send, end, both []float64
		for range blocks {
			before, err := tr.ProgramStats()
			if err != nil {
				t.Fatal(err)
			}
			statBlock(files)
			after, err := tr.ProgramStats()
			if err != nil {
				t.Fatal(err)
			}
			perRun := func(i ...int) float64 {
				var ns, runs float64
				for _, j := range i {
					ns += float64(after[j].Runtime - before[j].Runtime)
					runs += float64(after[j].Runs - before[j].Runs)
				}
				return ns / runs
			}
			send, end, both = append(send, perRun(0)), append(end, perRun(1)), append(both, perRun(0, 1))
		}
		fmt.Printf("| %s | %.0f | %.0f | %.0f | %.0f-%.0f |\n", p.name, stats.Median(send), stats.Median(end), stats.Median(both), slices.Min(both), slices.Max(both))
	}
}

// daemonThreads returns the thread ids of the bindfs that serves mnt.
func daemonThreads(t *testing.T, mnt string) []int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range procs {
		b, err := os.ReadFile(c)
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if filepath.Base(args[0]) != "bindfs" || !slices.Contains(args, mnt) {
			continue
		}
		tasks, _ := filepath.Glob(filepath.Join(filepath.Dir(c), "task", "*"))
		var tids []int
		for _, task := range tasks {
			if tid, err := strconv.Atoi(filepath.Base(task)); err == nil {
				tids = append(tids, tid)
			}
		}
		return tids
	}
	t.Fatalf("no bindfs process serves %s", mnt)
	return nil
}

// pin holds the threads (the calling one if tids is nil) on cpu, or lets
// them run anywhere if cpu is -1.
func pin(t *testing.T, tids []int, cpu int) {
	var set unix.CPUSet
	if cpu < 0 {
		for i := range runtime.NumCPU() {
			set.Set(i)
		}
	} else {
		set.Set(cpu)
	}
	if tids == nil {
		tids = []int{0}
	}
	for _, tid := range tids {
		// A worker thread bindfs let go of since is no error.
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			t.Fatalf("pinning thread %d: %v", tid, err)
		}
	}
}
