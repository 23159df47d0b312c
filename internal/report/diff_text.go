package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/stats"
)

// DiffOptions choose what the text of a diff shows.
type DiffOptions struct {
	Unit   hist.Unit // latencies' unit (bcc's -m, -u)
	Counts bool      // counts alone: requests and errors, no latency
	Hist   bool      // the total latency histograms of A and B side by side, per row
	Top    int       // rows (0: all)
	Color  bool      // a terminal: changes coloured
}

// Colours of a change: for the worse, for the better, a count that moved.
const (
	colorWorse  = "\x1b[31m"
	colorBetter = "\x1b[32m"
	colorMoved  = "\x1b[33m"
	colorReset  = "\x1b[0m"
)

// significantPct is the change below which the text leaves a cell
// uncoloured: within this machine's run-to-run noise.
const significantPct = 5

// paint colours a change: up is worse for times, neither for counts.
func (o DiffOptions) paint(cell string, p *float64, upIsWorse, isCount bool) string {
	if !o.Color || cell == "" || (p != nil && math.Abs(*p) < significantPct) {
		return cell
	}
	switch {
	case isCount:
		return colorMoved + cell + colorReset
	case p != nil && (*p > 0) == upIsWorse:
		return colorWorse + cell + colorReset
	case p != nil:
		return colorBetter + cell + colorReset
	}
	return cell
}

// WriteDiffText renders a diff as aligned columns, the largest changes first.
func WriteDiffText(w io.Writer, d *Diff, o DiffOptions) error {
	var b strings.Builder
	for _, s := range []struct {
		name string
		side DiffSide
	}{{"A", d.A}, {"B", d.B}} {
		var about []string
		if s.side.Source != "" {
			about = append(about, s.side.Source)
		}
		if s.side.Records > 1 {
			about = append(about, fmt.Sprintf("%d interval records summed", s.side.Records))
		}
		if s.side.Seconds > 0 {
			about = append(about, fmt.Sprintf("%.3f s", s.side.Seconds))
		}
		fmt.Fprintf(&b, "%s: %s", s.name, Name(s.side.File))
		if len(about) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(about, ", "))
		}
		b.WriteString("\n")
	}
	for _, n := range d.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	b.WriteString("\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	switch d.Kind {
	case DiffRequests:
		if err := writeRequestDiff(w, d, o); err != nil {
			return err
		}
		if d.Functions != nil || d.DaemonStage != nil {
			io.WriteString(w, "\nFunctions, B against A:\n")
			if err := writeFunctionDiff(w, d, o); err != nil {
				return err
			}
		}
		return writeFindingsDiff(w, d.Findings)
	case DiffFunctions:
		return writeFunctionDiff(w, d, o)
	case DiffSyscalls:
		return writeSyscallDiff(w, d, o)
	}
	return writeBenchDiff(w, d, o)
}

func limit(n, top int) int {
	if top > 0 && top < n {
		return top
	}
	return n
}

// writeRequestDiff prints two tables of the same rows, benchstat's way
// of keeping a line within 80-120 columns: the counts, rates and time in
// FUSE (the rows that changed the time most first), then each row's
// latency. Every change is in per cent. With one mount on each side the
// mount is said once, above, rather than in a column.
func writeRequestDiff(w io.Writer, d *Diff, o DiffOptions) error {
	if len(d.Requests) == 0 {
		_, err := io.WriteString(w, "Neither record holds a request.\n")
		return err
	}
	shown := shownRequests(d, o)
	mounts := map[string]bool{}
	for _, r := range d.Requests {
		mounts[mountText(r)] = true
	}
	oneMount := len(mounts) == 1
	if oneMount {
		fmt.Fprintf(w, "mount: %s\n", mountText(d.Requests[0]))
	}
	// lead is a row's first cells: its mount (unless said above), opcode
	// and stage; a stage's row leaves the names to its opcode's.
	lead := func(r RequestDiff, stage bool) []string {
		op := r.Op
		mount := mountText(r)
		if r.Stage != profile.StageTotal {
			op, mount = "", ""
		}
		var cells []string
		if !oneMount {
			cells = append(cells, mount)
		}
		cells = append(cells, op)
		if stage {
			cells = append(cells, shortStage(r.Stage))
		}
		return cells
	}
	header := func(stage bool, rest ...string) []string {
		var cells []string
		if !oneMount {
			cells = append(cells, "MOUNT")
		}
		cells = append(cells, "OP")
		if stage {
			cells = append(cells, "STAGE")
		}
		return append(cells, rest...)
	}
	align := func(names int) string { return strings.Repeat("l", names) + "r" }
	names := 2
	if !oneMount {
		names = 3
	}
	if o.Counts {
		rows := [][]string{header(false, "A", "B", "DELTA", "DELTA%")}
		for _, r := range shown {
			diff := int64(r.B.Count) - int64(r.A.Count)
			rows = append(rows, append(lead(r, false), u(r.A.Count), u(r.B.Count),
				o.paint(fmt.Sprintf("%+d", diff), r.CountPct, false, diff != 0 && (r.CountPct == nil || math.Abs(*r.CountPct) >= significantPct)),
				pctText(r.CountPct, float64(r.A.Count), float64(r.B.Count))))
		}
		Columns(w, rows, align(names-1))
	} else {
		unit := o.Unit.Name
		lat := func(s float64) string { return figure(s * 1e9 / float64(o.Unit.Divisor)) }
		rate := func(v float64) string {
			if d.A.Seconds == 0 || d.B.Seconds == 0 {
				return "-"
			}
			return figure(v)
		}
		fmt.Fprintln(w, "Requests and their time in FUSE, B against A (the rows that changed the time most first):")
		rows := [][]string{header(true, "COUNT A", "COUNT B", "DELTA", "RATE/s A", "RATE/s B", "DELTA", "TIME A("+unit+")", "TIME B", "DELTA")}
		for _, r := range shown {
			rows = append(rows, append(lead(r, true),
				u(r.A.Count), u(r.B.Count), o.paint(pctText(r.CountPct, float64(r.A.Count), float64(r.B.Count)), r.CountPct, false, true),
				rate(r.A.Rate), rate(r.B.Rate), o.paint(pctText(r.RatePct, r.A.Rate, r.B.Rate), r.RatePct, false, true),
				lat(r.A.Total), lat(r.B.Total), o.paint(pctText(pctChange(r.A.Total, r.B.Total), r.A.Total, r.B.Total), pctChange(r.A.Total, r.B.Total), true, false)))
		}
		Columns(w, rows, align(names))
		fmt.Fprintln(w, "\nLatency per request, B against A:")
		rows = [][]string{header(true, "P50 A("+unit+")", "P50 B", "DELTA", "P99 A("+unit+")", "P99 B", "DELTA")}
		for _, r := range shown {
			rows = append(rows, append(lead(r, true),
				lat(r.A.P50), lat(r.B.P50), o.paint(pctText(r.P50Pct, r.A.P50, r.B.P50), r.P50Pct, true, false),
				lat(r.A.P99), lat(r.B.P99), o.paint(pctText(r.P99Pct, r.A.P99, r.B.P99), r.P99Pct, true, false)))
		}
		Columns(w, rows, align(names))
	}
	if left := countTotals(d) - limit(countTotals(d), o.Top); left > 0 {
		fmt.Fprintf(w, "(%s more: --top 0 shows all)\n", plural(left, "row", "rows"))
	}
	if o.Hist {
		for _, r := range shown {
			if r.Stage != profile.StageTotal {
				continue
			}
			fmt.Fprintf(w, "\n%s %s: total latency, A | B\n", Name(r.Mount), r.Op)
			if err := hist.WriteLog2Pair(w, r.A.hist, r.B.hist, o.Unit); err != nil {
				return err
			}
		}
	}
	return nil
}

// shownRequests are the rows the text prints: the first --top opcodes,
// each with its stages unless counts alone are asked for.
func shownRequests(d *Diff, o DiffOptions) []RequestDiff {
	var rows []RequestDiff
	totals := 0
	for _, r := range d.Requests {
		if r.Stage == profile.StageTotal {
			totals++
			if o.Top > 0 && totals > o.Top {
				break
			}
		} else if o.Counts {
			continue
		}
		rows = append(rows, r)
	}
	return rows
}

// mountText names a row's mount, and B's where two differently named
// mounts were paired.
func mountText(r RequestDiff) string {
	if r.MountB != "" {
		return Name(r.Mount) + " / " + Name(r.MountB)
	}
	return Name(r.Mount)
}

func countTotals(d *Diff) int {
	n := 0
	for _, r := range d.Requests {
		if r.Stage == profile.StageTotal {
			n++
		}
	}
	return n
}

// figure prints a measurement with three significant digits and no
// exponent (0.0567, 2.50, 200, 1000000): under -m a p50 of 57 us is 0.0567,
// not 0.0, and a figure of thousands keeps every digit.
func figure(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0 || math.IsNaN(v) || math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', min(9, 2-int(math.Floor(math.Log10(a)))), 64)
}

func writeSyscallDiff(w io.Writer, d *Diff, o DiffOptions) error {
	rows := [][]string{{"SYSCALL", "CATEGORY", "CALLS A", "CALLS B", "DELTA", "ERRORS A", "ERRORS B", "TIME A(s)", "TIME B(s)", "DELTA(s)", "DELTA"}}
	if o.Counts {
		rows = [][]string{{"SYSCALL", "A", "B", "DELTA", "DELTA%"}}
	}
	n := limit(len(d.Syscalls), o.Top)
	for _, r := range d.Syscalls[:n] {
		if o.Counts {
			diff := r.CallsB - r.CallsA
			rows = append(rows, []string{r.Syscall, strconv.Itoa(r.CallsA), strconv.Itoa(r.CallsB),
				o.paint(fmt.Sprintf("%+d", diff), r.CallsPct, false, diff != 0), pctText(r.CallsPct, float64(r.CallsA), float64(r.CallsB))})
			continue
		}
		rows = append(rows, []string{r.Syscall, r.Category, strconv.Itoa(r.CallsA), strconv.Itoa(r.CallsB),
			o.paint(pctText(r.CallsPct, float64(r.CallsA), float64(r.CallsB)), r.CallsPct, false, true),
			strconv.Itoa(r.ErrorsA), strconv.Itoa(r.ErrorsB),
			fmt.Sprintf("%.6f", r.TimeA), fmt.Sprintf("%.6f", r.TimeB), fmt.Sprintf("%+.6f", r.TimeS),
			o.paint(pctText(r.TimePct, r.TimeA, r.TimeB), r.TimePct, true, false)})
	}
	if o.Counts {
		Columns(w, rows, "lr")
	} else {
		Columns(w, rows, "llr")
	}
	if n < len(d.Syscalls) {
		fmt.Fprintf(w, "(%s more: --top 0 shows all)\n", plural(len(d.Syscalls)-n, "row", "rows"))
	}
	return nil
}

func writeBenchDiff(w io.Writer, d *Diff, o DiffOptions) error {
	if len(d.Bench) == 0 {
		_, err := io.WriteString(w, "The two runs have no result in common.\n")
		return err
	}
	rows := [][]string{{"WORKLOAD", "METRIC", "CONFIGURATION", "MEDIAN A", "±", "MEDIAN B", "±", "DELTA OF MEDIANS", "P"}}
	n := limit(len(d.Bench), o.Top)
	for _, r := range d.Bench[:n] {
		delta := r.Delta
		if r.Comparison.Significant && r.Comparison.Ratio > 0 {
			p := 100 * (r.Comparison.Ratio - 1)
			delta = o.paint(delta, &p, !r.HigherIsBetter, false)
		}
		rows = append(rows, []string{r.Workload, r.Metric + " (" + r.Unit + ")", r.Configuration,
			figure(r.A.Median), ciText(r.A), figure(r.B.Median), ciText(r.B),
			delta, fmt.Sprintf("p=%.3f n=%d+%d", r.Comparison.P, r.A.N, r.B.N)})
	}
	Columns(w, rows, "lllr")
	if n < len(d.Bench) {
		fmt.Fprintf(w, "(%s more: --top 0 shows all)\n", plural(len(d.Bench)-n, "row", "rows"))
	}
	_, err := io.WriteString(w, "DELTA OF MEDIANS is B's median against A's, as benchstat's delta; ± is the 95% interval of the mean in per cent;\n"+
		"~: the runs' spread cannot support a difference (Mann-Whitney U, p >= 0.05).\n")
	return err
}

// ciText is a half-interval as a share of the mean, as benchstat's ±;
// nothing for a single run, which has none.
func ciText(s stats.Summary) string {
	f := s.HalfWidthFraction
	if s.N < 2 || math.IsNaN(f) || math.IsInf(f, 0) {
		return ""
	}
	return fmt.Sprintf("±%.0f%%", 100*math.Abs(f))
}

// WriteDiffJSON writes the diff as indented, versioned JSON.
func WriteDiffJSON(w io.Writer, d *Diff) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

// WriteDiffCSV writes the diff's rows, every one, with a header.
func WriteDiffCSV(w io.Writer, d *Diff) error {
	cw := csv.NewWriter(w)
	opt := func(p *float64) string {
		if p == nil {
			return ""
		}
		return strconv.FormatFloat(*p, 'f', 2, 64)
	}
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	switch d.Kind {
	case DiffRequests:
		cw.Write([]string{"mount", "mount_b", "op", "stage", "count_a", "count_b", "count_delta_pct", "errors_a", "errors_b",
			"rate_a_per_s", "rate_b_per_s", "rate_delta_pct", "p50_a_s", "p50_b_s", "p50_delta_pct", "p99_a_s", "p99_b_s", "p99_delta_pct",
			"total_a_s", "total_b_s", "total_delta_s"})
		for _, r := range d.Requests {
			cw.Write([]string{csvName(r.Mount), csvName(r.MountB), r.Op, string(r.Stage), u(r.A.Count), u(r.B.Count), opt(r.CountPct),
				u(r.A.Errors), u(r.B.Errors), g(r.A.Rate), g(r.B.Rate), opt(r.RatePct), g(r.A.P50), g(r.B.P50), opt(r.P50Pct),
				g(r.A.P99), g(r.B.P99), opt(r.P99Pct), g(r.A.Total), g(r.B.Total), g(r.TotalS)})
		}
	case DiffSyscalls:
		cw.Write([]string{"syscall", "category", "calls_a", "calls_b", "calls_delta_pct", "errors_a", "errors_b", "time_a_s", "time_b_s", "time_delta_pct", "time_delta_s"})
		for _, r := range d.Syscalls {
			cw.Write([]string{r.Syscall, r.Category, strconv.Itoa(r.CallsA), strconv.Itoa(r.CallsB), opt(r.CallsPct),
				strconv.Itoa(r.ErrorsA), strconv.Itoa(r.ErrorsB), g(r.TimeA), g(r.TimeB), opt(r.TimePct), g(r.TimeS)})
		}
	case DiffFunctions:
		cw.Write([]string{"function", "module", "calls_a", "calls_b", "calls_delta_pct", "mean_a_s", "mean_b_s", "mean_delta_pct", "total_a_s", "total_b_s", "total_delta_s"})
		for _, r := range d.Functions {
			row := []string{csvName(r.Function), csvName(r.Module), u(r.CallsA), u(r.CallsB), opt(r.CallsPct), "", "", "", "", "", ""}
			if r.Timed { // a function only counted has no time
				copy(row[5:], []string{g(r.MeanA), g(r.MeanB), opt(r.MeanPct), g(r.TotalA), g(r.TotalB), g(r.TotalS)})
			}
			cw.Write(row)
		}
	case DiffBench:
		cw.Write([]string{"workload", "metric", "unit", "configuration", "median_a", "median_b", "n_a", "n_b", "ratio", "p", "delta"})
		for _, r := range d.Bench {
			cw.Write([]string{r.Workload, r.Metric, r.Unit, r.Configuration, g(r.A.Median), g(r.B.Median), strconv.Itoa(r.A.N), strconv.Itoa(r.B.N),
				g(r.Comparison.Ratio), g(r.Comparison.P), r.Delta})
		}
	}
	cw.Flush()
	return cw.Error()
}

// writeFindingsDiff says which of doctor's findings B no longer has, which
// it has anew, and which both have.
func writeFindingsDiff(w io.Writer, f *FindingsDiff) error {
	if f == nil {
		return nil
	}
	var b strings.Builder
	b.WriteString("\ndoctor's findings, B against A:\n")
	for _, l := range []struct {
		name  string
		rules []string
	}{{"gone in B", f.Gone}, {"new in B", f.New}, {"in both", f.Both}} {
		list := "none"
		if len(l.rules) > 0 {
			list = printable(strings.Join(l.rules, ", "))
		}
		fmt.Fprintf(&b, "  %-10s %s\n", l.name+":", list)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
