package doctor

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
)

// rec builds a record of one mount (conn 7, /mnt) with the kernel and the
// measured sections every rule reads.
type rec struct{ r *profile.Record }

func newRec() *rec {
	return &rec{&profile.Record{
		Schema: profile.Schema,
		Meta: profile.Meta{Kernel: "6.18.3+deb13-amd64",
			Measured: []string{profile.MeasuredStages, profile.MeasuredCalls, profile.MeasuredPageCache, profile.MeasuredHung, profile.MeasuredFiles, profile.MeasuredForgets},
			Mounts: []profile.Mount{{Conn: 7, MountPoint: "/mnt", Connection: &profile.ConnInfo{MaxBackground: 12, CongestionThreshold: 9},
				Daemons: []profile.Daemon{{PID: 42, Comm: "food"}}}}},
	}}
}

// op adds count requests of op, each taking each ns, with reqBytes and
// replyBytes in all, and a daemon stage of daemonNs each (0: none).
func (b *rec) op(op string, count, each, reqBytes, replyBytes, daemonNs uint64) *rec {
	s := profile.OpStats{Conn: 7, Op: op, Count: count, ReqBytes: reqBytes, ReplyBytes: replyBytes}
	for range count {
		s.Latency.Add(each)
	}
	if daemonNs > 0 {
		var d hist.Hist
		for range count {
			d.Add(daemonNs)
		}
		s.Stages = []profile.StageLatency{{Stage: profile.StageDaemon, Latency: d}}
	}
	b.r.Profile.Ops = append(b.r.Profile.Ops, s)
	return b
}

func (b *rec) errnos(op string, errno string, n uint64) *rec {
	for i := range b.r.Profile.Ops {
		if b.r.Profile.Ops[i].Op == op {
			b.r.Profile.Ops[i].Errors += n
			b.r.Profile.Ops[i].Errnos = map[string]uint64{errno: n}
		}
	}
	return b
}

func (b *rec) call(name string, count, withRequests, requests, fuseNs, callNs uint64) *rec {
	c := profile.CallStats{Syscall: name, Count: count, WithRequests: withRequests, Requests: requests, FuseNs: fuseNs}
	for range count {
		c.Latency.Add(callNs / count)
	}
	b.r.Calls = append(b.r.Calls, c)
	return b
}

func (b *rec) mount(f func(m *profile.Mount)) *rec { f(&b.r.Meta.Mounts[0]); return b }

func (b *rec) rules(t *testing.T) []string {
	t.Helper()
	f, err := Diagnose(b.r)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range f.Findings {
		names = append(names, x.Rule)
		if x.Mount != "/mnt" || len(x.Evidence) == 0 || x.Cause == "" || len(x.Fix) == 0 || x.Gain == "" {
			t.Errorf("%s: a finding without its mount, evidence, cause, fix or gain: %+v", x.Rule, x)
		}
	}
	return names
}

// Each rule on a record just past its threshold and one just short of it.
func TestRulesThresholds(t *testing.T) {
	const ms, us = uint64(time.Millisecond), uint64(time.Microsecond)
	cases := []struct {
		rule      string
		bad, good *rec
	}{
		{"killpriv",
			newRec().op("WRITE", 100, 50*us, 100*(80+65536), 0, 0).op("GETXATTR", 100, 20*us, 0, 0, 0),
			newRec().op("WRITE", 100, 50*us, 100*(80+65536), 0, 0).op("GETXATTR", 1, 20*us, 0, 0, 0)},
		{"killpriv", // per write call, with write-back's few WRITEs
			newRec().op("WRITE", 4, 50*us, 4*(80+1<<20), 0, 0).op("GETXATTR", 1000, 20*us, 0, 0, 0).call("write", 1000, 1000, 1000, 20*ms, 40*ms),
			newRec().op("WRITE", 4, 50*us, 4*(80+1<<20), 0, 0).op("GETXATTR", 1, 20*us, 0, 0, 0).call("write", 1000, 1, 1, 20*us, 4*ms)},
		{"small-writes",
			newRec().op("WRITE", 1000, 30*us, 1000*(80+4096), 0, 0),
			newRec().op("WRITE", 1000, 30*us, 1000*(80+65536), 0, 0)},
		{"split-writes",
			newRec().op("WRITE", 128, 100*us, 128*(80+128<<10), 0, 0).call("write", 16, 16, 128, 2*ms, 20*ms),
			newRec().op("WRITE", 128, 100*us, 128*(80+128<<10), 0, 0).call("write", 128, 128, 128, 12*ms, 20*ms)},
		{"direct-io",
			newRec().op("READ", 1000, 20*us, 0, 1000*(16+4096), 0).call("read", 1000, 1000, 1000, 20*ms, 30*ms),
			newRec().op("READ", 32, 200*us, 0, 32*(16+128<<10), 0).call("read", 1000, 32, 32, 6*ms, 10*ms)},
		{"attr-storm",
			newRec().op("LOOKUP", 500, 30*us, 0, 0, 0).op("GETATTR", 500, 30*us, 0, 0, 0).call("statx", 500, 500, 1000, 15*ms, 40*ms).mount(func(m *profile.Mount) { m.Nodes = 100 }),
			newRec().op("LOOKUP", 500, 30*us, 0, 0, 0).op("GETATTR", 500, 30*us, 0, 0, 0).call("statx", 500, 500, 1000, 15*ms, 40*ms).mount(func(m *profile.Mount) { m.Nodes = 500 })},
		{"readdir-lookups",
			newRec().op("READDIR", 3, 50*us, 0, 0, 0).op("LOOKUP", 300, 30*us, 0, 0, 0),
			newRec().op("READDIRPLUS", 3, 50*us, 0, 0, 0).op("READDIR", 1, 50*us, 0, 0, 0).op("LOOKUP", 300, 30*us, 0, 0, 0)},
		{"serial-dirops",
			newRec().op("LOOKUP", 400, 2*ms, 0, 0, 0).call("statx", 400, 400, 400, 800*ms, 3200*ms),
			newRec().op("LOOKUP", 400, 2*ms, 0, 0, 0).call("statx", 400, 400, 400, 800*ms, 900*ms)},
		{"max-background",
			newRec().op("READ", 128, 2*ms, 0, 0, 0).mount(func(m *profile.Mount) { m.Connection.Samples, m.Connection.AboveBackground = 100, 60 }),
			newRec().op("READ", 128, 2*ms, 0, 0, 0).mount(func(m *profile.Mount) { m.Connection.Samples, m.Connection.AboveBackground = 100, 10 })},
		{"daemon-stage",
			newRec().op("LOOKUP", 200, 1100*us, 0, 0, 1000*us),
			newRec().op("LOOKUP", 200, 60*us, 0, 0, 50*us)},
		{"enosys",
			newRec().op("GETXATTR", 200, 20*us, 0, 0, 0).errnos("GETXATTR", "EOPNOTSUPP", 200),
			newRec().op("GETXATTR", 1, 20*us, 0, 0, 0).errnos("GETXATTR", "ENOSYS", 1)},
		{"enosys", // an opcode whose ENOSYS the kernel does not remember
			newRec().op("IOCTL", 5, 20*us, 0, 0, 0).errnos("IOCTL", "ENOSYS", 5),
			newRec().op("IOCTL", 1, 20*us, 0, 0, 0).errnos("IOCTL", "ENOSYS", 1)},
		{"keep-cache",
			newRec().op("OPEN", 10, 20*us, 0, 0, 0).op("READ", 40, 300*us, 0, 0, 0),
			newRec().op("OPEN", 10, 20*us, 0, 0, 0).op("READ", 4, 300*us, 0, 0, 0)},
		{"no-forget",
			newRec().op("LOOKUP", 6000, 30*us, 0, 0, 0).mount(func(m *profile.Mount) { m.Nodes = 6000 }),
			newRec().op("LOOKUP", 6000, 30*us, 0, 0, 0).mount(func(m *profile.Mount) { m.Nodes, m.Forgets, m.ForgetNodes = 6000, 40, 4000 })},
		{"forget-storm",
			newRec().op("LOOKUP", 6000, 30*us, 0, 0, 0).mount(func(m *profile.Mount) { m.Nodes, m.Forgets, m.ForgetNodes = 2000, 4000, 5800 }),
			newRec().op("LOOKUP", 6000, 30*us, 0, 0, 0).mount(func(m *profile.Mount) { m.Nodes, m.Forgets, m.ForgetNodes = 6000, 40, 4000 })},
		{"passthrough",
			newRec().op("READ", 640, 100*us, 0, 640*(16+64<<10), 0).mount(func(m *profile.Mount) { m.Daemons[0].Backing = "ext4 (/srv)" }),
			newRec().op("READ", 640, 100*us, 0, 640*(16+64<<10), 0).mount(func(m *profile.Mount) { m.Daemons[0].Backing, m.PassthroughOpens = "ext4 (/srv)", 3 })},
		{"daemon-stage", // 1 MiB WRITEs at 5 MiB/s are the daemon's backend; at 23 MiB/s (a loaded machine's tmpfs) their data's
			newRec().op("WRITE", 4, 210*ms, 4<<20, 0, 200*ms),
			newRec().op("WRITE", 4, 45*ms, 4<<20, 0, 43*ms)},
		{"io-uring",
			newRec().op("LOOKUP", 300, 30*us, 0, 0, 0).mount(func(*profile.Mount) {}),
			newRec().op("LOOKUP", 300, 30*us, 0, 0, 0)},
	}
	// keep-cache reads the page cache; io-uring the kernel's ring.
	cases[12].bad.r.PageCache = []profile.PageCache{{Conn: 7, Added: 10240, Removed: 9216}}
	cases[12].good.r.PageCache = []profile.PageCache{{Conn: 7, Added: 1024}}
	cases[len(cases)-1].bad.r.Meta.FuseURing = true
	cases[len(cases)-1].bad.r.Meta.Kernel = "6.14.0"
	cases[len(cases)-1].good.r.Meta.FuseURing = true
	cases[len(cases)-1].good.r.Meta.Kernel = "6.14.0"
	cases[len(cases)-1].good.r.Profile.Ops[0].URing = 300
	for _, c := range cases {
		if got := c.bad.rules(t); !slices.Contains(got, c.rule) {
			t.Errorf("%s: not found past its threshold (found %v)", c.rule, got)
		}
		if got := c.good.rules(t); slices.Contains(got, c.rule) {
			t.Errorf("%s: found short of its threshold", c.rule)
		}
	}
}

// A hung request is found in any record that lists one.
func TestRuleHung(t *testing.T) {
	r := newRec().op("GETATTR", 1, 1000, 0, 0, 0)
	r.r.Hung = []profile.HungRequest{{Conn: 7, Op: "LOOKUP", Age: 5 * time.Second, PID: 99, Comm: "stat", ThreadState: "D"}}
	f, err := Diagnose(r.r, "hung")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Findings) != 1 || !strings.Contains(strings.Join(f.Findings[0].Fix, " "), "/sys/fs/fuse/connections/7/abort") {
		t.Fatalf("findings %+v: want one, with the connection's abort", f.Findings)
	}
	if got := f.Findings[0].Evidence[1]; !strings.Contains(got, "stat (thread 99)") || !strings.Contains(got, "in state D") {
		t.Errorf("evidence %q: want the waiting thread named, with its state", got)
	}
}

// A record without the data a rule needs: the rule says what is missing
// and how to record it, never nothing.
func TestRulesSayWhatIsMissing(t *testing.T) {
	r := &profile.Record{Schema: profile.Schema, Meta: profile.Meta{Kernel: "6.18.0"},
		Profile: profile.Profile{Ops: []profile.OpStats{{Conn: 7, Op: "LOOKUP", Count: 10}}}}
	f, err := Diagnose(r)
	if err != nil {
		t.Fatal(err)
	}
	undecided := map[string]profile.Undecided{}
	for _, u := range f.Undecided {
		undecided[u.Rule] = u
		if u.Missing == "" || u.Record == "" {
			t.Errorf("%s: undecided without what is missing and how to record it: %+v", u.Rule, u)
		}
	}
	for _, rule := range []string{"split-writes", "direct-io", "attr-storm", "serial-dirops", "max-background", "daemon-stage", "keep-cache", "no-forget", "forget-storm", "passthrough"} {
		if _, ok := undecided[rule]; !ok {
			t.Errorf("%s: decided on a record without the data it reads", rule)
		}
	}
	if len(f.Findings) != 0 {
		t.Errorf("findings %+v on a record of 10 LOOKUPs", f.Findings)
	}
}

// Findings come worst first, and an unknown rule is refused in a sentence
// that lists the rules.
func TestDiagnoseOrderAndRuleNames(t *testing.T) {
	const us = uint64(time.Microsecond)
	r := newRec().op("WRITE", 1000, 30*us, 1000*(80+4096), 0, 0).op("GETXATTR", 1000, 300*us, 0, 0, 0)
	f, err := Diagnose(r.r)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Findings) < 2 || f.Findings[0].Rule != "killpriv" || f.Findings[0].Cost < f.Findings[1].Cost {
		t.Errorf("findings not worst first: %+v", f.Findings)
	}
	if _, err := Diagnose(r.r, "nosuch"); err == nil || !strings.Contains(err.Error(), "killpriv") {
		t.Errorf("an unknown rule: %v, want a sentence listing the rules", err)
	}
	if f, _ := Diagnose(r.r, "small-writes"); len(f.Rules) != 1 || len(f.Findings) != 1 {
		t.Errorf("one rule asked for: ran %v, found %d", f.Rules, len(f.Findings))
	}
}

func TestKernelVersion(t *testing.T) {
	for in, want := range map[string][2]int{"6.18.3+deb13-amd64": {6, 18}, "7.3.4": {7, 3}, "5.10.0-32-amd64": {5, 10}, "": {}, "weird": {}, "6.9rc1": {6, 9}} {
		if got := kernelVersion(in); got != want {
			t.Errorf("kernelVersion(%q) = %v, want %v", in, got, want)
		}
	}
}

// A daemon that asked for the ring and runs over /dev/fuse is named as
// fallen back, or as not offered the ring where enable_uring is off; a
// daemon that did not ask, on a kernel with the ring off, is not a finding.
func TestRuleIOURingAskedFor(t *testing.T) {
	const us = uint64(time.Microsecond)
	for _, c := range []struct {
		enabled bool
		args    []string
		title   string
	}{
		{true, []string{"passthrough_hp", "-o", "io_uring", "/src", "/mnt"}, "fallen back"},
		{false, []string{"passthrough_hp", "-o", "allow_other,io_uring", "/src", "/mnt"}, "not offered"},
		{true, []string{"passthrough_hp", "/src", "/mnt"}, "enabled but not used"},
		{false, []string{"passthrough_hp", "/src", "/mnt"}, ""},
	} {
		r := newRec().op("LOOKUP", 300, 30*us, 0, 0, 0).mount(func(m *profile.Mount) { m.Daemons[0].Args = c.args })
		r.r.Meta.Kernel, r.r.Meta.FuseURing = "6.18.0", c.enabled
		f, err := Diagnose(r.r, "io-uring")
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case c.title == "" && len(f.Findings) > 0:
			t.Errorf("%v, ring off: found %q", c.args, f.Findings[0].Title)
		case c.title != "" && (len(f.Findings) != 1 || !strings.Contains(f.Findings[0].Title, c.title)):
			t.Errorf("%v, ring enabled %v: findings %+v, want one %q", c.args, c.enabled, f.Findings, c.title)
		}
	}
}
