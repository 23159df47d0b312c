package bench

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/stats"
	"github.com/fusescope/fusescope/test/proctest"
)

// liveProgram is a system-call-heavy program the live source is measured on.
type liveProgram struct {
	name string
	argv []string
}

var livePrograms = []liveProgram{
	// 200,000 one-byte reads and writes: the cheapest calls there are, the
	// worst case for any per-call tracer.
	{"dd bs=1 (200k tiny calls)", []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=100000"}},
	// Metadata: getdents64, newfstatat, openat, close over a tree.
	{"find /usr/share", []string{"find", "/usr/share", "-name", "nothing-matches-this"}},
	// The same over a larger tree: long enough for this VM's noise to
	// average out (a quarter of a million calls).
	{"find /usr", []string{"find", "/usr", "-name", "nothing-matches-this"}},
	// File reads: open, read, close of every file of a tree.
	{"grep -r /usr/share/doc", []string{"grep", "-r", "nothing-matches-this", "/usr/share/doc"}},
}

// runPlain is the untraced run: fork, exec, wait.
func runPlain(t *testing.T, argv []string) float64 {
	cmd := exec.Command(argv[0], argv[1:]...)
	start := time.Now()
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("%v: %v", argv, err)
		}
	}
	return time.Since(start).Seconds()
}

// runLive runs argv under fusescope syscalls and returns the command's own
// run time (exec to exit, without loading and attaching) and its calls.
func runLive(t *testing.T, bin string, argv []string, empty bool) (float64, int) {
	out := filepath.Join(t.TempDir(), "r.json")
	cmd := exec.Command(bin, append([]string{"syscalls", "--json", "-o", out, "--"}, argv...)...)
	if empty {
		cmd.Env = append(os.Environ(), "FUSESCOPE_BENCH_EMPTY_PROGRAMS=1")
	}
	// fusescope exits with the command's status (grep -r finds nothing:
	// 1); the report says whether the trace itself went wrong.
	msg, err := cmd.CombinedOutput()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := profile.Parse(data)
	if err != nil || rec.Syscalls == nil || rec.Syscalls.Live == nil {
		t.Fatalf("%s: %v\n%s", out, err, msg)
	}
	r := rec.Syscalls
	calls := 0
	for _, s := range r.Syscalls {
		calls += s.Calls
	}
	return r.Live.CommandS, calls
}

// TestBenchSyscallsLive measures the live source's slowdown of
// system-call-heavy programs: untraced, traced, and traced by programs
// that return at once (the floor: what attaching to the raw syscall
// tracepoints costs before any work), interleaved in random order, and
// strace -f once.
func TestBenchSyscallsLive(t *testing.T) {
	setup(t)
	bin, _ := filepath.Abs("../../bin/fusescope")
	reps := 9
	if os.Getenv("FUSESCOPE_BENCH_QUICK") != "" {
		reps = 3
	}
	fmt.Printf("\nLive system-call source: the command's own run time (exec to exit), %d interleaved repetitions in random order, /dev/cpu_dma_latency held at 0; ratio = median traced / median untraced.\n\n", reps)
	fmt.Println("| program | calls | untraced (s) | fusescope syscalls -- | empty programs (floor) | strace -f -o /dev/null (1 run) |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, p := range livePrograms {
		if _, err := exec.LookPath(p.argv[0]); err != nil {
			t.Fatalf("%s: %v", p.argv[0], err)
		}
		runPlain(t, p.argv) // warm the page and dentry caches
		var plain, live, empty []float64
		calls := 0
		for i := 0; i < reps; i++ {
			for _, k := range rand.Perm(3) {
				switch k {
				case 0:
					plain = append(plain, runPlain(t, p.argv))
				case 1:
					s, n := runLive(t, bin, p.argv, false)
					live, calls = append(live, s), n
				case 2:
					s, _ := runLive(t, bin, p.argv, true)
					empty = append(empty, s)
				}
			}
		}
		straced := runPlain(t, append([]string{"strace", "-f", "-o", "/dev/null"}, p.argv...))
		base := stats.Median(plain)
		fmt.Printf("| %s | %d | %.4f | %.2fx (%.2f-%.2f) | %.2fx | %.0fx |\n", p.name, calls, base,
			stats.Median(live)/base, slices.Min(live)/base, slices.Max(live)/base, stats.Median(empty)/base, straced/base)
	}
	fmt.Println()
	fmt.Println("Commands:", strings.Join([]string{"make bench (TestBenchSyscallsLive)"}, ""))
}

// runWhole times a whole process, from fork to its exit.
func runWhole(t *testing.T, argv []string, dir string) float64 {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	start := time.Now()
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", argv, err, msg)
	}
	return time.Since(start).Seconds()
}

// TestBenchSyscallsLiveShort measures short commands end to end (the whole
// traced process, set-up and read-out included, as a user waits for it):
// untraced, under fusescope syscalls, strace -f and bpftrace counting the
// command's calls, interleaved in random order; and the live source's own
// set-up (setup_s: loading and attaching its programs). Two floors run
// with them: a Go process that runs the command, and one that loads and
// attaches a program that does nothing first (tracefloor).
func TestBenchSyscallsLiveShort(t *testing.T) {
	setup(t)
	bin, _ := filepath.Abs("../../bin/fusescope")
	reps := 15
	if os.Getenv("FUSESCOPE_BENCH_QUICK") != "" {
		reps = 3
	}
	// A repository of 300 committed files for git status.
	repo := t.TempDir()
	for i := 0; i < 300; i++ {
		if err := os.WriteFile(filepath.Join(repo, fmt.Sprintf("f%03d.c", i)), []byte("int x;\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range [][]string{{"git", "init", "-q"}, {"git", "add", "."}, {"git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "x"}} {
		runWhole(t, c, repo)
	}
	// A script file, not sh -c: bpftrace -c splits its command at spaces.
	script := filepath.Join(repo, "ls8.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nfor i in 1 2 3 4 5 6 7 8; do ls /usr/bin >/dev/null; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	commands := []struct {
		name string
		argv []string
	}{
		{"true", []string{"true"}},
		{"git status (300 files)", []string{"git", "status"}},
		{"python3 -c pass", []string{"/usr/bin/python3", "-c", "pass"}},
		{"sh script: ls /usr/bin x8", []string{"/bin/sh", script}},
	}
	floor := filepath.Join(t.TempDir(), "tracefloor")
	if out, err := exec.Command("go", "build", "-o", floor, "./tracefloor").CombinedOutput(); err != nil {
		t.Fatalf("building the floor: %v %s", err, out)
	}
	// A server that keeps the programs loaded: the runs on it only attach.
	sock := filepath.Join(t.TempDir(), "syscalls.sock")
	server := proctest.Start(t, exec.Command(bin, "syscalls", "--serve", "--socket", sock), "Serving", 30*time.Second)
	defer server.Interrupt(t, 10*time.Second)
	tools := []struct {
		name string
		wrap func(argv []string) []string
	}{
		{"untraced", func(a []string) []string { return a }},
		// The floors: a Go process that runs the command, and one that
		// first loads and attaches one empty tp_btf program.
		{"floor: Go runner", func(a []string) []string { return append([]string{floor, "run"}, a...) }},
		{"floor: one empty eBPF program", func(a []string) []string { return append([]string{floor, "bpf"}, a...) }},
		// What any run of fusescope costs before it traces: its binary
		// starting and exiting (the command is not run).
		{"fusescope --version alone", func([]string) []string { return []string{bin, "--version"} }},
		{"fusescope syscalls", func(a []string) []string {
			return append([]string{bin, "syscalls", "--no-server", "-o", "/dev/null", "--"}, a...)
		}},
		{"fusescope syscalls, --serve running", func(a []string) []string {
			return append([]string{bin, "syscalls", "--socket", sock, "-o", "/dev/null", "--"}, a...)
		}},
		{"strace -f", func(a []string) []string { return append([]string{"strace", "-f", "-o", "/dev/null"}, a...) }},
		{"bpftrace (count)", func(a []string) []string {
			path, err := exec.LookPath(a[0])
			if err != nil {
				t.Fatal(err)
			}
			return []string{"bpftrace", "-q", "-e", "tracepoint:raw_syscalls:sys_enter /pid == cpid/ { @calls = count(); }", "-c", strings.Join(append([]string{path}, a[1:]...), " ")}
		}},
	}
	fmt.Printf("\nShort commands end to end (fork to exit of the whole traced process), %d interleaved repetitions in random order; median seconds and ratio to the untraced median [min-max ratio].\n\n", reps)
	fmt.Printf("| command | untraced (s) |")
	for _, tool := range tools[1:] {
		fmt.Printf(" %s |", tool.name)
	}
	fmt.Printf("\n|---|---|%s\n", strings.Repeat("---|", len(tools)-1))
	var setups, served []float64
	for _, c := range commands {
		times := make([][]float64, len(tools))
		runWhole(t, c.argv, repo) // warm the caches
		for i := 0; i < reps; i++ {
			for _, k := range rand.Perm(len(tools)) {
				times[k] = append(times[k], runWhole(t, tools[k].wrap(c.argv), repo))
			}
		}
		base := stats.Median(times[0])
		fmt.Printf("| %s | %.4f |", c.name, base)
		for k := range tools[1:] {
			x := times[k+1]
			fmt.Printf(" %.4f s, %.1fx [%.1f-%.1f] |", stats.Median(x), stats.Median(x)/base, slices.Min(x)/base, slices.Max(x)/base)
		}
		fmt.Println()
		out := filepath.Join(t.TempDir(), "r.json")
		for i := 0; i < 6; i++ {
			args, into := []string{bin, "syscalls", "--no-server", "--json", "-o", out, "--"}, &setups
			if i%2 == 1 {
				args, into = []string{bin, "syscalls", "--socket", sock, "--json", "-o", out, "--"}, &served
			}
			runWhole(t, append(args, c.argv...), repo)
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := profile.Parse(data)
			if err != nil || rec.Syscalls == nil || rec.Syscalls.Live == nil {
				t.Fatalf("%s: %v", out, err)
			}
			if (rec.Syscalls.Live.LoadedBy != "") != (i%2 == 1) {
				t.Fatalf("run %d: loaded_by %q", i, rec.Syscalls.Live.LoadedBy)
			}
			*into = append(*into, rec.Syscalls.Live.SetupS)
		}
	}
	fmt.Printf("\nThe live source's set-up (setup_s), %d runs each: loading and attaching its programs: median %.1f ms, min %.1f, max %.1f; attaching a server's (--serve), as the client waits for it: median %.2f ms, min %.2f, max %.2f.\n",
		len(setups), 1000*stats.Median(setups), 1000*slices.Min(setups), 1000*slices.Max(setups),
		1000*stats.Median(served), 1000*slices.Min(served), 1000*slices.Max(served))
}
