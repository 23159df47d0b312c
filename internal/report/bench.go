package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/stats"
)

// WriteBenchText prints a bench: per workload and metric a table in the
// seeds' style (mean ±% of the 95% interval), the ratio to the baseline
// paired by round with its interval, the delta (that ratio less 1) or
// benchstat's "~" where the rank test cannot support a difference, "†"
// where the interval and the rank test disagree, the FUSE requests per run
// from the traces, then the published figures, the noisy results and the
// notes.
func WriteBenchText(w io.Writer, b *profile.BenchReport) error {
	order := b.Order
	if order == "random" {
		order = fmt.Sprintf("random order, seed %d", b.Seed)
	} else {
		order += " order"
	}
	caches := "caches dropped before each run"
	if !b.DropCaches {
		caches = "caches kept"
	}
	if b.Remount {
		caches += ", remounted (cold)"
	}
	fmt.Fprintf(w, "bench %s: %s, %d of %d rounds (%s), %d warm-up; %s; scratch %s; baseline %s\n",
		b.Name, plural(len(b.Configs), "configuration", "configurations"), b.Rounds, b.Repetitions, order, b.Warmup, caches, b.Scratch, b.Baseline)
	reqs := requestsPerRun(b)
	var noisy []string
	disagree := map[string]bool{}
	unpaired := false
	last := ""
	for i, r := range b.Results {
		if r.Workload+"\x00"+r.Metric != last {
			last = r.Workload + "\x00" + r.Metric
			better := "lower is better"
			if r.HigherIsBetter {
				better = "higher is better"
			}
			fmt.Fprintf(w, "\n%s: %s (%s, %s)\n", r.Workload, r.Metric, r.Unit, better)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintf(tw, "configuration\tmean ±95%%\tmedian\tmin\tmax\tCV\tvs %s [95%% CI]\tdelta (ratio-1)\tp\tFUSE reqs/run\t\n", b.Baseline)
			for _, r := range b.Results[i:] {
				if r.Workload+"\x00"+r.Metric != last {
					break
				}
				s := r.Summary
				ratio, delta, p := "-", "", ""
				if c := r.VsBaseline; c != nil && c.Ratio == 0 {
					delta, p = c.Delta(), fmt.Sprintf("p=%.3f", c.P)
				} else if c != nil {
					ratio = fmt.Sprintf("%.3gx", c.Ratio)
					if c.Paired {
						ratio += fmt.Sprintf(" [%.3g, %.3g]", c.CILow, c.CIHigh)
					} else {
						unpaired = true
					}
					delta, p = c.Delta(), fmt.Sprintf("p=%.3f", c.P)
					if d := c.Disagreement(); d != "" {
						delta += " †"
						disagree[d] = true
					}
				}
				rq := "-"
				if v, ok := reqs[r.Workload+"\x00"+r.Configuration]; ok {
					rq = v
				}
				mean := num(s.Mean)
				if s.N > 1 { // one run has no interval
					mean += " ±" + percent(s.HalfWidthFraction)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.1f%%\t%s\t%s\t%s\t%s\t\n", r.Configuration, mean,
					num(s.Median), num(s.Min), num(s.Max), 100*s.CV, ratio, delta, p, rq)
				if r.Noisy != "" {
					noisy = append(noisy, fmt.Sprintf("%s on %s (%s): %s", r.Workload, r.Configuration, r.Metric, r.Noisy))
				}
			}
			tw.Flush()
		}
	}
	if legend := benchLegend(disagree, unpaired); len(legend) > 0 {
		fmt.Fprintln(w)
		for _, l := range legend {
			fmt.Fprintln(w, l)
		}
	}
	writeBenchSideBySide(w, b)
	writeBenchCalls(w, b)
	writeBenchTransports(w, b)
	if notes := lowPowerNotes(b); len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
	if len(b.Published) > 0 {
		fmt.Fprintf(w, "\nPublished figures beside this run's (ratio to %s):\n", b.Baseline)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "workload\tconfiguration\tpublished\tmeasured\tsource")
		for _, p := range b.Published {
			m := "not measured"
			if p.Measured > 0 {
				m = fmt.Sprintf("%.3gx", p.Measured)
			}
			// The published figure as the source gave it (0.036, not 0.04).
			fmt.Fprintf(tw, "%s\t%s\t%sx\t%s\t%s\n", p.Workload, p.Configuration, strconv.FormatFloat(p.Published, 'f', -1, 64), m, p.Source)
		}
		tw.Flush()
	}
	if len(noisy) > 0 {
		fmt.Fprintln(w, "\nNoisy results (coefficient of variation above 10%):")
		for _, n := range noisy {
			fmt.Fprintln(w, "  "+n)
		}
	}
	if len(b.Notes) > 0 {
		fmt.Fprintln(w, "\nNotes:")
		for _, n := range b.Notes {
			fmt.Fprintln(w, "  "+n)
		}
	}
	return nil
}

// writeBenchTransports names, where a configuration asked for FUSE over
// io_uring or its ring carried requests, the transport that carried each
// configuration's traced runs: a daemon fallen back to /dev/fuse is named
// as such, never as the ring.
func writeBenchTransports(w io.Writer, b *profile.BenchReport) {
	if !slices.ContainsFunc(b.Configs, func(c profile.BenchConfiguration) bool {
		return c.AsksURing || strings.HasPrefix(c.Transport, profile.TransportURing)
	}) {
		return
	}
	fmt.Fprintln(w, "\nTransports (from the runs' traces):")
	for _, c := range b.Configs {
		t := c.Transport
		switch {
		case c.Kind == "native":
			continue
		case t == "":
			t = "not traced"
		case c.AsksURing && t == profile.TransportDevFuse:
			t += " (asked for io_uring: fell back)"
		}
		fmt.Fprintf(w, "  %s: %s\n", c.Name, t)
	}
}

// writeBenchCalls prints, for workloads whose calls were traced, each
// configuration's file calls per run (means over the runs): how many the
// kernel's caches served alone and the requests the others sent.
func writeBenchCalls(w io.Writer, b *profile.BenchReport) {
	type key struct{ wl, conf string }
	type sums struct {
		runs  int
		calls map[string]*profile.CallStats
	}
	var order []key
	by := map[key]*sums{}
	for _, run := range b.Runs {
		if run.Calls == nil {
			continue
		}
		k := key{run.Workload, run.Configuration}
		if by[k] == nil {
			by[k] = &sums{calls: map[string]*profile.CallStats{}}
			order = append(order, k)
		}
		by[k].runs++
		for _, c := range run.Calls {
			t := by[k].calls[c.Syscall]
			if t == nil {
				t = &profile.CallStats{Syscall: c.Syscall}
				by[k].calls[c.Syscall] = t
			}
			t.Count += c.Count
			t.WithRequests += c.WithRequests
			t.Requests += c.Requests
			t.FuseNs += c.FuseNs
			t.Latency.Sum += c.Latency.Sum
		}
	}
	if len(order) == 0 {
		return
	}
	fmt.Fprintln(w, "\nThe workloads' file calls per run (trace --calls: the kernel's caches alone answered the CACHED share):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tconfiguration\tcall\tcalls/run\tCACHED\tREQS/CALL\tIN_FUSE\t")
	for _, k := range order {
		s := by[k]
		names := make([]string, 0, len(s.calls))
		for n := range s.calls {
			names = append(names, n)
		}
		sort.Slice(names, func(i, j int) bool { return s.calls[names[i]].Count > s.calls[names[j]].Count })
		for _, n := range names[:min(5, len(names))] {
			c := s.calls[n]
			in := 0.0
			if c.Latency.Sum > 0 {
				in = float64(c.FuseNs) / float64(c.Latency.Sum)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%.0f%%\t%.2f\t%.0f%%\t\n", k.wl, k.conf, n, float64(c.Count)/float64(s.runs),
				100*float64(c.Count-c.WithRequests)/float64(max(c.Count, 1)), float64(c.Requests)/float64(max(c.Count, 1)), 100*in)
		}
	}
	tw.Flush()
}

// benchLegend explains the marks of the tables: where the two tests
// disagreed, and ratios that could not be paired by round.
func benchLegend(disagree map[string]bool, unpaired bool) []string {
	var l []string
	if disagree[stats.IntervalOnly] {
		l = append(l, "† with ~: the paired interval excludes 1, the rank test does not support a difference (p >= 0.05):",
			"  pairing by round cancels drift between rounds that the unpaired rank test counts as spread,",
			"  and the rank test cannot reach 0.05 with fewer than 4 runs a side (docs/bench.md).")
	}
	if disagree[stats.RankOnly] {
		l = append(l, "† with a delta: the rank test finds a difference, the paired interval includes 1:",
			"  the rounds' ratios vary too much for the interval, one round far off the others (docs/bench.md).")
	}
	if unpaired {
		l = append(l, "A ratio without an interval could not be paired by round (fewer than two rounds ran both): it is the ratio of the medians.")
	}
	return l
}

// lowPowerNotes says, once, when the rank test cannot reach its level at
// all with this many rounds.
func lowPowerNotes(b *profile.BenchReport) []string {
	for _, r := range b.Results {
		if r.VsBaseline != nil && strings.HasPrefix(r.VsBaseline.Note, "need ") {
			return []string{fmt.Sprintf("~: %s, the rank test's limit with this few runs: run more repetitions.", r.VsBaseline.Note)}
		}
	}
	return nil
}

// requestsPerRun is, per workload and configuration, the median number of
// FUSE requests of a run and its three most time-consuming opcodes.
func requestsPerRun(b *profile.BenchReport) map[string]string {
	counts := map[string][]float64{}
	opTime := map[string]map[fuseproto.Opcode]uint64{}
	for _, run := range b.Runs {
		if run.Requests == nil {
			continue
		}
		k := run.Workload + "\x00" + run.Configuration
		var n uint64
		if opTime[k] == nil {
			opTime[k] = map[fuseproto.Opcode]uint64{}
		}
		for _, s := range run.Requests.Ops {
			n += s.Count
			opTime[k][fuseproto.Opcode(s.Opcode)] += s.Latency.Sum
		}
		counts[k] = append(counts[k], float64(n))
	}
	out := map[string]string{}
	for k, c := range counts {
		ops := make([]fuseproto.Opcode, 0, len(opTime[k]))
		for op := range opTime[k] {
			ops = append(ops, op)
		}
		sort.Slice(ops, func(i, j int) bool { return opTime[k][ops[i]] > opTime[k][ops[j]] })
		names := make([]string, 0, 3)
		for _, op := range ops[:min(3, len(ops))] {
			names = append(names, op.String())
		}
		s := fmt.Sprintf("%.0f", stats.Median(c))
		if len(names) > 0 {
			s += " (" + strings.Join(names, ",") + ")"
		}
		out[k] = s
	}
	return out
}

func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100 || v <= -100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10 || v <= -10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func percent(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) }

// BenchCSVColumns are the columns of a bench's CSV: one row per run and
// figure. New columns are only ever appended.
var BenchCSVColumns = []string{"bench", "round", "seq", "configuration", "workload", "metric", "unit", "value",
	"higher_is_better", "start", "elapsed_s", "error", "fuse_requests", "fuse_ns"}

// WriteBenchCSV writes every run of the bench, a row per figure (a failed
// run: one row with its error).
func WriteBenchCSV(w io.Writer, b *profile.BenchReport) error {
	cw := csv.NewWriter(w)
	cw.Write(BenchCSVColumns)
	for _, run := range b.Runs {
		var reqs, ns string
		if run.Requests != nil {
			var n uint64
			for _, s := range run.Requests.Ops {
				n += s.Count
			}
			reqs, ns = strconv.FormatUint(n, 10), strconv.FormatUint(run.Requests.TotalNs(), 10)
		}
		row := func(m profile.BenchMetric) []string {
			return []string{b.Name, strconv.Itoa(run.Round + 1), strconv.Itoa(run.Seq), run.Configuration, run.Workload, m.Name, m.Unit,
				strconv.FormatFloat(m.Value, 'g', -1, 64), strconv.FormatBool(m.HigherIsBetter), run.Start.UTC().Format(time.RFC3339Nano),
				strconv.FormatFloat(run.Elapsed, 'f', 6, 64), run.Error, reqs, ns}
		}
		if len(run.Metrics) == 0 {
			r := row(profile.BenchMetric{})
			r[7], r[8] = "", ""
			cw.Write(r)
		}
		for _, m := range run.Metrics {
			cw.Write(row(m))
		}
	}
	cw.Flush()
	return cw.Error()
}

// writeBenchSideBySide prints, for the workloads whose figures are read
// together (BenchReport.SideBySide), one table per workload: each
// configuration's means of every figure, side by side.
func writeBenchSideBySide(w io.Writer, b *profile.BenchReport) {
	for _, name := range b.SideBySide {
		var metrics []string
		units := map[string]string{}
		means := map[string]map[string]string{} // configuration -> metric -> mean
		var configs []string
		for _, r := range b.Results {
			if r.Workload != name {
				continue
			}
			if _, ok := units[r.Metric]; !ok {
				metrics = append(metrics, r.Metric)
				units[r.Metric] = r.Unit
			}
			if means[r.Configuration] == nil {
				means[r.Configuration] = map[string]string{}
				configs = append(configs, r.Configuration)
			}
			means[r.Configuration][r.Metric] = num(r.Summary.Mean)
		}
		if len(metrics) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s, side by side (means):\n", name)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "configuration\t")
		for _, m := range metrics {
			fmt.Fprintf(tw, "%s (%s)\t", m, units[m])
		}
		fmt.Fprintln(tw)
		for _, c := range configs {
			fmt.Fprintf(tw, "%s\t", c)
			for _, m := range metrics {
				v := means[c][m]
				if v == "" {
					v = "-"
				}
				fmt.Fprintf(tw, "%s\t", v)
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
}
