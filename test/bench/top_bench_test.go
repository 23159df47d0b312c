package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cpuSeconds is a process's user and system CPU time so far.
func cpuSeconds(t *testing.T, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64) // utime, stime: fields 14 and 15
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// fuseProgramSeconds sums the kernel's run time of the loaded programs
// whose names start with fuse_ (the tracer's).
func fuseProgramSeconds(t *testing.T) float64 {
	out, err := exec.Command("bpftool", "prog", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, " name fuse_") {
			continue
		}
		f := strings.Fields(line)
		for i := range f {
			if f[i] == "run_time_ns" && i+1 < len(f) {
				ns, _ := strconv.ParseFloat(f[i+1], 64)
				total += ns / 1e9
			}
		}
	}
	return total
}

// TestBenchTopCost measures what fusescope top's refresh costs against the
// trace it shows: top's own CPU time (its process: reading the maps each
// interval, drawing the screen in a tmux pane) and the kernel's time in the
// tracer's BPF programs, over the same 10 s of a stat-heavy workload
// (bindfs, entry and attr timeouts 0); beside it, trace 1 printing text.
func TestBenchTopCost(t *testing.T) {
	setup(t)
	bin, _ := filepath.Abs("../../bin/fusescope")
	files, _ := statMount(t, 2000)
	mnt := filepath.Dir(files[0])
	setBPFStats(t, true)
	defer setBPFStats(t, false)
	const seconds = 10
	measure := func(name string, start func() (pid int, stop func())) {
		pid, stop := start()
		defer stop()
		time.Sleep(1500 * time.Millisecond) // loaded, first interval drawn
		cpu0, bpf0, t0 := cpuSeconds(t, pid), fuseProgramSeconds(t), time.Now()
		stats := 0
		for time.Since(t0) < seconds*time.Second {
			statBlock(files)
			stats += len(files)
		}
		el := time.Since(t0).Seconds()
		cpu, bpf := (cpuSeconds(t, pid)-cpu0)/el, (fuseProgramSeconds(t)-bpf0)/el
		fmt.Printf("| %s | %.0f | %.4f | %.4f | %.2f |\n", name, float64(stats)/el, cpu, bpf, cpu/bpf)
	}
	fmt.Printf("\nfusescope top against the trace it shows: CPU seconds per second over %d s of stats on bindfs (2,000 files, timeouts 0), kernel.bpf_stats_enabled on.\n\n", seconds)
	fmt.Println("| viewer | stats/s | viewer CPU (s/s) | tracer's BPF programs (s/s) | viewer / programs |")
	fmt.Println("|---|---|---|---|---|")
	measure("fusescope top --interval 1s (tmux 120x40)", func() (int, func()) {
		sock := filepath.Join(t.TempDir(), "tmux.sock")
		cmd := fmt.Sprintf("%s top --mount %s --interval 1s", bin, mnt)
		if out, err := exec.Command("tmux", "-S", sock, "new-session", "-d", "-x", "120", "-y", "40", cmd).CombinedOutput(); err != nil {
			t.Fatalf("tmux: %v %s", err, out)
		}
		var pid int
		for deadline := time.Now().Add(10 * time.Second); pid == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if out, err := exec.Command("pgrep", "-f", "^"+bin+" top --mount "+mnt).Output(); err == nil {
				pid, _ = strconv.Atoi(strings.Fields(string(out))[0])
			}
		}
		if pid == 0 {
			t.Fatal("top did not start")
		}
		return pid, func() {
			exec.Command("tmux", "-S", sock, "send-keys", "q").Run()
			time.Sleep(500 * time.Millisecond)
			exec.Command("tmux", "-S", sock, "kill-server").Run()
		}
	})
	measure("fusescope trace --mount MNT 1 > /dev/null", func() (int, func()) {
		cmd := exec.Command(bin, "trace", "--mount", mnt, "1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd.Process.Pid, func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }
	})
	fmt.Printf("\nTarget: top's refresh costs no more than the trace it shows (viewer / programs at most 1). Command: make bench (TestBenchTopCost).\n")
}
