// Package bench holds fusescope's benchmarks. They are not tests: `make
// bench` runs them (FUSESCOPE_BENCH=1) and they print the tables that
// docs/performance.md records, with ratios measured in one interleaved run.
package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"github.com/fusescope/fusescope/internal/ktrace"
	"golang.org/x/sys/unix"
)

func enabled(t *testing.T) {
	if os.Getenv("FUSESCOPE_BENCH") == "" {
		t.Skip("benchmark: run with make bench")
	}
	if os.Geteuid() != 0 {
		t.Fatal("benchmarks need root")
	}
	if _, err := ktrace.EnsureTracefs(); err != nil {
		t.Fatal(err)
	}
}

// tracerConfig is one way of watching the workload.
type tracerConfig struct {
	name  string
	start func(t *testing.T, mnt string) (stop func())
}

// bpftraceProg does what fusescope trace does, the bpftrace way: match send
// and end by (connection, unique), one log2 histogram per (connection, opcode).
const bpftraceProg = `tracepoint:fuse:fuse_request_send { @start[args->connection, args->unique] = nsecs; @op[args->connection, args->unique] = args->opcode; }
tracepoint:fuse:fuse_request_end /@start[args->connection, args->unique]/ { @lat[args->connection, @op[args->connection, args->unique]] = hist(nsecs - @start[args->connection, args->unique]); delete(@start[args->connection, args->unique]); delete(@op[args->connection, args->unique]); }`

// startAndWait runs cmd and returns once a line of its output starts with
// readyPrefix (the probes are attached then).
func startAndWait(t *testing.T, cmd *exec.Cmd, readyPrefix string) func() {
	t.Helper()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = io.Discard, pw
	if readyPrefix == "Attaching" {
		cmd.Stdout = pw
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), readyPrefix) {
				ready <- true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("%v did not attach", cmd.Args)
	}
	time.Sleep(300 * time.Millisecond)
	return func() {
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
		pw.Close()
	}
}

func configs(bin string) []tracerConfig {
	return []tracerConfig{
		{"untraced", func(*testing.T, string) func() { return func() {} }},
		{"fusescope trace", func(t *testing.T, mnt string) func() {
			return startAndWait(t, exec.Command("taskset", "-c", "1", bin, "trace", "--mount", mnt, "-o", os.DevNull), "Tracing")
		}},
		{"bpftrace", func(t *testing.T, mnt string) func() {
			return startAndWait(t, exec.Command("taskset", "-c", "1", "bpftrace", "-e", bpftraceProg), "Attaching")
		}},
	}
}

// statWorkload stats every file passes times on CPU 0 (the daemon and the
// tracers run on CPU 1) and returns the elapsed time.
func statWorkload(files []string, passes int) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu0 unix.CPUSet
	cpu0.Set(0)
	unix.SchedSetaffinity(0, &cpu0)
	var st syscall.Stat_t
	start := time.Now()
	for p := 0; p < passes; p++ {
		for _, f := range files {
			syscall.Stat(f, &st)
		}
	}
	return time.Since(start)
}

type progStat struct {
	ID        int    `json:"id"`
	Name      string `json:"name"`
	Type      string `json:"type"`
	RunTimeNs uint64 `json:"run_time_ns"`
	RunCnt    uint64 `json:"run_cnt"`
}

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

type calibration struct {
	name  string
	insns asm.Instructions
}

// calibrations are reference programs measured on the same tracepoint in
// the same run: the floor that bpf_stats accounting itself costs, and what
// reading the clock costs on this machine.
func calibrations(t *testing.T) []calibration {
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	return []calibration{
		{"reference: empty program (accounting floor)", asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}},
		{"reference: one bpf_ktime_get_ns()", asm.Instructions{asm.FnKtimeGetNs.Call(), asm.Mov.Imm(asm.R0, 0), asm.Return()}},
	}
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

func TestBenchTraceOverhead(t *testing.T) {
	enabled(t)
	bin, err := filepath.Abs("../../bin/fusescope")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatal("build first: make bench builds bin/fusescope")
	}
	const nFiles, passes, reps = 2000, 3, 15
	src, mnt := t.TempDir(), t.TempDir()
	files := make([]string, nFiles)
	for i := range files {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("f%05d", i)), []byte("x"), 0o644)
		files[i] = filepath.Join(mnt, fmt.Sprintf("f%05d", i))
	}
	// Timeouts of 0: every stat is a LOOKUP and a GETATTR round trip to the
	// daemon, the worst case for a per-request tracer.
	if out, err := exec.Command("taskset", "-c", "1", "bindfs", "-o", "entry_timeout=0,attr_timeout=0", src, mnt).CombinedOutput(); err != nil {
		t.Fatalf("bindfs: %v %s", err, out)
	}
	defer exec.Command("fusermount3", "-u", mnt).Run()
	statWorkload(files, 1) // warm the daemon and the dentry cache

	cfgs := configs(bin)
	times := map[string][]time.Duration{}
	ratios := map[string][]float64{}
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for rep := 0; rep < reps; rep++ {
		order := r.Perm(len(cfgs))
		got := map[string]time.Duration{}
		for _, i := range order {
			c := cfgs[i]
			stop := c.start(t, mnt)
			runtime.GC()
			got[c.name] = statWorkload(files, passes)
			stop()
		}
		for name, d := range got {
			times[name] = append(times[name], d)
			ratios[name] = append(ratios[name], float64(d)/float64(got["untraced"]))
		}
	}
	fmt.Printf("\n### Tracer overhead on a stat-heavy workload\n\n")
	fmt.Printf("%d stat() of distinct files per run on bindfs (entry/attr timeout 0, so every stat reaches the daemon; the reference programs below count the requests), workload on CPU 0, daemon and tracer on CPU 1, %d interleaved repetitions in random order; ratio = run time / untraced run time of the same repetition.\n\n", nFiles*passes, reps)
	fmt.Println("| configuration | median run time | median ratio to untraced | min ratio | max ratio |")
	fmt.Println("|---|---|---|---|---|")
	for _, c := range cfgs {
		ts := slices.Clone(times[c.name])
		slices.Sort(ts)
		rs := slices.Clone(ratios[c.name])
		slices.Sort(rs)
		fmt.Printf("| %s | %v | %.3f | %.3f | %.3f |\n", c.name, ts[len(ts)/2].Round(time.Millisecond), rs[len(rs)/2], rs[0], rs[len(rs)-1])
	}

	// Per-event cost: one more run per tracer with kernel.bpf_stats_enabled,
	// reading run_time_ns / run_cnt of the programs that tracer loaded.
	fmt.Printf("\n### BPF cost per event (kernel.bpf_stats_enabled)\n\n")
	fmt.Println("| program | events | run_time_ns / run_cnt |")
	fmt.Println("|---|---|---|")
	setBPFStats(t, true)
	defer setBPFStats(t, false)
	for _, cal := range calibrations(t) {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.TracePoint, License: "GPL", Instructions: cal.insns})
		if err != nil {
			t.Fatal(err)
		}
		l, err := link.Tracepoint("fuse", "fuse_request_send", prog, nil)
		if err != nil {
			t.Fatal(err)
		}
		statWorkload(files, passes)
		st, err := prog.Stats()
		l.Close()
		prog.Close()
		if err != nil || st.RunCount == 0 {
			t.Fatalf("%s: no statistics: %v", cal.name, err)
		}
		fmt.Printf("| %s | %d | %.0f ns |\n", cal.name, st.RunCount, float64(st.Runtime.Nanoseconds())/float64(st.RunCount))
	}
	for _, c := range cfgs[1:] {
		before := progs(t)
		stop := c.start(t, mnt)
		statWorkload(files, passes)
		after := progs(t)
		stop()
		var ns, cnt uint64
		for id, p := range after {
			if _, old := before[id]; !old && p.Type == "tracepoint" {
				ns += p.RunTimeNs
				cnt += p.RunCnt
			}
		}
		if cnt == 0 {
			t.Fatalf("%s: no program runs counted", c.name)
		}
		fmt.Printf("| %s | %d | %.0f ns |\n", c.name, cnt, float64(ns)/float64(cnt))
	}
}
