package guest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The function mechanism: before 6.12 the kernel has no fuse
// tracepoints, and fusescope attaches to the functions that queue and end a
// request instead, fentry where fuse has BTF, else kprobes; --stages times
// the kernel's side of /dev/fuse there. The counts of each way of attaching
// are held against each other by TestMechanismsAgree; these tests hold what
// is particular to the functions.

// funcsRecord is the part of a trace record these tests read.
type funcsRecord struct {
	Meta struct {
		Probes string `json:"probes"`
	} `json:"meta"`
	Programs []struct {
		Program string `json:"program"`
		Runs    uint64 `json:"runs"`
	} `json:"programs"`
}

func readFuncsRecord(t *testing.T, path string) funcsRecord {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec funcsRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rec
}

// autoMechanism is how trace should attach on this kernel, from its facts
// alone: the tracepoints where it has them, else fentry where fuse's
// functions are in its BTF, else kprobes.
func autoMechanism() Feature {
	switch {
	case tracepointExists("fuse_request_send"):
		return TpBTF
	case fuseHasBTF():
		return Fentry
	}
	return Kprobe
}

// trace with no --attach attaches as the kernel's facts say, and says how
// in the record (meta.probes) and, on the functions, in one line naming
// them and why.
func TestFuncsMechanism(t *testing.T) {
	machine(t)
	l, steps := countsWorkload(t)
	rec := filepath.Join(t.TempDir(), "rec.json")
	r := runFusescopeEnv(workload(steps...), "trace", "--mount", l.mnt, "--no-hist", "-o", rec, "--", self(t))
	if !expect(t, Trace, "", r) {
		return
	}
	want := autoMechanism()
	probes := readFuncsRecord(t, rec).Meta.Probes
	how, _, _ := strings.Cut(probes, ";")
	t.Logf("kernel %s: meta.probes %q", release, probes)
	if how != string(want) {
		t.Errorf("trace attached with %q, want %s on this kernel", how, want)
	}
	if want != Fentry && want != Kprobe {
		return
	}
	var note string
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.HasPrefix(line, "note: ") && strings.Contains(line, string(want)+" on ") {
			note = line
		}
	}
	if note == "" || !strings.Contains(note, "fuse_request_end") || !strings.Contains(note, "no fuse tracepoints") {
		t.Errorf("want a note naming %s, the functions and why; stderr:\n%s", want, r.stderr)
	}
}

// --stages on fentry and kprobes splits every request from the kernel's
// side of /dev/fuse: the programs run on fuse_copy_args and
// fuse_dev_do_write, the end stamps the reply (the record's programs, with the kernel's
// accounting on) and on none of the daemon's system calls, every request
// is staged, its stages add up to its latency to the nanosecond, and the
// daemon stage holds the injected delay (TestStages holds its p50 to a
// bound under emulation; here the mechanisms are forced).
func TestFuncsStages(t *testing.T) {
	machine(t)
	bpfStats(t)
	l, steps := latencyWorkload(t)
	for _, mech := range []Feature{Fentry, Kprobe} {
		rec := filepath.Join(t.TempDir(), string(mech)+".json")
		r := runFusescopeEnv(workload(steps...), "trace", "--attach", string(mech), "--stages", "--mount", l.mnt, "--csv", "-o", rec, "--", self(t))
		t.Run(string(mech), func(t *testing.T) {
			if !expect(t, mech, "--attach", r) {
				return
			}
			ran := map[string]uint64{}
			for _, p := range readFuncsRecord(t, rec).Programs {
				ran[p.Program] = p.Runs
				if strings.HasPrefix(p.Program, "stage:sys_") {
					t.Errorf("a program on the daemon's system calls: %s", p.Program)
				}
			}
			for _, fn := range []string{"fuse_copy_args", "fuse_dev_do_write"} {
				if ran["stage:"+fn] == 0 {
					t.Errorf("no runs of the stage program on %s: %v", fn, ran)
				}
			}
			op := attrOp(t, csvRows(t, r.stdout))
			daemon, total := csvNs(t, op, "daemon_p50_ns"), csvNs(t, op, "p50_ns")
			t.Logf("kernel %s, %s: %s p50 %v; stages' p50s: queue %v, daemon %v, reply %v; programs %v", release, mech, op["op"], total, csvNs(t, op, "queue_p50_ns"), daemon, csvNs(t, op, "reply_p50_ns"), ran)
			if daemon < injected || daemon > total {
				t.Errorf("%s daemon stage p50 %v, want at least the injected %v and no more than the total's %v", op["op"], daemon, injected, total)
			}
			for _, o := range readRecord(t, rec).Profile.Ops {
				if o.Conn != l.conn {
					continue
				}
				var sum uint64
				for _, s := range o.Stages {
					if s.Latency.Count != o.Count {
						t.Errorf("%s: stage %s counts %d of %d requests", o.Op, s.Stage, s.Latency.Count, o.Count)
					}
					sum += s.Latency.Sum
				}
				if len(o.Stages) != 3 || sum != o.Latency.Sum {
					t.Errorf("%s: %d stages summing to %d ns, total %d ns", o.Op, len(o.Stages), sum, o.Latency.Sum)
				}
			}
		})
	}
}

// bpfStats turns the kernel's accounting of BPF run time on for the test.
func bpfStats(t *testing.T) {
	t.Helper()
	const knob = "/proc/sys/kernel/bpf_stats_enabled"
	old, err := os.ReadFile(knob)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(knob, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile(knob, old, 0o644) })
}

// The names of files (--files) come through the function mechanism too:
// fentry's program is tp_btf's at fuse_request_end's entry, kprobe's reads
// the same fields through probes.
func TestFuncsFileNames(t *testing.T) {
	machine(t)
	l := mountLab(t, "--preset", "nocache")
	pages(t, filepath.Join(l.src, "d", "named"), 2)
	steps := []string{"read:" + filepath.Join(l.mnt, "d", "named"), l.idle()}
	for _, mech := range []Feature{Fentry, Kprobe} {
		rec := filepath.Join(t.TempDir(), string(mech)+".json")
		r := runFusescopeEnv(workload(steps...), "trace", "--attach", string(mech), "--files", "5", "--op", "READ", "--mount", l.mnt, "--no-hist", "-o", rec, "--", self(t))
		t.Run(string(mech), func(t *testing.T) {
			if !expect(t, mech, "--attach", r) {
				return
			}
			var paths []string
			for _, f := range readRecord(t, rec).Files {
				paths = append(paths, fmt.Sprintf("%s (%d)", f.Path, f.Count))
				if f.Path == "/d/named" && f.Count != 3 {
					t.Errorf("/d/named: %d READs, want 3 (2 pages and the end)", f.Count)
				}
			}
			if !strings.Contains(strings.Join(paths, " "), "/d/named (") {
				t.Errorf("files %v: want /d/named by its path", paths)
			}
		})
	}
}
