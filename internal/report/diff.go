package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/stats"
)

// DiffSchema names the diff's JSON format and its major version.
const DiffSchema = "fusescope.diff/v1"

// DiffInput is one side of a diff: the records of one file (an interval
// trace's are summed).
type DiffInput struct {
	Name    string
	Records []*profile.Record
}

// Diff compares two records of one kind, row by row.
type Diff struct {
	Schema string   `json:"schema"`
	Kind   string   `json:"kind"` // requests, syscalls or bench
	A      DiffSide `json:"a"`
	B      DiffSide `json:"b"`
	// Requests: per mount, opcode and stage; the total stage's rows by
	// how much they changed the total time, each followed by its stages.
	Requests []RequestDiff `json:"requests,omitempty"`
	// Syscalls: per system call, by how much its time changed.
	Syscalls []SyscallDiff `json:"syscalls,omitempty"`
	// Bench: per workload, metric and configuration.
	Bench []BenchDiff `json:"bench,omitempty"`
	// Functions: kfunc's or ufunc's, per function, the largest change in
	// time first; DaemonStage: ufunc --stages' daemon stage by function,
	// per opcode, as time per request.
	Functions   []FunctionDiff `json:"functions,omitempty"`
	DaemonStage []StageDiff    `json:"daemon_stage,omitempty"`
	// Findings: fusescope doctor's, where either record holds them.
	Findings *FindingsDiff `json:"findings,omitempty"`
	// Notes say what was paired or left out, one line each.
	Notes []string `json:"notes,omitempty"`
}

// DiffSide says what one side is.
type DiffSide struct {
	File    string  `json:"file"`
	Source  string  `json:"source"`
	Records int     `json:"records"`
	Seconds float64 `json:"seconds,omitempty"` // the window measured; 0: unknown (rates left out)
}

// RequestFigures are one side's figures for a row.
type RequestFigures struct {
	Count  uint64     `json:"count"`
	Errors uint64     `json:"errors"`
	Rate   float64    `json:"rate_per_s,omitempty"`
	P50    float64    `json:"p50_s"`
	P99    float64    `json:"p99_s"`
	Total  float64    `json:"total_s"`
	hist   *hist.Hist // for the histograms side by side
}

// RequestDiff is a mount's opcode (and stage) in both records.
type RequestDiff struct {
	Mount  string         `json:"mount"`
	MountB string         `json:"mount_b,omitempty"` // B's mount, when two differently named mounts were paired
	Op     string         `json:"op"`
	Stage  profile.Stage  `json:"stage"`
	A      RequestFigures `json:"a"`
	B      RequestFigures `json:"b"`
	// The changes, B against A, in per cent; absent where A's figure is
	// 0 (no ratio to give).
	CountPct *float64 `json:"count_delta_pct,omitempty"`
	RatePct  *float64 `json:"rate_delta_pct,omitempty"`
	P50Pct   *float64 `json:"p50_delta_pct,omitempty"`
	P99Pct   *float64 `json:"p99_delta_pct,omitempty"`
	TotalS   float64  `json:"total_delta_s"` // B's total time less A's: the impact the rows are sorted by
}

// FindingsDiff sets doctor's findings of two records side by side, each
// named "rule on mount": gone in B (a fix that worked), new in B, and in
// both.
type FindingsDiff struct {
	Gone []string `json:"gone"`
	New  []string `json:"new"`
	Both []string `json:"both"`
}

func diffFindings(a, b *profile.Findings) *FindingsDiff {
	if a == nil && b == nil {
		return nil
	}
	names := func(f *profile.Findings) map[string]bool {
		out := map[string]bool{}
		if f != nil {
			for _, x := range f.Findings {
				out[x.Rule+" on "+x.Mount] = true
			}
		}
		return out
	}
	na, nb := names(a), names(b)
	d := &FindingsDiff{Gone: []string{}, New: []string{}, Both: []string{}}
	for k := range na {
		if nb[k] {
			d.Both = append(d.Both, k)
		} else {
			d.Gone = append(d.Gone, k)
		}
	}
	for k := range nb {
		if !na[k] {
			d.New = append(d.New, k)
		}
	}
	for _, l := range [][]string{d.Gone, d.New, d.Both} {
		slices.Sort(l)
	}
	return d
}

// SyscallDiff is a system call in both reports.
type SyscallDiff struct {
	Syscall  string   `json:"syscall"`
	Category string   `json:"category"`
	CallsA   int      `json:"calls_a"`
	CallsB   int      `json:"calls_b"`
	ErrorsA  int      `json:"errors_a"`
	ErrorsB  int      `json:"errors_b"`
	TimeA    float64  `json:"time_a_s"`
	TimeB    float64  `json:"time_b_s"`
	CallsPct *float64 `json:"calls_delta_pct,omitempty"`
	TimePct  *float64 `json:"time_delta_pct,omitempty"`
	TimeS    float64  `json:"time_delta_s"`
}

// BenchDiff is a bench result in both runs, compared as benchstat
// compares two runs: "~" where their spread cannot support a difference.
type BenchDiff struct {
	Workload       string           `json:"workload"`
	Metric         string           `json:"metric"`
	Unit           string           `json:"unit"`
	Configuration  string           `json:"configuration"`
	HigherIsBetter bool             `json:"higher_is_better"`
	A              stats.Summary    `json:"a"`
	B              stats.Summary    `json:"b"`
	Comparison     stats.Comparison `json:"comparison"` // B against A
	Delta          string           `json:"delta"`      // "+12.3%", "-4.0%" or "~"
}

// Diff kinds: the kinds of record (Kind).
const (
	DiffRequests  = KindRequests
	DiffSyscalls  = KindSyscalls
	DiffBench     = KindBench
	DiffFunctions = KindFunctions
)

// NewDiff compares b with a. Records of different kinds are refused in
// one sentence.
func NewDiff(a, b DiffInput) (*Diff, error) {
	ka, kb := Kind(a.Records[0]), Kind(b.Records[0])
	if ka != kb {
		return nil, fmt.Errorf("%s is %s and %s is %s: diff compares records of one kind", a.Name, KindNames[ka], b.Name, KindNames[kb])
	}
	for _, in := range []DiffInput{a, b} {
		for _, r := range in.Records {
			if Kind(r) != ka {
				return nil, fmt.Errorf("%s mixes records of different kinds: give one kind per file", in.Name)
			}
		}
		if ka != DiffRequests && ka != DiffFunctions && len(in.Records) > 1 {
			return nil, fmt.Errorf("%s holds %d %s records: diff takes one per file", in.Name, len(in.Records), ka)
		}
	}
	d := &Diff{Schema: DiffSchema, Kind: ka, A: side(a), B: side(b)}
	switch ka {
	case DiffRequests:
		wa, wb := WholeRun(a.Records), WholeRun(b.Records)
		d.diffRequests(wa, wb)
		if FunctionsOf(wa) != nil || FunctionsOf(wb) != nil {
			d.diffFunctions(FunctionsOf(wa), FunctionsOf(wb))
		}
		d.Findings = diffFindings(a.Records[len(a.Records)-1].Findings, b.Records[len(b.Records)-1].Findings)
	case DiffFunctions:
		d.diffFunctions(FunctionsOf(WholeRun(a.Records)), FunctionsOf(WholeRun(b.Records)))
	case DiffSyscalls:
		d.diffSyscalls(a.Records[0].Syscalls, b.Records[0].Syscalls)
	case DiffBench:
		d.diffBench(a.Records[0].Bench, b.Records[0].Bench)
	}
	return d, nil
}

func side(in DiffInput) DiffSide {
	first, last := in.Records[0], in.Records[len(in.Records)-1]
	s := DiffSide{File: in.Name, Source: first.Meta.Source, Records: len(in.Records)}
	if !first.Meta.Start.IsZero() && last.Meta.End.After(first.Meta.Start) {
		s.Seconds = last.Meta.End.Sub(first.Meta.Start).Seconds()
	}
	return s
}

// merged sums the records of an interval trace into one.
func merged(recs []*profile.Record) *profile.Record {
	if len(recs) == 1 {
		return recs[0]
	}
	out := *recs[0]
	out.Profile = profile.Profile{}
	at := map[profile.Key]int{}
	for _, r := range recs {
		for i := range r.Profile.Ops {
			s := &r.Profile.Ops[i]
			j, ok := at[s.Key()]
			if !ok {
				j = len(out.Profile.Ops)
				at[s.Key()] = j
				out.Profile.Ops = append(out.Profile.Ops, profile.OpStats{Conn: s.Conn, Op: s.Op, Opcode: s.Opcode})
			}
			out.Profile.Ops[j].Add(s)
		}
		for _, m := range r.Meta.Mounts {
			if out.Mount(m.Conn) == nil {
				out.Meta.Mounts = append(out.Meta.Mounts, m)
			}
		}
	}
	return &out
}

// pct is (b-a)/a in per cent; nil when a is 0.
func pctChange(a, b float64) *float64 {
	if a == 0 {
		return nil
	}
	v := 100 * (b - a) / a
	return &v
}

// figures are a histogram's figures over seconds of window.
func figures(s *profile.OpStats, h *hist.Hist, seconds float64) RequestFigures {
	f := RequestFigures{Count: h.Count, Errors: s.Errors, hist: h}
	if h.Count > 0 {
		f.P50, f.P99 = h.Quantile(0.5)/1e9, h.Quantile(0.99)/1e9
		f.Total = float64(h.Sum) / 1e9
	}
	if seconds > 0 {
		f.Rate = float64(h.Count) / seconds
	}
	return f
}

// mountPairs matches A's connections with B's by mount point; when each
// record has one connection, those two are paired whatever their names.
func mountPairs(a, b *profile.Record) (pairs map[uint32]uint32, notes []string) {
	conns := func(r *profile.Record) []uint32 {
		var out []uint32
		for _, s := range r.Profile.Ops {
			if !slices.Contains(out, s.Conn) {
				out = append(out, s.Conn)
			}
		}
		slices.Sort(out)
		return out
	}
	ca, cb := conns(a), conns(b)
	pairs = map[uint32]uint32{}
	if len(ca) == 1 && len(cb) == 1 {
		pairs[ca[0]] = cb[0]
		if la, lb := a.Label(ca[0]), b.Label(cb[0]); la != lb {
			notes = append(notes, fmt.Sprintf("%s in A is compared with %s in B (each record has one mount)", la, lb))
		}
		return pairs, notes
	}
	byLabel := map[string]uint32{}
	for _, c := range cb {
		byLabel[b.Label(c)] = c
	}
	for _, c := range ca {
		if cbc, ok := byLabel[a.Label(c)]; ok {
			pairs[c] = cbc
		}
	}
	return pairs, notes
}

// diffRequests fills the per mount, opcode and stage rows.
func (d *Diff) diffRequests(a, b *profile.Record) {
	pairs, notes := mountPairs(a, b)
	d.Notes = append(d.Notes, notes...)
	type key struct {
		mount string
		op    string
	}
	rows := map[key]*[2]*profile.OpStats{}
	var order []key
	add := func(k key, side int, s *profile.OpStats) {
		r, ok := rows[k]
		if !ok {
			r = &[2]*profile.OpStats{}
			rows[k] = r
			order = append(order, k)
		}
		r[side] = s
	}
	labelB := map[string]string{} // A's label -> B's, where they differ
	for i := range a.Profile.Ops {
		s := &a.Profile.Ops[i]
		add(key{a.Label(s.Conn), s.Op}, 0, s)
	}
	inverse := map[uint32]uint32{}
	for ca, cb := range pairs {
		inverse[cb] = ca
		if la, lb := a.Label(ca), b.Label(cb); la != lb {
			labelB[la] = lb
		}
	}
	for i := range b.Profile.Ops {
		s := &b.Profile.Ops[i]
		label := b.Label(s.Conn)
		if ca, ok := inverse[s.Conn]; ok {
			label = a.Label(ca)
		}
		add(key{label, s.Op}, 1, s)
	}
	var empty profile.OpStats
	type group struct {
		total  RequestDiff
		stages []RequestDiff
	}
	var groups []group
	for _, k := range order {
		r := rows[k]
		sa, sb := r[0], r[1]
		if sa == nil {
			sa = &empty
		}
		if sb == nil {
			sb = &empty
		}
		row := func(st profile.Stage) (RequestDiff, bool) {
			ha, hb := sa.Stage(st), sb.Stage(st)
			if ha == nil && hb == nil {
				return RequestDiff{}, false
			}
			var none hist.Hist
			if ha == nil {
				ha = &none
			}
			if hb == nil {
				hb = &none
			}
			rd := RequestDiff{Mount: k.mount, MountB: labelB[k.mount], Op: k.op, Stage: st,
				A: figures(sa, ha, d.A.Seconds), B: figures(sb, hb, d.B.Seconds)}
			if st != profile.StageTotal {
				rd.A.Errors, rd.B.Errors = 0, 0 // a stage has no errors of its own
			}
			rd.CountPct = pctChange(float64(rd.A.Count), float64(rd.B.Count))
			if rd.A.Rate > 0 && rd.B.Rate >= 0 && d.B.Seconds > 0 {
				rd.RatePct = pctChange(rd.A.Rate, rd.B.Rate)
			}
			if rd.A.Count > 0 && rd.B.Count > 0 {
				rd.P50Pct = pctChange(rd.A.P50, rd.B.P50)
				rd.P99Pct = pctChange(rd.A.P99, rd.B.P99)
			}
			rd.TotalS = rd.B.Total - rd.A.Total
			return rd, true
		}
		g := group{}
		g.total, _ = row(profile.StageTotal)
		for _, st := range []profile.Stage{profile.StageQueue, profile.StageDaemon, profile.StageReply} {
			if rd, ok := row(st); ok {
				g.stages = append(g.stages, rd)
			}
		}
		groups = append(groups, g)
	}
	slices.SortStableFunc(groups, func(x, y group) int {
		if c := cmp.Compare(math.Abs(y.total.TotalS), math.Abs(x.total.TotalS)); c != 0 {
			return c
		}
		return cmp.Compare(x.total.Mount+" "+x.total.Op, y.total.Mount+" "+y.total.Op)
	})
	for _, g := range groups {
		d.Requests = append(d.Requests, g.total)
		d.Requests = append(d.Requests, g.stages...)
	}
	if d.A.Seconds == 0 || d.B.Seconds == 0 {
		d.Notes = append(d.Notes, "a record without its window's start and end: no rates")
	}
}

// diffSyscalls fills the per system call rows.
func (d *Diff) diffSyscalls(a, b *profile.SyscallReport) {
	at := map[string]int{}
	for _, s := range a.Syscalls {
		at[s.Name] = len(d.Syscalls)
		d.Syscalls = append(d.Syscalls, SyscallDiff{Syscall: s.Name, Category: s.Category, CallsA: s.Calls, ErrorsA: s.Errors, TimeA: s.TimeS})
	}
	for _, s := range b.Syscalls {
		i, ok := at[s.Name]
		if !ok {
			i = len(d.Syscalls)
			d.Syscalls = append(d.Syscalls, SyscallDiff{Syscall: s.Name, Category: s.Category})
		}
		r := &d.Syscalls[i]
		r.CallsB, r.ErrorsB, r.TimeB = s.Calls, s.Errors, s.TimeS
	}
	for i := range d.Syscalls {
		r := &d.Syscalls[i]
		r.CallsPct = pctChange(float64(r.CallsA), float64(r.CallsB))
		r.TimePct = pctChange(r.TimeA, r.TimeB)
		r.TimeS = r.TimeB - r.TimeA
	}
	slices.SortStableFunc(d.Syscalls, func(x, y SyscallDiff) int {
		if c := cmp.Compare(math.Abs(y.TimeS), math.Abs(x.TimeS)); c != 0 {
			return c
		}
		return cmp.Compare(x.Syscall, y.Syscall)
	})
}

// diffBench fills the per result rows.
func (d *Diff) diffBench(a, b *profile.BenchReport) {
	type key struct{ w, m, c string }
	at := map[key]profile.BenchResult{}
	for _, r := range a.Results {
		at[key{r.Workload, r.Metric, r.Configuration}] = r
	}
	missing := 0
	for _, rb := range b.Results {
		ra, ok := at[key{rb.Workload, rb.Metric, rb.Configuration}]
		if !ok || len(ra.Values) == 0 || len(rb.Values) == 0 {
			missing++
			continue
		}
		c := stats.Compare(ra.Values, rb.Values, false)
		d.Bench = append(d.Bench, BenchDiff{Workload: rb.Workload, Metric: rb.Metric, Unit: rb.Unit, Configuration: rb.Configuration,
			HigherIsBetter: rb.HigherIsBetter, A: ra.Summary, B: rb.Summary, Comparison: c, Delta: c.Delta()})
		delete(at, key{rb.Workload, rb.Metric, rb.Configuration})
	}
	if missing+len(at) > 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("%s in one run only (a workload, metric or configuration the other did not have): left out", plural(missing+len(at), "result is", "results are")))
	}
}

// Worse says whether a change is for the worse: more time, fewer
// operations per second.
func (r *RequestDiff) Worse() bool { return r.TotalS > 0 }

// pctText prints a change in per cent, "new" where A had none, "" where neither had any.
func pctText(p *float64, a, b float64) string {
	switch {
	case p != nil:
		return fmt.Sprintf("%+.1f%%", *p)
	case a == 0 && b != 0:
		return "new"
	}
	return ""
}

// shortStage is a stage's name in the text's STAGE column.
func shortStage(s profile.Stage) string {
	if s == profile.StageTotal {
		return ""
	}
	return strings.ToLower(string(s))
}
