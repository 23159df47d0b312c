package cli

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/test/e2e"
)

// benchMounts lists what is mounted under the scratch directories of the
// benches given --scratch-dir dir: this test's own, not another bench's on
// the machine.
func benchMounts(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, filepath.Join(dir, "fusescope-bench-")) {
			out = append(out, line)
		}
	}
	return out
}

// The quick preset end to end, two rounds: every run is there with its
// figures and its trace, and the traces hold exactly the requests the
// workloads make where the kernel caches nothing (the lab file system
// with direct_io and timeouts 0): a CREATE and an UNLINK per file of the
// tree, and the file's bytes read by each cat. The summaries compare every
// configuration with the baseline, and nothing is left mounted.
func TestBenchQuickPreset(t *testing.T) {
	t.Parallel()
	e2e.DropsCaches(t) // bench drops the kernel's caches before its cold runs, every mount's
	rec, scratch := filepath.Join(t.TempDir(), "bench.json"), t.TempDir()
	cmd := exec.Command(e2e.Fusescope, "bench", "--preset", "quick", "-n", "2", "--seed", "7", "-o", rec, "--scratch-dir", scratch)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	r := e2e.LoadRecord(t, rec)
	b := r.Bench
	if b == nil || b.Rounds != 2 || len(b.Runs) != 2*3*2 || !b.Traced {
		t.Fatalf("record: %+v", b)
	}
	for _, run := range b.Runs {
		if run.Error != "" || len(run.Metrics) == 0 || run.Metrics[0].Value <= 0 {
			t.Errorf("run %+v: want figures and no error", run)
		}
		if run.Configuration != "labfs-nocache" {
			continue
		}
		if run.Requests == nil {
			t.Fatalf("run %d of %s on %s has no trace", run.Seq, run.Workload, run.Configuration)
		}
		count := func(op fuseproto.Opcode) (n, bytes uint64) {
			for _, s := range run.Requests.Ops {
				if fuseproto.Opcode(s.Opcode) == op {
					n += s.Count
					bytes += s.ReplyBytes
				}
			}
			return
		}
		switch run.Workload {
		case "tree":
			c, _ := count(fuseproto.Create)
			u, _ := count(fuseproto.Unlink)
			if c != 300 || u != 300 {
				t.Errorf("tree on nocache: %d CREATEs and %d UNLINKs traced, the workload made 300 of each", c, u)
			}
		case "cat":
			// Replies count their 16-byte headers; under direct_io each
			// of cat's reads of 128 KiB is a READ, and one more finds
			// the end.
			n, bytes := count(fuseproto.Read)
			if bytes-16*n != 2*16<<20 || n != 2*(128+1) {
				t.Errorf("cat on nocache: %d READs of %d bytes (headers included) traced, the workload read 2 x 16 MiB in reads of 128 KiB", n, bytes)
			}
		}
	}
	// A run's extremes are its own, exact (once 30-40% sat on a
	// bucket's edge, LOOKUP count 2, sum 40,602,005 ns, max 37,770,625,
	// min 2,097,152): where a run made one or two requests of an opcode,
	// its sum tells what they were.
	checked := 0
	for _, run := range b.Runs {
		if run.Requests == nil {
			continue
		}
		for _, s := range run.Requests.Ops {
			h := s.Latency
			switch {
			case h.Count == 1 && (h.Min != h.Sum || h.Max != h.Sum):
				t.Errorf("run %d, %s: one request of %d ns, but min %d and max %d", run.Seq, s.Op, h.Sum, h.Min, h.Max)
			case h.Count == 2 && h.Min+h.Max != h.Sum:
				t.Errorf("run %d, %s: two requests of %d ns in all, but min %d and max %d", run.Seq, s.Op, h.Sum, h.Min, h.Max)
			}
			if h.Count <= 2 {
				checked++
			}
		}
	}
	if checked == 0 {
		t.Error("no run made one or two requests of an opcode: the extremes went unchecked")
	}
	var compared int
	for _, res := range b.Results {
		if res.Summary.N != 2 {
			t.Errorf("result %s/%s on %s: %d values, want 2", res.Workload, res.Metric, res.Configuration, res.Summary.N)
		}
		if res.Configuration == "native" {
			if res.VsBaseline != nil {
				t.Errorf("the baseline compared with itself: %+v", res)
			}
			continue
		}
		if res.VsBaseline == nil || !res.VsBaseline.Paired || res.VsBaseline.Ratio <= 0 {
			t.Errorf("result %s/%s on %s: no paired comparison with native: %+v", res.Workload, res.Metric, res.Configuration, res.VsBaseline)
		}
		compared++
	}
	if compared == 0 {
		t.Error("nothing was compared with the baseline")
	}
	for _, want := range []string{"cat: read (MiB/s, higher is better)", "vs native [95% CI]", "labfs-nocache", "~"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the table lacks %q", want)
		}
	}
	if m := benchMounts(t, scratch); len(m) > 0 {
		t.Errorf("left mounted: %v", m)
	}
}

// Bad input and failures: one line each, and the rest of the matrix goes
// on where it can.
func TestBenchErrors(t *testing.T) {
	t.Parallel()
	e2e.DropsCaches(t) // bench drops the kernel's caches before its cold runs, every mount's
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	for _, c := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"bad key", []string{write("key.yaml", "repetitions: 2\nconfigurations:\n  - name: a\n    nativ: true\n")}, nil, `key.yaml, line 4: configuration "a" has no key "nativ": did you mean native?`},
		{"bad value", []string{write("value.yaml", "workloads:\n  - name: c\n    cat: {size: 1m, times: five}\n")}, nil, `value.yaml, line 3: workload "c"'s cat's times is "five", not a whole number, such as 5`},
		{"not a bench file", []string{write("notjson.json", "notjson\n")}, nil, "notjson.json, line 1: a bench file is a YAML mapping of keys"},
		{"no fio", []string{"--native", "--fio", "r=rw=read,size=1m"}, []string{"PATH=/nonexistent"}, "fio is not installed"},
		{"no bench", nil, nil, "give a bench file, --preset NAME"},
		{"unknown preset", []string{"--preset", "fast"}, nil, `no preset "fast"`},
		{"preset and flags", []string{"--preset", "quick", "--fio", "r=size=1m"}, nil, "leave out --native"},
		{"quick flag", []string{"--native", "--labfs", "nameless"}, nil, `--labfs "nameless": give NAME=VALUE`},
		{"unknown config", []string{"--preset", "quick", "--config", "zfs"}, nil, `--config "zfs": no such configuration`},
		{"no repetitions", []string{"--preset", "quick", "-n", "0"}, nil, "at least one repetition"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(e2e.Fusescope, append([]string{"bench"}, c.args...)...)
			if c.env != nil {
				cmd.Env = append(os.Environ(), c.env...)
			}
			out, err := cmd.CombinedOutput()
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if err == nil || len(lines) != 1 || !strings.Contains(lines[0], c.want) || strings.Contains(lines[0], "bench.Spec") {
				t.Errorf("fusescope bench %v: %v\n%s\nwant one line with %q", c.args, err, out, c.want)
			}
		})
	}

	// A template that fails, one that never mounts and a workload that
	// fails in one configuration are notes; the native runs go on.
	spec := write("partial.yaml", `repetitions: 2
scratch: tmp
trace: false
configurations:
  - {name: native, native: true}
  - {name: broken, mount: "echo no such file system >&2; false {mnt}"}
  - {name: never, mount: "sleep 60 # {mnt}", mount_timeout: 1s}
  - {name: lab, labfs: [--preset, default]}
workloads:
  - name: only-native
    shell: {run: "stat -f -c %T . | grep -qv fuse"}
`)
	scratch := t.TempDir()
	out, err := exec.Command(e2e.Fusescope, "bench", spec, "--scratch-dir", scratch).CombinedOutput()
	if err != nil {
		t.Fatalf("bench with failing configurations: %v\n%s", err, out)
	}
	for _, want := range []string{
		`configuration "broken": the mount command failed: no such file system: left out`,
		`configuration "never": nothing was mounted at`,
		`workload "only-native" on "lab", round 1:`,
		"only-native: elapsed (s, lower is better)",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	if m := benchMounts(t, scratch); len(m) > 0 {
		t.Errorf("left mounted: %v", m)
	}
}

// SIGINT and SIGTERM in the middle of a bench unmount everything it
// mounted and say so in one line.
func TestBenchInterrupted(t *testing.T) {
	t.Parallel()
	e2e.DropsCaches(t) // bench drops the kernel's caches before its cold runs, every mount's
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			scratch := t.TempDir()
			if m := benchMounts(t, scratch); len(m) > 0 {
				t.Fatalf("mounted before the bench: %v", m)
			}
			t.Cleanup(func() {
				for _, line := range benchMounts(t, scratch) {
					if f := strings.Fields(line); len(f) > 4 {
						exec.Command("umount", "-l", f[4]).Run()
					}
				}
			})
			cmd := exec.Command(e2e.Fusescope, "bench", "--scratch", "tmp", "--scratch-dir", scratch, "--no-trace", "-n", "50",
				"--labfs", "lab=--preset default", "--shell", "nap=sleep 0.2")
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The signal comes as the mount appears: while fs mount may
			// still be running, before the bench knows of it.
			e2e.WaitFor(t, "the bench's mount", func() bool { return len(benchMounts(t, scratch)) > 0 })
			cmd.Process.Signal(sig)
			err := cmd.Wait()
			if err == nil || !strings.Contains(out.String(), "bench interrupted: everything it mounted is unmounted") {
				t.Errorf("after %v: %v\n%s", sig, err, out.String())
			}
			if m := benchMounts(t, scratch); len(m) > 0 {
				t.Errorf("left mounted after %v: %v", sig, m)
			}
		})
	}
}

// A configuration with trace: false beside a traced twin: its runs carry
// no trace, and the twin's carry the workload's requests (one CREATE per
// file the shell command makes).
func TestBenchUntracedTwin(t *testing.T) {
	t.Parallel()
	e2e.DropsCaches(t) // bench drops the kernel's caches before its cold runs, every mount's
	spec := filepath.Join(t.TempDir(), "twin.yaml")
	os.WriteFile(spec, []byte(`repetitions: 2
scratch: tmp
configurations:
  - {name: untraced, labfs: [--preset, default], trace: false}
  - {name: traced, labfs: [--preset, default]}
workloads:
  - name: touch
    shell: {run: "rm -rf t && mkdir t && touch t/a t/b t/c"}
    requests: [CREATE]
`), 0o644)
	rec := filepath.Join(t.TempDir(), "b.json")
	if out, err := exec.Command(e2e.Fusescope, "bench", spec, "-o", rec).CombinedOutput(); err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	b := e2e.LoadRecord(t, rec).Bench
	for _, run := range b.Runs {
		switch {
		case run.Error != "":
			t.Errorf("run %+v failed", run)
		case run.Configuration == "untraced" && run.Requests != nil:
			t.Errorf("an untraced run has a trace: %+v", run)
		case run.Configuration == "traced" && (run.Requests == nil || len(run.Metrics) != 2 || run.Metrics[1].Name != "CREATE" || run.Metrics[1].Value != 3):
			t.Errorf("a traced run: %+v, want a trace with 3 CREATEs", run.Metrics)
		}
	}
}

// A bench killed with SIGKILL leaves its mounts; the next bench finds them
// (the dead bench's PID beside its scratch directory), cleans them up and
// says so.
func TestBenchCleansUpAKilledBench(t *testing.T) {
	t.Parallel()
	e2e.DropsCaches(t) // bench drops the kernel's caches before its cold runs, every mount's
	scratch := t.TempDir()
	t.Cleanup(func() {
		for _, line := range benchMounts(t, scratch) {
			if f := strings.Fields(line); len(f) > 4 {
				exec.Command("umount", "-l", f[4]).Run()
			}
		}
	})
	cmd := exec.Command(e2e.Fusescope, "bench", "--scratch-dir", scratch, "--no-trace", "-n", "50", "--labfs", "lab=--preset default", "--shell", "nap=sleep 0.2")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Its scratch ext4 and the lab file system on it.
	e2e.WaitFor(t, "the bench's mounts", func() bool { return len(benchMounts(t, scratch)) >= 2 })
	cmd.Process.Kill()
	cmd.Wait()
	if len(benchMounts(t, scratch)) < 2 {
		t.Fatal("the killed bench left nothing to clean up")
	}
	out, err := exec.Command(e2e.Fusescope, "bench", "--scratch-dir", scratch, "--scratch", "tmp", "--no-trace", "-n", "1", "--native", "--shell", "t=true").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "cleaned up after a bench that was killed") {
		t.Errorf("the next bench: %v\n%s", err, out)
	}
	if m := benchMounts(t, scratch); len(m) > 0 {
		t.Errorf("left mounted: %v", m)
	}
	if left, _ := filepath.Glob(filepath.Join(scratch, "fusescope-bench-*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// The built-in workloads on a mount that caches nothing, against the
// requests they must make: each small file read opens it once (OPEN), the
// tarball's extraction creates each file once (CREATE), git status finds
// the generated repository clean, and the walk finds every file.
func TestBenchBuiltInWorkloads(t *testing.T) {
	t.Parallel()
	e2e.DropsCaches(t) // bench drops the kernel's caches before its cold runs, every mount's
	spec := filepath.Join(t.TempDir(), "builtin.yaml")
	os.WriteFile(spec, []byte(`repetitions: 2
scratch: tmp
configurations:
  - {name: native, native: true}
  - {name: nocache, labfs: [--preset, nocache]}
workloads:
  - {name: small, smallfiles: {files: 60, dirs: 6, size: 3k}, requests: [OPEN]}
  - {name: untar, untar: {files: 60, dirs: 6, size: 3k}, requests: [CREATE, MKDIR]}
  - {name: git, git_status: {files: 60, dirs: 6, size: 1k}}
  - {name: walk, walk: {files: 60, dirs: 6, passes: 2}, calls: true}
`), 0o644)
	rec := filepath.Join(t.TempDir(), "b.json")
	if out, err := exec.Command(e2e.Fusescope, "bench", spec, "-o", rec).CombinedOutput(); err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	b := e2e.LoadRecord(t, rec).Bench
	if len(b.Runs) != 2*2*4 {
		t.Fatalf("%d runs, want 16", len(b.Runs))
	}
	for _, run := range b.Runs {
		if run.Error != "" || len(run.Metrics) == 0 {
			t.Errorf("%s on %s: %q", run.Workload, run.Configuration, run.Error)
			continue
		}
		if run.Configuration != "nocache" {
			continue
		}
		fig := map[string]float64{}
		for _, m := range run.Metrics {
			fig[m.Name] = m.Value
		}
		switch run.Workload {
		case "small":
			if fig["OPEN"] != 60 {
				t.Errorf("smallfiles: %v OPENs, want 60", fig["OPEN"])
			}
		case "walk":
			// Every lstat (newfstatat) of the walk, each sending a
			// request where nothing is cached: 2 passes of 60 files, 6
			// directories and the root, which WalkDir stats once more
			// before it starts.
			var stat *profile.CallStats
			for i := range run.Calls {
				if run.Calls[i].Syscall == "newfstatat" {
					stat = &run.Calls[i]
				}
			}
			if stat == nil || stat.Count != 2*(60+6+2) || stat.WithRequests != stat.Count {
				t.Errorf("walk's calls: %+v, want 136 newfstatat, each with a request", run.Calls)
			}
		case "untar":
			// Six directories, and tar's mkdir of the archive's "."
			// (EEXIST: the destination exists).
			if fig["CREATE"] != 60 || fig["MKDIR"] != 7 {
				t.Errorf("untar: %v CREATEs and %v MKDIRs, want 60 and 6 + 1", fig["CREATE"], fig["MKDIR"])
			}
		}
	}
}

// remount mounts each configuration anew before each run (a connection of
// its own per run), and a time budget stops the bench after the round that
// passes it, saying so.
func TestBenchRemountAndBudget(t *testing.T) {
	t.Parallel()
	e2e.DropsCaches(t) // bench drops the kernel's caches before its cold runs, every mount's
	spec := filepath.Join(t.TempDir(), "cold.yaml")
	os.WriteFile(spec, []byte(`repetitions: 3
scratch: tmp
remount: true
trace: false
configurations:
  - {name: lab, labfs: [--preset, default]}
workloads:
  - {name: ls, shell: {run: "ls -la >/dev/null"}}
`), 0o644)
	rec := filepath.Join(t.TempDir(), "b.json")
	if out, err := exec.Command(e2e.Fusescope, "bench", spec, "-o", rec).CombinedOutput(); err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	b := e2e.LoadRecord(t, rec).Bench
	// Each run on a mount of its own.
	var mounts []int
	for _, run := range b.Runs {
		mounts = append(mounts, run.Mount)
	}
	if !b.Remount || fmt.Sprint(mounts) != "[1 2 3]" {
		t.Errorf("remount: the runs were on mounts %v, want [1 2 3]", mounts)
	}
	out, err := exec.Command(e2e.Fusescope, "bench", spec, "--budget", "1ns", "-o", rec).CombinedOutput()
	if err != nil {
		t.Fatalf("bench --budget: %v\n%s", err, out)
	}
	if b := e2e.LoadRecord(t, rec).Bench; b.Rounds != 1 || !strings.Contains(string(out), "the time budget of 1ns ran out after 1 of 3 rounds") {
		t.Errorf("--budget 1ns: %d rounds\n%s", b.Rounds, out)
	}
}

// A mount template that sends a process to the background and never
// mounts leaves no process behind (the template runs in a session of its
// own, ended whole); one that mounts something other than FUSE is told at
// once, with what it mounted, and unmounted.
func TestBenchMountTemplateLeavesNothing(t *testing.T) {
	t.Parallel()
	e2e.DropsCaches(t) // bench drops the kernel's caches before its cold runs, every mount's
	// A sleep no one else runs, to find it by its command line.
	nap := fmt.Sprintf("sleep %d", 3_000_000+os.Getpid())
	tmpfs := fmt.Sprintf("tmpfs-%d", os.Getpid())
	spec := filepath.Join(t.TempDir(), "templates.yaml")
	os.WriteFile(spec, []byte(fmt.Sprintf(`repetitions: 1
scratch: tmp
trace: false
configurations:
  - {name: native, native: true}
  - {name: background, mount: "%s >/dev/null 2>&1 & : {mnt}", mount_timeout: 1s}
  - {name: %s, mount: "mount -t tmpfs none {mnt}", mount_timeout: 20s}
workloads:
  - {name: t, shell: {run: "true"}}
`, nap, tmpfs)), 0o644)
	start := time.Now()
	out, err := exec.Command(e2e.Fusescope, "bench", spec).CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	for _, want := range []string{
		`configuration "background": nothing was mounted at`,
		fmt.Sprintf(`configuration %q: its mount command mounted tmpfs at`, tmpfs),
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	if took > 15*time.Second {
		t.Errorf("the bench took %v: the tmpfs mount was waited on as if nothing had mounted (mount_timeout 20s)", took.Round(time.Second))
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Join(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), " ") == nap {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("the template's %q was left running (pid %d)", nap, pid)
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasSuffix(f[4], "/mnt-"+tmpfs) {
			exec.Command("umount", "-l", f[4]).Run()
			t.Errorf("the template's tmpfs was left mounted: %s", line)
		}
	}
}

// --workload and --config leave out the published figures of what they
// leave out: a preset filtered to one workload runs, beside the figure
// that is left.
func TestBenchFilteredPreset(t *testing.T) {
	t.Parallel()
	e2e.DropsCaches(t) // bench drops the kernel's caches before its cold runs, every mount's
	for _, args := range [][]string{
		{"--preset", "writeback", "--workload", "write-4k"},
		{"--preset", "passthrough", "--config", "labfs", "--workload", "read"},
	} {
		rec := filepath.Join(t.TempDir(), "b.json")
		out, err := exec.Command(e2e.Fusescope, append([]string{"bench", "-n", "1", "--warmup", "0", "--scale", "0.02", "--no-trace", "-o", rec}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("bench %v: %v\n%s", args, err, out)
		}
		b := e2e.LoadRecord(t, rec).Bench
		if args[1] == "writeback" && (len(b.Published) != 1 || b.Published[0].Workload != "write-4k" || b.Published[0].Measured <= 0 ||
			!strings.Contains(string(out), "1.65x")) {
			t.Errorf("bench %v: published %+v, want write-4k's 1.65 beside its measure\n%s", args, b.Published, out)
		}
		if args[1] == "passthrough" && len(b.Published) != 0 {
			t.Errorf("bench %v: published %+v, want none (labfs has no published figure)", args, b.Published)
		}
	}
}

// A configuration with io_uring: true: the bench enables the kernel's ring
// while its daemon mounts and restores the setting after, and says from
// the runs' traces which transport carried each configuration's requests.
// passthrough_hp -o io_uring is the ring's; the same daemon without -o
// io_uring, though the configuration asks for the ring, is named as fallen
// back to /dev/fuse, in the record and in a note.
func TestBenchIOURing(t *testing.T) {
	t.Parallel()
	e2e.HoldURing(t)
	e2e.DropsCaches(t) // bench drops the kernel's caches before its cold runs, every mount's
	was, err := os.ReadFile(e2e.URingParam)
	if err != nil {
		t.Skipf("this kernel has no FUSE over io_uring (%v)", err)
	}
	hp := e2e.LibfuseExample(t, "passthrough_hp")
	spec := filepath.Join(t.TempDir(), "uring.yaml")
	os.WriteFile(spec, []byte(fmt.Sprintf(`repetitions: 1
scratch: tmp
configurations:
  - {name: dev, mount: "%[1]s --nopassthrough {src} {mnt}", umount: "fusermount3 -u {mnt}"}
  - {name: ring, mount: "%[1]s --nopassthrough -o io_uring {src} {mnt}", umount: "fusermount3 -u {mnt}", io_uring: true}
  - {name: asked, mount: "%[1]s --nopassthrough {src} {mnt}", umount: "fusermount3 -u {mnt}", io_uring: true}
workloads:
  - name: touch
    shell: {run: "rm -rf t && mkdir t && touch t/a t/b t/c"}
    requests: [CREATE]
`, hp)), 0o644)
	rec := filepath.Join(t.TempDir(), "b.json")
	out, err := exec.Command(e2e.Fusescope, "bench", spec, "-o", rec).CombinedOutput()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	b := e2e.LoadRecord(t, rec).Bench
	got := map[string]string{}
	for _, c := range b.Configs {
		got[c.Name] = c.Transport
	}
	if want := map[string]string{"dev": profile.TransportDevFuse, "ring": profile.TransportURing, "asked": profile.TransportDevFuse}; !maps.Equal(got, want) {
		t.Errorf("transports %v, want %v", got, want)
	}
	if !strings.Contains(strings.Join(b.Notes, "\n"), `"asked" asked for FUSE over io_uring, and its daemon fell back to /dev/fuse`) {
		t.Errorf("no note names the fallback: %q", b.Notes)
	}
	if !strings.Contains(string(out), "asked: /dev/fuse (asked for io_uring: fell back)") {
		t.Errorf("the text does not name the fallback:\n%s", out)
	}
	if now, _ := os.ReadFile(e2e.URingParam); string(now) != string(was) {
		t.Errorf("enable_uring was %q before the bench and is %q after", was, now)
	}
}

// The coherence workload against what the kernel's caches are known to
// do with writes made in the source behind the mount: a reader that keeps
// the file open on the default preset sees none of them within the
// attribute timeout (1 s, longer than the run), with direct_io every one,
// and with the timeouts at 0 every one too; with --invalidation notify,
// all but those in the moment inotify and the notification take, though
// the attribute timeout is 10 s; reading through the mount
// what was written through it is never stale.
func TestBenchCoherenceWorkload(t *testing.T) {
	t.Parallel()
	e2e.DropsCaches(t)
	spec := filepath.Join(t.TempDir(), "coherence.yaml")
	os.WriteFile(spec, []byte(`repetitions: 1
warmup: 0
scratch: tmp
configurations:
  - {name: default, labfs: [--preset, default]}
  - {name: direct, labfs: [--direct-io]}
  - {name: attr0, labfs: [--attr-timeout, "0"]}
  - {name: notify, labfs: [--invalidation, notify, --attr-timeout, 10s]}
workloads:
  - {name: behind, coherence: {writer: behind, reader: keep, duration: 600ms}}
  - {name: through, coherence: {writer: mount, reader: reopen, duration: 600ms}}
`), 0o644)
	rec := filepath.Join(t.TempDir(), "c.json")
	out, err := exec.Command(e2e.Fusescope, "bench", spec, "--no-trace", "-o", rec).CombinedOutput()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "behind, side by side (means):") {
		t.Errorf("no side-by-side table:\n%s", out)
	}
	for _, run := range e2e.LoadRecord(t, rec).Bench.Runs {
		fig := map[string]float64{}
		for _, m := range run.Metrics {
			fig[m.Name] = m.Value
		}
		if run.Error != "" || fig["reads"] <= 0 {
			t.Errorf("%s on %s: %q, %v", run.Workload, run.Configuration, run.Error, fig)
			continue
		}
		stale := fig["stale"]
		switch {
		case run.Workload == "through" && stale != 0:
			t.Errorf("%s on %s: %.2f%% stale reading through the mount what was written through it", run.Workload, run.Configuration, stale)
		case run.Workload == "behind" && run.Configuration == "default" && (stale < 50 || fig["unseen"] < 300):
			t.Errorf("behind the default preset's back: %.2f%% stale, a write unseen for %.0f ms at most; want most reads stale, for most of the run", stale, fig["unseen"])
		case run.Workload == "behind" && run.Configuration == "notify" && (stale > 30 || fig["unseen"] > 200):
			// The window between a write in the source and the kernel's
			// invalidation, which inotify and the notification take.
			t.Errorf("behind the back of --invalidation notify: %.2f%% stale, a write unseen for %.0f ms; want few, briefly", stale, fig["unseen"])
		case run.Workload == "behind" && run.Configuration != "default" && run.Configuration != "notify" && stale > 1:
			t.Errorf("behind %s's back: %.2f%% stale, want about none", run.Configuration, stale)
		}
	}
}
