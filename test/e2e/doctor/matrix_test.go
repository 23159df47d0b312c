package doctor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/doctor"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/test/e2e"
)

// A lab configuration and the rules doctor must report on it, and no
// other.
type config struct {
	flags []string
	want  []string
}

// A case is a rule's pair: a configuration that produces the anti-pattern
// and one that fixes it, under one workload. setup fills $SRC before the
// mount; work runs on $MNT under doctor.
type matrixCase struct {
	rule      string
	setup     string
	work      string
	bad, good config
	doctor    []string // doctor's own flags beyond --mount and -o
}

var cases = []matrixCase{
	{
		rule: "killpriv", work: `dd if=/dev/zero of=$MNT/f bs=64k count=256 status=none`,
		bad:  config{[]string{"--killpriv-v2=false"}, []string{"killpriv", "passthrough"}},
		good: config{nil, []string{"passthrough"}},
	},
	{
		rule: "small-writes", work: `dd if=/dev/zero of=$MNT/f bs=4k count=1024 status=none`,
		bad:  config{nil, []string{"small-writes", "passthrough"}},
		good: config{[]string{"--writeback-cache"}, nil},
	},
	{
		rule: "split-writes", work: `dd if=/dev/zero of=$MNT/f bs=1M count=16 status=none`,
		bad:  config{[]string{"--max-write", "128KiB"}, []string{"split-writes"}},
		good: config{nil, nil},
	},
	{
		rule: "direct-io", setup: `head -c 4M /dev/urandom > $SRC/f`, work: `dd if=$MNT/f of=/dev/null bs=4k status=none`,
		bad:  config{[]string{"--direct-io"}, []string{"direct-io", "passthrough"}},
		good: config{nil, nil},
	},
	{
		rule: "attr-storm", setup: `mkdir $SRC/d; for i in $(seq 100); do : > $SRC/d/f$i; done`,
		work: `for r in 1 2 3 4 5; do stat $MNT/d/f* > /dev/null; done`,
		bad:  config{[]string{"--entry-timeout", "0", "--attr-timeout", "0"}, []string{"attr-storm"}},
		good: config{nil, nil},
	},
	{
		rule: "readdir-lookups", setup: `mkdir $SRC/d; for i in $(seq 300); do : > $SRC/d/f$i; done`,
		work: `ls -l $MNT/d > /dev/null`,
		bad:  config{[]string{"--readdirplus", "off"}, []string{"readdir-lookups"}},
		good: config{nil, nil},
	},
	{
		rule: "serial-dirops", setup: `mkdir $SRC/d; for i in $(seq 400); do : > $SRC/d/f$i; done`,
		work: `for j in 0 1 2 3; do (for i in $(seq $((j*100+1)) $((j*100+100))); do echo $MNT/d/f$i; done | xargs stat > /dev/null) & done; wait`,
		bad:  config{[]string{"--latency", "lookup=2ms", "--parallel-dirops=false"}, []string{"serial-dirops", "daemon-stage"}},
		good: config{[]string{"--latency", "lookup=2ms"}, []string{"daemon-stage"}},
	},
	{
		rule: "max-background", setup: `for i in 1 2 3 4; do head -c 8M /dev/zero > $SRC/f$i; done`,
		work: `for i in 1 2 3 4; do cat $MNT/f$i > /dev/null & done; wait`,
		bad:  config{[]string{"--latency", "read=2ms", "--max-background", "1"}, []string{"max-background", "passthrough"}},
		good: config{[]string{"--latency", "read=2ms", "--max-background", "64"}, []string{"passthrough"}},
	},
	{
		rule: "daemon-stage", setup: `mkdir $SRC/d; for i in $(seq 200); do : > $SRC/d/f$i; done`,
		work: `stat $MNT/d/f* > /dev/null`,
		bad:  config{[]string{"--latency", "*=1ms"}, []string{"daemon-stage"}},
		good: config{nil, nil},
	},
	{
		rule: "enosys", setup: `: > $SRC/f`,
		work: `python3 -c 'import os,sys
for i in range(200):
    try: os.getxattr(sys.argv[1], "user.fusescope")
    except OSError: pass' $MNT/f`,
		bad:  config{[]string{"--xattrs", "eopnotsupp"}, []string{"enosys"}},
		good: config{[]string{"--xattrs", "enosys"}, nil},
	},
	{
		rule: "keep-cache", setup: `head -c 4M /dev/urandom > $SRC/f`,
		work: `for i in $(seq 10); do cat $MNT/f > /dev/null; done`,
		bad:  config{nil, []string{"keep-cache", "passthrough"}},
		good: config{[]string{"--keep-cache"}, nil},
	},
	{
		rule: "no-forget", setup: `mkdir $SRC/d; cd $SRC/d && seq 6000 | sed 's/^/f/' | xargs touch`,
		work: `ls $MNT/d | sed "s|^|$MNT/d/|" | xargs stat > /dev/null`,
		bad:  config{nil, []string{"no-forget"}},
		good: config{[]string{"--max-inodes", "2000"}, nil},
	},
	{
		rule: "forget-storm", setup: `mkdir $SRC/d; cd $SRC/d && seq 2000 | sed 's/^/f/' | xargs touch`,
		work: `for r in 1 2 3; do ls $MNT/d | sed "s|^|$MNT/d/|" | xargs stat > /dev/null; done`,
		bad:  config{[]string{"--max-inodes", "100"}, []string{"forget-storm"}},
		good: config{nil, nil},
	},
	{
		rule: "hung", setup: `: > $SRC/f`,
		// The stat is still waiting when the shell, and the run, end.
		work:   `stat $MNT/f > /dev/null & sleep 1.5`,
		bad:    config{[]string{"--latency", "lookup=4s"}, []string{"hung"}},
		good:   config{nil, nil},
		doctor: []string{"--hung", "1s"},
	},
	{
		rule: "passthrough", work: `dd if=/dev/zero of=$MNT/f bs=64k count=512 status=none; dd if=$MNT/f of=/dev/null bs=64k status=none`,
		bad:  config{nil, []string{"passthrough"}},
		good: config{[]string{"--passthrough"}, nil},
	},
}

// A workload that makes no anti-pattern, on a lab fs that has none: no
// finding, and no rule left undecided.
func TestDoctorQuietWorkload(t *testing.T) {
	// The lab fs has no ring: with enable_uring on, as another test may
	// have it, io-uring would rightly say it is not used.
	e2e.HoldURing(t)
	e2e.URingOff(t)
	e2e.KeepsCaches(t)
	src, mnt := t.TempDir(), t.TempDir()
	env := append(os.Environ(), "SRC="+src, "MNT="+mnt)
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("f%02d", i)), []byte("data\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(e2e.FusescopePlain, "fs", "mount", "--background", "--passthrough", src, mnt).CombinedOutput(); err != nil {
		t.Fatalf("fs mount: %v\n%s", err, out)
	}
	defer exec.Command(e2e.FusescopePlain, "fs", "umount", mnt).Run()
	got := doctorOn(t, mnt, env, `ls -l $MNT > /dev/null; cat $MNT/f* > /dev/null; echo more >> $MNT/f00; stat $MNT/f* > /dev/null`)
	if len(got.rules) > 0 || len(got.undecided) > 0 {
		t.Errorf("findings %v, undecided %v; want none: %s", got.rules, got.undecided, got.figures)
	}
}

// The lab fs is the ground truth: each rule reports its anti-pattern on
// the configuration that has it and not on the one that fixes it, and no
// rule reports what its configuration does not have: a clean confusion
// matrix over every rule and every run.
func TestDoctorConfusionMatrix(t *testing.T) {
	type cell struct{ tp, fp, fn, tn int }
	matrix := map[string]*cell{}
	for _, r := range doctor.Rules() {
		matrix[r] = &cell{}
	}
	var failures []string
	for _, c := range cases {
		for _, side := range []struct {
			name string
			cfg  config
		}{{"bad", c.bad}, {"good", c.good}} {
			var got diagnosis
			t.Run(c.rule+"/"+side.name, func(t *testing.T) {
				// The lab fs has no ring: with enable_uring on, as another
				// test may have it for a while, io-uring would rightly say
				// it is not used; and caches dropped meanwhile would send
				// FORGETs the forget rules count. Held for one run at a
				// time, enable_uring's lock before the caches' (as every
				// test takes them).
				e2e.HoldURing(t)
				e2e.URingOff(t)
				e2e.KeepsCaches(t)
				got = runDoctor(t, c, side.cfg.flags)
			})
			for _, r := range doctor.Rules() {
				want, found := slices.Contains(side.cfg.want, r), slices.Contains(got.rules, r)
				switch {
				case want && found:
					matrix[r].tp++
				case want:
					matrix[r].fn++
					failures = append(failures, fmt.Sprintf("%s (%s %v): %s not reported; %s", c.rule, side.name, side.cfg.flags, r, got.figures))
				case found:
					matrix[r].fp++
					failures = append(failures, fmt.Sprintf("%s (%s %v): %s reported: %s", c.rule, side.name, side.cfg.flags, r, got.evidence[r]))
				default:
					matrix[r].tn++
				}
			}
			if len(got.undecided) > 0 {
				failures = append(failures, fmt.Sprintf("%s (%s): undecided %v", c.rule, side.name, got.undecided))
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-16s %4s %4s %4s %4s\n", "rule", "TP", "FP", "FN", "TN")
	names := doctor.Rules()
	sort.Strings(names)
	for _, r := range names {
		m := matrix[r]
		fmt.Fprintf(&b, "%-16s %4d %4d %4d %4d\n", r, m.tp, m.fp, m.fn, m.tn)
	}
	t.Logf("confusion matrix over %d runs:\n%s", 2*len(cases), b.String())
	for _, f := range failures {
		t.Error(f)
	}
}

type diagnosis struct {
	figures   string // the record's, for a rule that said nothing
	rules     []string
	evidence  map[string]string
	undecided []string
}

// runDoctor mounts the lab fs with flags over a source the case's setup
// filled, and runs fusescope doctor on it while the case's workload runs.
func runDoctor(t *testing.T, c matrixCase, flags []string) diagnosis {
	t.Helper()
	src, mnt := t.TempDir(), t.TempDir()
	env := append(os.Environ(), "SRC="+src, "MNT="+mnt)
	if c.setup != "" {
		sh := exec.Command("sh", "-c", c.setup)
		sh.Env = env
		if out, err := sh.CombinedOutput(); err != nil {
			t.Fatalf("%s setup: %v\n%s", c.rule, err, out)
		}
	}
	args := append(append([]string{"fs", "mount", "--background"}, flags...), src, mnt)
	if out, err := exec.Command(e2e.FusescopePlain, args...).CombinedOutput(); err != nil {
		t.Fatalf("fusescope %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	defer func() {
		if out, err := exec.Command(e2e.FusescopePlain, "fs", "umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("fs umount %s: %v\n%s", mnt, err, out)
			exec.Command("umount", "-l", mnt).Run()
		}
	}()
	return doctorOn(t, mnt, env, c.work, c.doctor...)
}

// doctorOn runs fusescope doctor on mnt while work (a shell command, env
// its environment) runs, and reads its findings.
func doctorOn(t *testing.T, mnt string, env []string, work string, flags ...string) diagnosis {
	t.Helper()
	rec := filepath.Join(t.TempDir(), "doctor.json")
	args := append(append([]string{"doctor", "--mount", mnt, "-o", rec}, flags...), "--", "sh", "-c", work)
	cmd := exec.Command(e2e.Fusescope, args...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fusescope %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	r := e2e.LoadRecord(t, rec)
	if r.Findings == nil {
		t.Fatalf("%s: the record has no findings section", rec)
	}
	d := diagnose(r.Findings)
	var ops []string
	for _, o := range r.Profile.Ops {
		ops = append(ops, fmt.Sprintf("%s %d", o.Op, o.Count))
	}
	for _, m := range r.Meta.Mounts {
		if m.MountPoint == mnt {
			d.figures = fmt.Sprintf("requests %s; files %d, forgets %d (%d nodes)", strings.Join(ops, ", "), m.Nodes, m.Forgets, m.ForgetNodes)
			if ci := m.Connection; ci != nil {
				d.figures += fmt.Sprintf("; fusectl samples %d, above max_background %d, peak %d", ci.Samples, ci.AboveBackground, ci.WaitingPeak)
			}
		}
	}
	d.figures += fmt.Sprintf("; calls %d", len(r.Calls))
	return d
}

func diagnose(f *profile.Findings) diagnosis {
	d := diagnosis{evidence: map[string]string{}}
	for _, x := range f.Findings {
		d.rules = append(d.rules, x.Rule)
		d.evidence[x.Rule] = strings.Join(x.Evidence, "; ")
	}
	for _, u := range f.Undecided {
		d.undecided = append(d.undecided, u.Rule)
	}
	return d
}
