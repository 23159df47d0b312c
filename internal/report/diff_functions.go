package report

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
)

// FunctionDiff is a function (kfunc's or ufunc's) in both records.
type FunctionDiff struct {
	Function string   `json:"function"`
	Module   string   `json:"module,omitempty"`
	CallsA   uint64   `json:"calls_a"`
	CallsB   uint64   `json:"calls_b"`
	CallsPct *float64 `json:"calls_delta_pct,omitempty"`
	// Timed: each side's mean and total time of a call, seconds; absent
	// for a function only counted.
	Timed   bool     `json:"timed"`
	MeanA   float64  `json:"mean_a_s,omitempty"`
	MeanB   float64  `json:"mean_b_s,omitempty"`
	MeanPct *float64 `json:"mean_delta_pct,omitempty"`
	TotalA  float64  `json:"total_a_s,omitempty"`
	TotalB  float64  `json:"total_b_s,omitempty"`
	TotalS  float64  `json:"total_delta_s"` // B's total less A's: the rows are sorted by it
}

// StageDiff is a row of ufunc --stages' daemon stage by function in both
// records, as time per request held (the workloads may differ in size):
// an opcode's whole hold (Function "(held)"), a function's part of it,
// or the part no function accounts for ("(unaccounted for)").
type StageDiff struct {
	Op            string   `json:"op"`
	Function      string   `json:"function"`
	RequestsA     uint64   `json:"requests_a"`
	RequestsB     uint64   `json:"requests_b"`
	PerRequestA   float64  `json:"per_request_a_s"`
	PerRequestB   float64  `json:"per_request_b_s"`
	PerRequestPct *float64 `json:"per_request_delta_pct,omitempty"`
}

// The rows of StageDiff that are not a function's.
const (
	StageHeld        = "(held)"
	StageUnaccounted = "(unaccounted for)"
)

func (d *Diff) diffFunctions(a, b *profile.KernelFunctions) {
	if a == nil || b == nil {
		if a != nil || b != nil {
			d.Notes = append(d.Notes, "only one record holds function calls: they are not compared")
		}
		return
	}
	at := map[string]*profile.FunctionCalls{}
	for i := range a.Functions {
		at[a.Functions[i].Key()] = &a.Functions[i]
	}
	seen := map[string]bool{}
	add := func(fa, fb *profile.FunctionCalls) {
		f := fb
		if f == nil {
			f = fa
		}
		r := FunctionDiff{Function: f.Name, Module: f.Module}
		var ma, mb, ta, tb float64
		if fa != nil {
			r.CallsA = fa.Count
			if fa.Latency != nil {
				r.Timed, ma, ta = true, fa.Latency.Mean()/1e9, float64(fa.Latency.Sum)/1e9
			}
		}
		if fb != nil {
			r.CallsB = fb.Count
			if fb.Latency != nil {
				r.Timed, mb, tb = true, fb.Latency.Mean()/1e9, float64(fb.Latency.Sum)/1e9
			}
		}
		r.CallsPct = pctChange(float64(r.CallsA), float64(r.CallsB))
		if r.Timed {
			r.MeanA, r.MeanB, r.TotalA, r.TotalB, r.TotalS = ma, mb, ta, tb, tb-ta
			if ma > 0 && mb > 0 {
				r.MeanPct = pctChange(ma, mb)
			}
		}
		d.Functions = append(d.Functions, r)
	}
	for i := range b.Functions {
		fb := &b.Functions[i]
		seen[fb.Key()] = true
		add(at[fb.Key()], fb)
	}
	for i := range a.Functions {
		if !seen[a.Functions[i].Key()] {
			add(&a.Functions[i], nil)
		}
	}
	slices.SortStableFunc(d.Functions, func(x, y FunctionDiff) int {
		if c := cmp.Compare(math.Abs(y.TotalS), math.Abs(x.TotalS)); c != 0 {
			return c
		}
		dx, dy := math.Abs(float64(x.CallsB)-float64(x.CallsA)), math.Abs(float64(y.CallsB)-float64(y.CallsA))
		if c := cmp.Compare(dy, dx); c != 0 {
			return c
		}
		return cmp.Compare(x.Function, y.Function)
	})
	d.diffStages(a.DaemonStage, b.DaemonStage)
}

// stageTotals sums a record's daemon stage by function per opcode, over
// its connections.
type stageTotals struct {
	requests, held, unaccounted uint64
	fns                         map[string]uint64
}

func sumStages(rows []profile.StageFunctions) map[string]*stageTotals {
	out := map[string]*stageTotals{}
	for _, s := range rows {
		t := out[s.Op]
		if t == nil {
			t = &stageTotals{fns: map[string]uint64{}}
			out[s.Op] = t
		}
		t.requests += s.Requests
		t.held += s.HeldNs
		t.unaccounted += s.UnaccountedNs()
		for _, f := range s.Functions {
			t.fns[f.Name] += f.Ns
		}
	}
	return out
}

func (d *Diff) diffStages(a, b []profile.StageFunctions) {
	if a == nil || b == nil {
		if a != nil || b != nil {
			d.Notes = append(d.Notes, "only one record holds the daemon stage by function (ufunc --stages): it is not compared")
		}
		return
	}
	sa, sb := sumStages(a), sumStages(b)
	ops := []string{}
	for op := range sa {
		ops = append(ops, op)
	}
	for op := range sb {
		if sa[op] == nil {
			ops = append(ops, op)
		}
	}
	held := func(m map[string]*stageTotals, op string) uint64 {
		if t := m[op]; t != nil {
			return t.held
		}
		return 0
	}
	slices.SortFunc(ops, func(x, y string) int {
		if c := cmp.Compare(max(held(sb, y), held(sa, y)), max(held(sb, x), held(sa, x))); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	empty := &stageTotals{fns: map[string]uint64{}}
	for _, op := range ops {
		ta, tb := cmp.Or(sa[op], empty), cmp.Or(sb[op], empty)
		row := func(fn string, na, nb uint64) StageDiff {
			r := StageDiff{Op: op, Function: fn, RequestsA: ta.requests, RequestsB: tb.requests}
			if ta.requests > 0 {
				r.PerRequestA = float64(na) / float64(ta.requests) / 1e9
			}
			if tb.requests > 0 {
				r.PerRequestB = float64(nb) / float64(tb.requests) / 1e9
			}
			if ta.requests > 0 && tb.requests > 0 {
				r.PerRequestPct = pctChange(r.PerRequestA, r.PerRequestB)
			}
			return r
		}
		d.DaemonStage = append(d.DaemonStage, row(StageHeld, ta.held, tb.held))
		names := []string{}
		for n := range ta.fns {
			names = append(names, n)
		}
		for n := range tb.fns {
			if _, ok := ta.fns[n]; !ok {
				names = append(names, n)
			}
		}
		slices.SortFunc(names, func(x, y string) int {
			if c := cmp.Compare(max(tb.fns[y], ta.fns[y]), max(tb.fns[x], ta.fns[x])); c != 0 {
				return c
			}
			return cmp.Compare(x, y)
		})
		for _, n := range names {
			d.DaemonStage = append(d.DaemonStage, row(n, ta.fns[n], tb.fns[n]))
		}
		d.DaemonStage = append(d.DaemonStage, row(StageUnaccounted, ta.unaccounted, tb.unaccounted))
	}
}

// writeFunctionDiff prints the functions' table, the largest change in
// time first, then the daemon stage by function per request.
func writeFunctionDiff(w io.Writer, d *Diff, o DiffOptions) error {
	if len(d.Functions) > 0 {
		unit := o.unit()
		rows := [][]string{{"FUNCTION", "CALLS A", "CALLS B", "DELTA", "MEAN A(" + unit.Name + ")", "MEAN B(" + unit.Name + ")", "DELTA", "TOTAL A(s)", "TOTAL B(s)", "DELTA(s)"}}
		n := limit(len(d.Functions), o.Top)
		for _, r := range d.Functions[:n] {
			row := []string{Name(r.Function), u(r.CallsA), u(r.CallsB),
				o.paint(pctText(r.CallsPct, float64(r.CallsA), float64(r.CallsB)), r.CallsPct, false, true), "", "", "", "", "", ""}
			if r.Timed {
				copy(row[4:], []string{meanText(r.MeanA, r.CallsA, unit), meanText(r.MeanB, r.CallsB, unit), o.paint(pctText(r.MeanPct, r.MeanA, r.MeanB), r.MeanPct, true, false),
					fmt.Sprintf("%.6f", r.TotalA), fmt.Sprintf("%.6f", r.TotalB), fmt.Sprintf("%+.6f", r.TotalS)})
			}
			rows = append(rows, row)
		}
		Columns(w, rows, "l")
		if n < len(d.Functions) {
			fmt.Fprintf(w, "(%s more: --top 0 shows all)\n", plural(len(d.Functions)-n, "row", "rows"))
		}
	} else {
		io.WriteString(w, "Neither record holds a function's call.\n")
	}
	if len(d.DaemonStage) == 0 {
		return nil
	}
	unit := o.unit()
	fmt.Fprintf(w, "\nDaemon stage by function, per request held, B against A:\n")
	rows := [][]string{{"OP", "FUNCTION", "REQUESTS A", "REQUESTS B", "A(" + unit.Name + ")", "B(" + unit.Name + ")", "DELTA"}}
	for _, r := range d.DaemonStage {
		fn := r.Function
		if fn != StageHeld && fn != StageUnaccounted {
			fn = Name(fn)
		}
		rows = append(rows, []string{r.Op, fn, u(r.RequestsA), u(r.RequestsB), meanText(r.PerRequestA, r.RequestsA, unit), meanText(r.PerRequestB, r.RequestsB, unit),
			o.paint(pctText(r.PerRequestPct, r.PerRequestA, r.PerRequestB), r.PerRequestPct, true, false)})
	}
	Columns(w, rows, "ll")
	return nil
}

// meanText is a mean in the unit, "-" where there was nothing to average.
func meanText(s float64, n uint64, unit hist.Unit) string {
	if n == 0 {
		return "-"
	}
	return secondsIn(s, unit)
}

// secondsIn is seconds in the unit, as the requests' diff gives latencies.
func secondsIn(s float64, unit hist.Unit) string {
	return figure(s * 1e9 / float64(unit.Divisor))
}

// unit is the latencies' unit, microseconds unless one was chosen.
func (o DiffOptions) unit() hist.Unit {
	if o.Unit.Divisor == 0 {
		return hist.Usecs
	}
	return o.Unit
}
