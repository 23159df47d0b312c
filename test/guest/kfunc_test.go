package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"github.com/fusescope/fusescope/test/proctest"
	"golang.org/x/sys/unix"
)

// kfuncRecord is the part of a fusescope kfunc record (docs/record.md,
// kernel_functions) these tests read, declared here rather than taken
// from fusescope's packages.
type kfuncRecord struct {
	Meta struct {
		Source string `json:"source"`
	} `json:"meta"`
	Functions struct {
		Mechanism   string `json:"mechanism"`
		Skipped     uint64 `json:"skipped"`
		Attached    int    `json:"attached"`
		AttachNs    int64  `json:"attach_ns"`
		NotAttached []struct {
			Name  string `json:"name"`
			Error string `json:"error"`
		} `json:"not_attached"`
		Functions []struct {
			Name    string `json:"name"`
			Module  string `json:"module"`
			Count   uint64 `json:"count"`
			Latency *hist  `json:"latency"`
		} `json:"functions"`
	} `json:"kernel_functions"`
}

func (r kfuncRecord) count(name string) uint64 {
	var n uint64
	for _, f := range r.Functions.Functions {
		if f.Name == name {
			n += f.Count
		}
	}
	return n
}

func (r kfuncRecord) latency(name string) *hist {
	for _, f := range r.Functions.Functions {
		if f.Name == name && f.Latency != nil {
			return f.Latency
		}
	}
	return nil
}

func parseKfunc(t *testing.T, text string) kfuncRecord {
	t.Helper()
	var rec kfuncRecord
	if err := json.Unmarshal([]byte(text), &rec); err != nil {
		t.Fatalf("kfunc --json: %v\n%s", err, text)
	}
	return rec
}

// kfuncMechanisms are the ways this kernel lets kfunc attach, found
// without fusescope: kprobes (the kprobe PMU, or kprobe_events), fentry
// (BTF, and a BPF tracing program that loads).
func kfuncMechanisms(t *testing.T) (kprobes, fentry bool) {
	t.Helper()
	_, pmu := os.Stat("/sys/bus/event_source/devices/kprobe")
	_, events := os.Stat(filepath.Join(tracefsRoot(t), "kprobe_events"))
	_, btf := os.Stat("/sys/kernel/btf/vmlinux")
	return pmu == nil || events == nil, btf == nil && features.HaveProgramType(ebpf.Tracing) == nil
}

// fuseHasBTF: fentry can reach fuse's functions (fuse built in, or
// fuse.ko with its own BTF; bullseye's has none).
func fuseHasBTF() bool {
	if _, err := os.Stat("/sys/kernel/btf/fuse"); err == nil {
		return true
	}
	_, err := os.Stat("/sys/module/fuse/initstate") // only a module has one
	return errors.Is(err, os.ErrNotExist)
}

// kfuncFiles is how many new files each run stats: each a dentry miss,
// so one fuse_lookup and one LOOKUP, with the lookup of their directory.
const kfuncFiles = 40

// kfuncInjected is the lab daemon's LOOKUP delay: each fuse_lookup takes
// at least that long.
const kfuncInjected = 2 * time.Millisecond

// fusescope kfunc counts every fuse_* function and times fuse_lookup,
// through fentry and through kprobes where the kernel has them: a stat of
// N new names calls fuse_lookup N+1 times (the directory too), as many
// as the lab daemon answered LOOKUPs, each taking at least the injected
// delay, and the two mechanisms count the same calls. A kernel with
// neither is refused in one line.
func TestKfuncCounts(t *testing.T) {
	machine(t)
	kprobes, fentry := kfuncMechanisms(t)
	if !kprobes && !fentry {
		r := runFusescope("kfunc", "fuse_*")
		if classify(r, "") != Refused || !strings.Contains(r.stderr, "neither kprobes") {
			t.Fatalf("a kernel with neither kprobes nor fentry: want one line saying so\n%v", r)
		}
		t.Logf("kernel %s has neither kprobes nor fentry: %s", release, strings.TrimSpace(r.stderr))
		return
	}
	l := mountLab(t, "--latency", "lookup="+kfuncInjected.String(), "--entry-timeout", "1h")
	byMechanism := map[string]kfuncRecord{}
	for _, m := range []string{"fentry", "kprobe"} {
		t.Run(m, func(t *testing.T) {
			dir := filepath.Join(l.src, m)
			files(t, dir, kfuncFiles)
			before := daemonCounts(t, l)
			r := runFusescopeEnv(workload("stat:"+filepath.Join(l.mnt, m)+fmt.Sprintf(":%d", kfuncFiles), l.idle()),
				"kfunc", "--attach", m, "--json", "fuse_*", "--latency", "fuse_lookup", "--", self(t))
			switch {
			case m == "kprobe" && !kprobes, m == "fentry" && !fentry:
				if classify(r, "") != Refused {
					t.Fatalf("kernel %s has no %s: want one line saying so\n%v", release, m, r)
				}
				t.Skipf("kernel %s: %s", release, strings.TrimSpace(r.stderr))
			case m == "fentry" && !fuseHasBTF():
				if classify(r, "") != Refused || !strings.Contains(r.stderr, "fuse.ko has no BTF") {
					t.Fatalf("fuse.ko without BTF: want one line saying fentry cannot reach it\n%v", r)
				}
				t.Skipf("kernel %s: %s", release, strings.TrimSpace(r.stderr))
			case r.exit != 0:
				t.Fatalf("%v", r)
			}
			rec := parseKfunc(t, r.stdout)
			if want := m; !strings.HasPrefix(rec.Functions.Mechanism, want) {
				t.Errorf("mechanism %q, want %s", rec.Functions.Mechanism, want)
			}
			lookups := sub(daemonCounts(t, l), before)["LOOKUP"]
			want := uint64(kfuncFiles + 1)
			if got := rec.count("fuse_lookup"); got != want || lookups != want {
				t.Errorf("fuse_lookup called %d times, the daemon answered %d LOOKUPs: want %d of each", got, lookups, want)
			}
			h := rec.latency("fuse_lookup")
			switch {
			case h == nil:
				t.Errorf("fuse_lookup was not timed")
			case h.Count != want:
				t.Errorf("fuse_lookup timed %d times, want %d", h.Count, want)
			case time.Duration(h.Min) < kfuncInjected:
				t.Errorf("fuse_lookup's fastest call took %v, less than the daemon's injected %v", time.Duration(h.Min), kfuncInjected)
			}
			t.Logf("kernel %s: %s on %d functions in %v (%d not attached), %d called; fuse_lookup %d, min %v, mean %v",
				release, rec.Functions.Mechanism, rec.Functions.Attached, time.Duration(rec.Functions.AttachNs).Round(time.Millisecond),
				len(rec.Functions.NotAttached), len(rec.Functions.Functions), rec.count("fuse_lookup"), time.Duration(h.Min), time.Duration(h.Sum/max(h.Count, 1)))
			byMechanism[m] = rec
		})
	}
	// Auto counts many functions through one kprobe.multi link where the
	// kernel has one: fentry's trampolines detach one at a time (few
	// functions go through fentry: TestKfuncPID, TestKfuncIntervals).
	if kprobes && fentry && features.HaveBPFLinkKprobeMulti() == nil {
		r := runFusescope("kfunc", "--json", "fuse_*", "--", "true")
		if r.exit != 0 {
			t.Fatalf("%v", r)
		}
		if got := parseKfunc(t, r.stdout).Functions.Mechanism; got != "kprobe_multi" {
			t.Errorf("auto chose %s for fuse_*, want kprobe_multi\n%s", got, r.stderr)
		}
		t.Logf("kernel %s: auto: %s", release, firstLine(r.stderr))
	}
	if len(byMechanism) < 2 {
		return
	}
	// The functions the lookups call in the stat's own thread are called
	// as often through either mechanism.
	f, k := byMechanism["fentry"], byMechanism["kprobe"]
	var same, differ []string
	for _, fc := range f.Functions.Functions {
		kc := k.count(fc.Name)
		if kc == 0 {
			continue
		}
		if kc == fc.Count {
			same = append(same, fmt.Sprintf("%s %d", fc.Name, kc))
		} else {
			differ = append(differ, fmt.Sprintf("%s %d (fentry) %d (kprobe)", fc.Name, fc.Count, kc))
		}
	}
	for _, name := range []string{"fuse_lookup", "fuse_lookup_name"} {
		if f.count(name) != k.count(name) {
			t.Errorf("%s: fentry counted %d calls, kprobes %d", name, f.count(name), k.count(name))
		}
	}
	t.Logf("kernel %s: fentry and kprobes agree on %d functions (%s); differ on %d (%s)", release, len(same), strings.Join(same, ", "), len(differ), strings.Join(differ, ", "))
}

// -p keeps one process's calls: this test's own stats are counted, those
// of another process on the same mount at the same time are not.
func TestKfuncPID(t *testing.T) {
	machine(t)
	kprobes, fentry := kfuncMechanisms(t)
	if !kprobes && !fentry {
		t.Skipf("kernel %s has neither kprobes nor fentry (TestKfuncCounts checks the refusal)", release)
	}
	l := mountLab(t, "--entry-timeout", "1h")
	files(t, filepath.Join(l.src, "mine"), kfuncFiles)
	files(t, filepath.Join(l.src, "other"), kfuncFiles)
	var stdout strings.Builder
	cmd := exec.Command(fusescopeBin, "kfunc", "-p", fmt.Sprint(os.Getpid()), "--json", "fuse_lookup*")
	cmd.Stdout = &stdout
	p := proctest.Start(t, cmd, "Tracing", 2*time.Minute)
	other := exec.Command(self(t))
	other.Env = append(os.Environ(), workload("stat:"+filepath.Join(l.mnt, "other")+fmt.Sprintf(":%d", kfuncFiles))...)
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	if err := runWorkload([]string{"stat:" + filepath.Join(l.mnt, "mine") + fmt.Sprintf(":%d", kfuncFiles)}); err != nil {
		t.Fatal(err)
	}
	if err := other.Wait(); err != nil {
		t.Fatalf("the other process's stats: %v", err)
	}
	if err := p.Interrupt(t, time.Minute); err != nil {
		t.Fatalf("kfunc: %v\n%s", err, p.Output())
	}
	rec := parseKfunc(t, stdout.String())
	// Two functions: auto takes fentry where it reaches fuse.
	if want := map[bool]string{true: "fentry", false: "kprobe"}[fentry && fuseHasBTF()]; !strings.HasPrefix(rec.Functions.Mechanism, want) {
		t.Errorf("auto chose %s for fuse_lookup*, want %s\n%s", rec.Functions.Mechanism, want, p.Output())
	}
	// fentry runs its programs preemptibly: a call of the other process
	// preempted inside the program makes the kernel skip this one's
	// (counted as skipped; under -p whose is not known).
	got, want, skipped := rec.count("fuse_lookup"), uint64(kfuncFiles+1), rec.Functions.Skipped
	if got > want || got+skipped < want {
		t.Errorf("-p %d: fuse_lookup called %d times by this process (and %d calls skipped, whoever's), want %d (the other process's %d not counted)", os.Getpid(), got, skipped, want, kfuncFiles+1)
	}
	t.Logf("kernel %s: -p counted %d fuse_lookup calls, %d calls skipped (%s)", release, got, skipped, rec.Functions.Mechanism)
}

// The cost of kfunc on a stat that the kernel's caches serve (no FUSE
// request: only fuse_* functions run), through each mechanism against
// none, interleaved, and the time to attach to every fuse_* function: a
// benchmark for docs/performance.md, run by hand in a guest
// (FUSESCOPE_BENCH=1; test/kernels/run.sh's guests, docs/kernels.md).
func TestKfuncOverhead(t *testing.T) {
	machine(t)
	if os.Getenv("FUSESCOPE_BENCH") == "" {
		t.Skip("a benchmark: FUSESCOPE_BENCH=1 runs it")
	}
	kprobes, fentry := kfuncMechanisms(t)
	var mechs []string
	if fentry && fuseHasBTF() {
		mechs = append(mechs, "fentry")
	}
	if kprobes {
		mechs = append(mechs, "kprobe")
	}
	if len(mechs) == 0 {
		t.Skipf("kernel %s: no mechanism", release)
	}
	l := mountLab(t, "--attr-timeout", "1h", "--entry-timeout", "1h")
	files(t, filepath.Join(l.src, "hot"), 1)
	path := filepath.Join(l.mnt, "hot", "f000")
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	const stats, rounds = 5000, 5
	loop := func() time.Duration {
		start := time.Now()
		for range stats {
			unix.Stat(path, &st)
		}
		return time.Since(start) / stats
	}
	loop() // the first loop warms what the others find warm
	per := map[string][]time.Duration{}
	calls := map[string]uint64{}
	attach, detach := map[string][]time.Duration{}, map[string][]time.Duration{}
	for round := range rounds {
		order := append([]string{"none"}, mechs...)
		k := round % len(order) // each its turn first
		order = append(order[k:], order[:k]...)
		for _, m := range order {
			if m == "none" {
				per[m] = append(per[m], loop())
				continue
			}
			var stdout strings.Builder
			cmd := exec.Command(fusescopeBin, "kfunc", "--attach", m, "-p", fmt.Sprint(os.Getpid()), "--json", "fuse_*")
			cmd.Stdout = &stdout
			p := proctest.Start(t, cmd, "Tracing", 5*time.Minute)
			d := loop()
			stop := time.Now()
			if err := p.Interrupt(t, 5*time.Minute); err != nil {
				t.Fatalf("%v\n%s", err, p.Output())
			}
			detach[m] = append(detach[m], time.Since(stop))
			rec := parseKfunc(t, stdout.String())
			var n uint64
			for _, f := range rec.Functions.Functions {
				n += f.Count
			}
			per[m] = append(per[m], d)
			calls[m] = n
			attach[m] = append(attach[m], time.Duration(rec.Functions.AttachNs))
			t.Logf("round %d %s (%s): %v a stat, %.2f fuse_* calls a stat, %d functions attached in %v, detached and reported in %v", round, m, rec.Functions.Mechanism, d, float64(n)/stats, rec.Functions.Attached, time.Duration(rec.Functions.AttachNs).Round(time.Millisecond), detach[m][len(detach[m])-1].Round(time.Millisecond))
		}
	}
	// Medians: the daemon mounted just before may still be settling in
	// the first round.
	for _, m := range mechs {
		perCall := float64(median(per[m])-median(per["none"])) / (float64(calls[m]) / stats)
		t.Logf("kernel %s: %s: a stat %v against %v with none (medians of %d rounds); %.0f ns per fuse_* call; attach %v, detach %v (medians); rounds: %v, none %v, attach %v, detach %v",
			release, m, median(per[m]), median(per["none"]), rounds, perCall, median(attach[m]).Round(time.Millisecond), median(detach[m]).Round(time.Millisecond), per[m], per["none"], attach[m], detach[m])
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// An interval run's records (--json, a line each) add up to the whole
// run (-o): every fuse_lookup of the workload in exactly one interval.
func TestKfuncIntervals(t *testing.T) {
	machine(t)
	if kprobes, fentry := kfuncMechanisms(t); !kprobes && !fentry {
		t.Skipf("kernel %s has neither kprobes nor fentry (TestKfuncCounts checks the refusal)", release)
	}
	l := mountLab(t, "--latency", "lookup=20ms", "--entry-timeout", "1h")
	files(t, filepath.Join(l.src, "iv"), kfuncFiles)
	whole := filepath.Join(t.TempDir(), "whole.json")
	r := runFusescopeEnv(workload("stat:"+filepath.Join(l.mnt, "iv")+fmt.Sprintf(":%d", kfuncFiles)),
		"kfunc", "--json", "-o", whole, "--latency", "fuse_lookup", "0.2", "--", self(t))
	if r.exit != 0 {
		t.Fatalf("%v", r)
	}
	var sum, timed uint64
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	for _, line := range lines {
		rec := parseKfunc(t, line)
		sum += rec.count("fuse_lookup")
		if h := rec.latency("fuse_lookup"); h != nil {
			timed += h.Count
		}
	}
	b, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	all := parseKfunc(t, string(b))
	want := uint64(kfuncFiles + 1)
	if len(lines) < 2 || sum != want || timed != want || all.count("fuse_lookup") != want {
		t.Errorf("%d intervals: fuse_lookup %d calls (%d timed) in the intervals, %d in the whole run: want %d, in 2 intervals or more", len(lines), sum, timed, all.count("fuse_lookup"), want)
	}
	t.Logf("kernel %s: %d intervals, fuse_lookup %d calls in all", release, len(lines), sum)
}
