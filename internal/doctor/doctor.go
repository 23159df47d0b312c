// Package doctor names the FUSE performance anti-patterns a record shows:
// rules over a record's figures, each finding with its evidence, its cause,
// the fix as the common daemons spell it and the gain the fix is measured to
// bring (docs/doctor.md). Rules are pure functions of the record, so a live
// run and a saved record give the same findings.
package doctor

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/profile"
)

// rule is one anti-pattern's test. check returns the findings on the
// record's connections, or, when the record lacks what the rule needs,
// what is missing and how to record it.
type rule struct {
	name  string
	check func(in *input) ([]profile.Finding, *profile.Undecided)
}

// Rules are the rules' names, in the order they run.
func Rules() []string {
	names := make([]string, len(rules))
	for i, r := range rules {
		names[i] = r.name
	}
	return names
}

// Diagnose runs every rule over rec; rules narrows them to those named
// (all when empty). Findings come worst first: the most FUSE time first.
func Diagnose(rec *profile.Record, only ...string) (*profile.Findings, error) {
	want := map[string]bool{}
	for _, n := range only {
		if !known(n) {
			return nil, fmt.Errorf("no doctor rule is named %q: give one of %s", n, strings.Join(Rules(), ", "))
		}
		want[n] = true
	}
	in := newInput(rec)
	out := &profile.Findings{Rules: []string{}, Findings: []profile.Finding{}}
	for _, r := range rules {
		if len(want) > 0 && !want[r.name] {
			continue
		}
		out.Rules = append(out.Rules, r.name)
		found, undecided := r.check(in)
		if undecided != nil {
			undecided.Rule = r.name
			out.Undecided = append(out.Undecided, *undecided)
			continue
		}
		for _, f := range found {
			f.Rule = r.name
			if f.Mount == "" {
				if m := rec.Mount(f.Conn); m != nil {
					f.Mount = m.MountPoint
				}
			}
			out.Findings = append(out.Findings, f)
		}
	}
	sort.SliceStable(out.Findings, func(i, j int) bool { return out.Findings[i].Cost > out.Findings[j].Cost })
	return out, nil
}

func known(name string) bool {
	for _, r := range rules {
		if r.name == name {
			return true
		}
	}
	return false
}

// input is the record as the rules read it: per connection, its opcodes'
// statistics by name.
type input struct {
	rec    *profile.Record
	conns  []*conn
	kernel [2]int // major, minor; 0, 0 when the record does not say
	stages bool   // trace --stages ran: ops carry their stages
}

type conn struct {
	id       uint32
	label    string
	ops      map[string]*profile.OpStats
	requests uint64
	fuseNs   uint64 // the requests' latency, summed
	mount    *profile.Mount
	cache    *profile.PageCache
	hung     []profile.HungRequest
}

func newInput(rec *profile.Record) *input {
	in := &input{rec: rec, kernel: kernelVersion(rec.Meta.Kernel), stages: rec.Meta.Measures(profile.MeasuredStages)}
	byID := map[uint32]*conn{}
	get := func(id uint32) *conn {
		c := byID[id]
		if c == nil {
			c = &conn{id: id, label: rec.Label(id), ops: map[string]*profile.OpStats{}, mount: rec.Mount(id)}
			byID[id] = c
			in.conns = append(in.conns, c)
		}
		return c
	}
	for i := range rec.Profile.Ops {
		o := &rec.Profile.Ops[i]
		c := get(o.Conn)
		if prev := c.ops[o.Op]; prev != nil {
			// One (conn, opcode) per profile; a record that repeats one is summed.
			sum := *prev
			sum.Count += o.Count
			sum.ReqBytes += o.ReqBytes
			sum.ReplyBytes += o.ReplyBytes
			sum.Latency = prev.Latency.Clone()
			sum.Latency.Merge(&o.Latency)
			c.ops[o.Op] = &sum
		} else {
			c.ops[o.Op] = o
		}
		c.requests += o.Count
		c.fuseNs += o.Latency.Sum
		if len(o.Stages) > 0 {
			in.stages = true
		}
	}
	for i := range rec.PageCache {
		get(rec.PageCache[i].Conn).cache = &rec.PageCache[i]
	}
	for _, h := range rec.Hung {
		c := get(h.Conn)
		c.hung = append(c.hung, h)
	}
	sort.Slice(in.conns, func(i, j int) bool { return in.conns[i].id < in.conns[j].id })
	return in
}

// count is how many requests of an opcode the connection made.
func (c *conn) count(op fuseproto.Opcode) uint64 {
	if o := c.ops[op.String()]; o != nil {
		return o.Count
	}
	return 0
}

// time is the opcode's requests' latency, summed, in ns.
func (c *conn) time(op fuseproto.Opcode) uint64 {
	if o := c.ops[op.String()]; o != nil {
		return o.Latency.Sum
	}
	return 0
}

// bytes is the data an opcode's requests carried: a READ's reply, a
// WRITE's request, less their FUSE headers.
func (c *conn) bytes(op fuseproto.Opcode) uint64 {
	o := c.ops[op.String()]
	if o == nil {
		return 0
	}
	b, headers := o.ReplyBytes, o.Count*16 // fuse_out_header
	if op == fuseproto.Write {
		b, headers = o.ReqBytes, o.Count*writeHeaderBytes
	}
	if b < headers {
		return 0
	}
	return b - headers
}

// kernelAtLeast says whether the record's kernel is at least major.minor;
// false when the record does not name its kernel.
func (in *input) kernelAtLeast(major, minor int) bool {
	k := in.kernel
	return k[0] > major || (k[0] == major && k[1] >= minor)
}

func kernelVersion(release string) [2]int {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return [2]int{}
	}
	major, err1 := strconv.Atoi(parts[0])
	minor := parts[1]
	if i := strings.IndexFunc(minor, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minor = minor[:i]
	}
	m, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil {
		return [2]int{}
	}
	return [2]int{major, m}
}

// calls sums the application's calls of the named system calls.
func (in *input) calls(names ...string) (sum profile.CallStats, latencyNs uint64) {
	for _, c := range in.rec.Calls {
		for _, n := range names {
			if c.Syscall == n {
				sum.Count += c.Count
				sum.WithRequests += c.WithRequests
				sum.Requests += c.Requests
				sum.FuseNs += c.FuseNs
				latencyNs += c.Latency.Sum
			}
		}
	}
	return sum, latencyNs
}

// callsRecorded says whether the record holds the application's calls
// (trace --calls).
func (in *input) callsRecorded() bool {
	return len(in.rec.Calls) > 0 || in.rec.Meta.Measures(profile.MeasuredCalls)
}

// needCalls is what a rule that reads the application's calls says when
// the record has none.
var needCalls = &profile.Undecided{
	Missing: "the application's file calls",
	Record:  "run fusescope doctor -- CMD (or -p PID), or trace --calls with -p, --comm or -- CMD",
}

// needStages is what a rule that reads the requests' stages says when the
// record has none.
var needStages = &profile.Undecided{
	Missing: "the requests' stages (queue, daemon, reply)",
	Record:  "run fusescope doctor, or trace --stages",
}

// Figures keep the views' spelling: thousands separated, times in the
// unit that reads best.
func n(v uint64) string {
	s := strconv.FormatUint(v, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func dur(ns float64) string {
	switch {
	case ns >= 1e9:
		return strconv.FormatFloat(ns/1e9, 'f', 2, 64) + " s"
	case ns >= 1e6:
		return strconv.FormatFloat(ns/1e6, 'f', 2, 64) + " ms"
	case ns >= 1e3:
		return strconv.FormatFloat(ns/1e3, 'f', 1, 64) + " us"
	}
	return strconv.FormatFloat(ns, 'f', 0, 64) + " ns"
}

func pct(f float64) string { return strconv.FormatFloat(100*f, 'f', 0, 64) + "%" }

func ratio(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func bytesOf(v float64) string {
	switch {
	case v >= 1<<20:
		return strconv.FormatFloat(v/(1<<20), 'f', 1, 64) + " MiB"
	case v >= 1<<10:
		return strconv.FormatFloat(v/(1<<10), 'f', 1, 64) + " KiB"
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + " B"
}
