package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
)

// The HTML report: one self-contained file (inline CSS and SVG, no script,
// nothing fetched when it is viewed). html/template escapes every string
// that came from a trace: a file may be named by whoever created it.

//go:embed html.tmpl
var htmlTemplate string

// HTMLInput is one file of records (an interval trace's are one after
// another).
type HTMLInput struct {
	Name    string
	Records []*profile.Record
}

// Limits that keep a report of a long trace small.
const (
	htmlMaxPoints = 600 // points of a line over time: longer traces are averaged down
	htmlMaxHists  = 16  // opcodes whose histograms are drawn
	htmlMaxRows   = 50  // rows of the long tables
	htmlMaxLanes  = 40  // processes of the timeline
)

// page is what the template renders.
type page struct {
	Title     string
	Generated string
	Sections  []section
}

type section struct {
	Name      string
	Meta      []kv
	Requests  *requestView
	Syscalls  *syscallView
	Bench     *benchView
	Findings  *profile.Findings // fusescope doctor's, in the record
	Functions *functionsView    // kfunc's or ufunc's calls
	Notes     []string
}

type kv struct{ K, V string }

// WriteHTML renders the inputs as one HTML page.
func WriteHTML(w io.Writer, title string, inputs []HTMLInput) error {
	if err := CheckHTML(inputs); err != nil {
		return err
	}
	p := page{Title: title, Generated: time.Now().UTC().Format(time.RFC3339)}
	for _, in := range inputs {
		p.Sections = append(p.Sections, htmlSection(in))
	}
	t, err := template.New("report").Funcs(template.FuncMap{
		"f1": func(v float64) string { return fmt.Sprintf("%.1f", v) },
		"f3": func(v float64) string { return fmt.Sprintf("%.3f", v) },
		"f6": func(v float64) string { return fmt.Sprintf("%.6f", v) },
		"us": func(ns float64) string { return fmt.Sprintf("%.1f", ns/1e3) },
		"pct": func(v float64) string {
			return fmt.Sprintf("%.1f%%", 100*v)
		},
		"bytes": humanBytes,
		"name":  Name,
		"known": knownName,
		"nsToS": func(ns uint64) float64 { return float64(ns) / 1e9 },
		"durS":  func(d time.Duration) float64 { return d.Seconds() },
		"durNs": func(d time.Duration) float64 { return float64(d) },
	}).Parse(htmlTemplate)
	if err != nil {
		return err
	}
	return t.Execute(w, p)
}

// CheckHTML refuses, in one sentence, a kind of record the page does not
// render: every kind renders now.
func CheckHTML(inputs []HTMLInput) error {
	for _, in := range inputs {
		if len(in.Records) == 0 {
			return fmt.Errorf("%s holds no record: give a file made by fusescope trace -o, ufunc -o, bench -o or syscalls --json", in.Name)
		}
	}
	return nil
}

// --- function calls (kfunc, ufunc) ---

type functionsView struct {
	Title string
	Rows  []functionRow
	Stage []stageRow
}

type functionRow struct {
	Name, Module         string
	Count                uint64
	Timed                bool
	Mean, P50, P99, TotS float64 // ns, ns, ns, s
}

// stageRow is an opcode's hold (Function ""), a function's part of it, or
// what no function accounts for (Unaccounted).
type stageRow struct {
	Conn        uint32
	Op          string
	Requests    uint64
	Function    string
	Unaccounted bool
	Calls       uint64
	PerRequest  float64 // ns
	Share       float64
}

func newFunctionsView(fn *profile.KernelFunctions, kernel bool) *functionsView {
	v := &functionsView{Title: "Daemon functions (ufunc): " + fn.Why}
	if kernel {
		v.Title = "Kernel functions (kfunc): " + fn.Why
	}
	// Most called first, where the text view (funccount's) puts them last.
	for i := len(fn.Functions) - 1; i >= 0; i-- {
		f := fn.Functions[i]
		r := functionRow{Name: f.Name, Module: f.Module, Count: f.Count}
		if h := f.Latency; h != nil && h.Count > 0 {
			r.Timed, r.Mean, r.P50, r.P99, r.TotS = true, h.Mean(), h.Quantile(0.5), h.Quantile(0.99), float64(h.Sum)/1e9
		}
		v.Rows = append(v.Rows, r)
		if len(v.Rows) == htmlMaxRows {
			break
		}
	}
	for _, s := range fn.DaemonStage {
		per := func(ns uint64) float64 {
			if s.Requests == 0 {
				return 0
			}
			return float64(ns) / float64(s.Requests)
		}
		share := func(ns uint64) float64 {
			if s.HeldNs == 0 {
				return 0
			}
			return float64(ns) / float64(s.HeldNs)
		}
		v.Stage = append(v.Stage, stageRow{Conn: s.Conn, Op: s.Op, Requests: s.Requests, PerRequest: per(s.HeldNs), Share: 1})
		for _, f := range s.Functions {
			v.Stage = append(v.Stage, stageRow{Conn: s.Conn, Op: s.Op, Function: f.Name, Calls: f.Calls, PerRequest: per(f.Ns), Share: share(f.Ns)})
		}
		v.Stage = append(v.Stage, stageRow{Conn: s.Conn, Op: s.Op, Unaccounted: true, PerRequest: per(s.UnaccountedNs()), Share: share(s.UnaccountedNs())})
	}
	return v
}

func htmlSection(in HTMLInput) section {
	first, last := in.Records[0], in.Records[len(in.Records)-1]
	s := section{Name: in.Name}
	m := first.Meta
	add := func(k, v string) {
		if v != "" {
			s.Meta = append(s.Meta, kv{k, v})
		}
	}
	add("source", printable(m.Source))
	add("tool", printable(m.Tool))
	add("kernel", printable(m.Kernel))
	add("host", printable(m.Host))
	if !m.Start.IsZero() {
		add("start", m.Start.UTC().Format(time.RFC3339))
	}
	if !last.Meta.End.IsZero() && !m.Start.IsZero() {
		add("duration", last.Meta.End.Sub(m.Start).Round(time.Millisecond).String())
	}
	add("command", argsText(m.Command))
	if len(in.Records) > 1 {
		add("records", fmt.Sprintf("%d intervals", len(in.Records)))
	}
	switch {
	case first.Bench != nil:
		s.Bench = newBenchView(first.Bench)
	case first.Syscalls != nil && !first.HasRequests():
		s.Syscalls = newSyscallView(first.Syscalls)
	case Kind(first) == KindFunctions:
	default:
		s.Requests = newRequestView(in.Records)
	}
	if fn := FunctionsOf(WholeRun(in.Records)); fn != nil {
		s.Functions = newFunctionsView(fn, first.Functions != nil)
	}
	s.Findings = last.Findings
	return s
}

// --- FUSE requests ---

type requestView struct {
	Rows      []opRow
	Staged    bool // a row has stages (trace --stages): the table gets their column
	URing     bool // FUSE over io_uring's ring carried some: the table counts them
	TotalS    float64
	OverTime  *lineChart
	Hists     []histChart
	Calls     []profile.CallStats
	PageCache []pageCacheRow
	Slow      []profile.SlowRequest
	SlowMore  int
	Hung      []profile.HungRequest
	Files     []profile.FileStats
	// FilesMore counts the files past the table's rows; FilesSummed says
	// the files are summed over interval records.
	FilesMore   int
	FilesSummed bool
	Drops       []kv
}

type opRow struct {
	Mount, Op              string
	Count, Errors          uint64
	P50, P99, Mean, TotalS float64 // ns, ns, ns, s
	Share                  float64
	Stages                 []stageCell
	ReqBytes, ReplyBytes   uint64
	URing                  uint64 // of Count, over FUSE over io_uring's ring
	stats                  *profile.OpStats
}

type stageCell struct {
	Stage string
	Mean  float64 // ns
}

type pageCacheRow struct {
	Mount                       string
	ReadPages, Added, Removed   uint64
	HitRatio                    float64
	HasRatio                    bool
	ReadaheadSync, ReadaheadAsy uint64
}

func newRequestView(recs []*profile.Record) *requestView {
	rec := WholeRun(recs)
	v := &requestView{}
	total := float64(rec.Profile.TotalNs()) / 1e9
	v.TotalS = total
	for i := range rec.Profile.Ops {
		s := &rec.Profile.Ops[i]
		r := opRow{Mount: rec.Label(s.Conn), Op: s.Op, Count: s.Count, Errors: s.Errors, ReqBytes: s.ReqBytes, ReplyBytes: s.ReplyBytes, URing: s.URing,
			P50: s.Latency.Quantile(0.5), P99: s.Latency.Quantile(0.99), Mean: s.Latency.Mean(), TotalS: float64(s.Latency.Sum) / 1e9, stats: s}
		if total > 0 {
			r.Share = r.TotalS / total
		}
		v.URing = v.URing || s.URing > 0
		for _, st := range s.Stages {
			h := st.Latency
			r.Stages = append(r.Stages, stageCell{Stage: string(st.Stage), Mean: h.Mean()})
			v.Staged = true
		}
		v.Rows = append(v.Rows, r)
	}
	sort.SliceStable(v.Rows, func(i, j int) bool { return v.Rows[i].TotalS > v.Rows[j].TotalS })
	for i, r := range v.Rows {
		if i >= htmlMaxHists || r.Count == 0 {
			break
		}
		c := histChart{Title: Name(r.Mount) + " " + r.Op}
		c.add("total", &r.stats.Latency)
		for _, st := range r.stats.Stages {
			c.add(string(st.Stage), &st.Latency)
		}
		c.layout()
		v.Hists = append(v.Hists, c)
	}
	if len(recs) > 1 {
		v.OverTime = requestsOverTime(recs, v.Rows)
	}
	v.Calls = rec.Calls
	for _, pc := range rec.PageCache {
		row := pageCacheRow{Mount: rec.Label(pc.Conn), ReadPages: pc.ReadPages, Added: pc.Added, Removed: pc.Removed,
			ReadaheadSync: pc.ReadaheadSync, ReadaheadAsy: pc.ReadaheadAsync}
		row.HitRatio, row.HasRatio = rec.PageCacheHitRatio(pc)
		v.PageCache = append(v.PageCache, row)
	}
	var slow []profile.SlowRequest
	for _, r := range recs {
		slow = append(slow, r.Slow...)
	}
	sort.SliceStable(slow, func(i, j int) bool { return slow[i].Latency > slow[j].Latency })
	if len(slow) > htmlMaxRows {
		v.SlowMore = len(slow) - htmlMaxRows
		slow = slow[:htmlMaxRows]
	}
	v.Slow = slow
	v.Hung = recs[len(recs)-1].Hung
	v.Files = slices.Clone(rec.Files)
	for i := range v.Files {
		if f := &v.Files[i]; f.Mount == "" {
			f.Mount = rec.Label(f.Conn)
		}
	}
	if len(v.Files) > htmlMaxRows {
		v.FilesMore = len(v.Files) - htmlMaxRows
		v.Files = v.Files[:htmlMaxRows]
	}
	v.FilesSummed = len(recs) > 1 && len(v.Files) > 0
	d := rec.Profile.Drops
	for _, x := range []struct {
		k string
		n uint64
	}{{"inflight_full", d.InflightFull}, {"unmatched_end", d.UnmatchedEnd}, {"stats_full", d.StatsFull}, {"errno_full", d.ErrnoFull},
		{"reaped_conn_gone", d.ReapedConnGone}, {"reaped_stale", d.ReapedStale}, {"stages_full", d.StagesFull}, {"nodes_full", d.NodesFull}} {
		if x.n > 0 {
			v.Drops = append(v.Drops, kv{x.k, fmt.Sprint(x.n)})
		}
	}
	return v
}

// histChart is log2 histograms drawn as bars, one row of bars per series.
type histChart struct {
	Title  string
	Series []histSeries
	Width  int
	Height int
	Labels []axisLabel
}

type histSeries struct {
	Name  string
	Y     int
	Bars  []bar
	Count uint64
}

type bar struct {
	X, Y, W, H float64
	Tip        string
}

type axisLabel struct {
	X, Y   float64
	Text   string
	Anchor string // text-anchor: the last label of an axis ends at its end, so the chart does not clip it
}

// xAxis labels fractions of an axis: at x(f) each, the last one anchored
// at its end.
func xAxis(fracs []float64, y float64, x func(float64) float64, text func(float64) string) []axisLabel {
	out := make([]axisLabel, len(fracs))
	for i, f := range fracs {
		out[i] = axisLabel{X: x(f), Y: y, Text: text(f), Anchor: "middle"}
	}
	if len(out) > 0 {
		out[len(out)-1].Anchor = "end"
	}
	return out
}

func (c *histChart) add(name string, h *hist.Hist) {
	if h == nil || h.Count == 0 {
		return
	}
	c.Series = append(c.Series, histSeries{Name: name, Count: h.Count, Bars: histBars(h)})
}

// histBars are the non-empty buckets, as fractions (laid out later).
func histBars(h *hist.Hist) []bar {
	var out []bar
	var peak uint64
	for _, n := range h.Buckets {
		peak = max(peak, n)
	}
	for i, n := range h.Buckets {
		if n == 0 {
			continue
		}
		out = append(out, bar{X: float64(i), H: float64(n) / float64(peak),
			Tip: fmt.Sprintf("%s to %s: %d", nsText(hist.BucketLow(i)), nsText(hist.BucketHigh(i)), n)})
	}
	return out
}

// layout places the bars: one column per log2 bucket over the range any
// series uses, one row per series.
func (c *histChart) layout() {
	lo, hi := 64, 0
	for _, s := range c.Series {
		for _, b := range s.Bars {
			lo, hi = min(lo, int(b.X)), max(hi, int(b.X))
		}
	}
	if lo > hi {
		return
	}
	lo, hi = max(0, lo-1), min(hist.NumBuckets-1, hi+1) // a bucket of room either side
	const colW, rowH, left, top = 18.0, 60.0, 70.0, 10.0
	c.Width = int(left + colW*float64(hi-lo+1) + 10)
	c.Height = int(top + rowH*float64(len(c.Series)) + 40)
	for si := range c.Series {
		s := &c.Series[si]
		s.Y = int(top + rowH*float64(si) + rowH/2)
		base := top + rowH*float64(si+1) - 6
		for bi := range s.Bars {
			b := &s.Bars[bi]
			h := max(1, b.H*(rowH-14))
			b.X, b.Y, b.W, b.H = left+colW*(b.X-float64(lo)), base-h, colW-2, h
		}
	}
	for i := lo; i <= hi; i += 2 {
		c.Labels = append(c.Labels, axisLabel{X: left + colW*float64(i-lo), Y: float64(c.Height - 20), Text: nsText(hist.BucketLow(i))})
	}
}

// secondsText prints an axis's seconds with the digits its scale needs.
func secondsText(s float64) string {
	switch {
	case s == 0:
		return "0"
	case s < 0.01:
		return fmt.Sprintf("%.4fs", s)
	case s < 10:
		return fmt.Sprintf("%.2fs", s)
	}
	return fmt.Sprintf("%.0fs", s)
}

// nsText prints a duration in the unit that suits it.
func nsText(ns uint64) string {
	switch {
	case ns < 1000:
		return fmt.Sprintf("%dns", ns)
	case ns < 1e6:
		return fmt.Sprintf("%.0fus", float64(ns)/1e3)
	case ns < 1e9:
		return fmt.Sprintf("%.0fms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.0fs", float64(ns)/1e9)
}

// lineChart is series over time, as polylines.
type lineChart struct {
	Width, Height int
	Lines         []line
	YLabels       []axisLabel
	XLabels       []axisLabel
	Unit          string
}

type line struct {
	Name   string
	Points string // "x,y x,y ..."
	Color  string
	Y      int // legend
}

var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"}

// requestsOverTime draws the requests per second of the top opcodes over
// the interval records, averaged down to htmlMaxPoints points.
func requestsOverTime(recs []*profile.Record, rows []opRow) *lineChart {
	top := map[string]int{}
	for _, r := range rows {
		if len(top) == len(palette) {
			break
		}
		if _, ok := top[r.Op]; !ok {
			top[r.Op] = len(top)
		}
	}
	t0 := recs[0].Meta.Start
	series := make([][]float64, len(top)) // per op: (t, rate) pairs flattened
	var times []float64
	for _, r := range recs {
		dur := r.Meta.End.Sub(r.Meta.Start).Seconds()
		if dur <= 0 {
			continue
		}
		times = append(times, r.Meta.End.Sub(t0).Seconds())
		counts := make([]float64, len(top))
		for _, s := range r.Profile.Ops {
			if i, ok := top[s.Op]; ok {
				counts[i] += float64(s.Count)
			}
		}
		for i := range series {
			series[i] = append(series[i], counts[i]/dur)
		}
	}
	if len(times) < 2 {
		return nil
	}
	// Average runs of points down to htmlMaxPoints.
	step := (len(times) + htmlMaxPoints - 1) / htmlMaxPoints
	avg := func(v []float64) []float64 {
		var out []float64
		for i := 0; i < len(v); i += step {
			j := min(i+step, len(v))
			sum := 0.0
			for _, x := range v[i:j] {
				sum += x
			}
			out = append(out, sum/float64(j-i))
		}
		return out
	}
	times = avg(times)
	peak := 0.0
	for i := range series {
		series[i] = avg(series[i])
		peak = max(peak, slices.Max(series[i]))
	}
	if peak == 0 {
		peak = 1
	}
	const w, h, left, right, top0, bottom = 900.0, 260.0, 60.0, 150.0, 10.0, 30.0
	c := &lineChart{Width: int(w), Height: int(h), Unit: "requests/s"}
	span := times[len(times)-1]
	x := func(t float64) float64 { return left + (w-left-right)*t/span }
	y := func(v float64) float64 { return top0 + (h-top0-bottom)*(1-v/peak) }
	names := make([]string, len(top))
	for op, i := range top {
		names[i] = op
	}
	for i, vals := range series {
		var b strings.Builder
		for k, v := range vals {
			fmt.Fprintf(&b, "%.1f,%.1f ", x(times[k]), y(v))
		}
		c.Lines = append(c.Lines, line{Name: names[i], Points: strings.TrimSpace(b.String()), Color: palette[i], Y: int(top0 + 16*float64(i) + 10)})
	}
	for _, f := range []float64{0, 0.5, 1} {
		c.YLabels = append(c.YLabels, axisLabel{X: left - 6, Y: y(peak*f) + 4, Text: fixedFigure(peak*f, 3), Anchor: "end"})
	}
	c.XLabels = xAxis([]float64{0, 0.25, 0.5, 0.75, 1}, h-10, func(f float64) float64 { return x(span * f) },
		func(f float64) string { return secondsText(span * f) })
	return c
}

// --- system calls ---

type syscallView struct {
	R        *profile.SyscallReport
	Syscalls []profile.SyscallStat
	Files    []profile.FileStat
	Waits    []profile.Wait
	Lanes    *laneChart
}

func newSyscallView(r *profile.SyscallReport) *syscallView {
	v := &syscallView{R: r, Syscalls: head(r.Syscalls, htmlMaxRows), Files: head(r.Files, htmlMaxRows), Waits: head(r.Waits, htmlMaxRows)}
	v.Lanes = processLanes(r)
	return v
}

func head[T any](v []T, n int) []T {
	if len(v) > n {
		return v[:n]
	}
	return v
}

// laneChart is the process timeline: a lane per process, its life as a
// bar, its long calls darker over it, execs and exit as marks.
type laneChart struct {
	Width, Height int
	Lanes         []lane
	XLabels       []axisLabel
	More          int
}

type lane struct {
	Label  string
	Y      float64
	Life   bar
	Blocks []bar
	Execs  []bar
	Exit   *bar
}

func processLanes(r *profile.SyscallReport) *laneChart {
	procs := r.Processes
	if len(procs) == 0 {
		return nil
	}
	t0, t1 := math.Inf(1), math.Inf(-1)
	for _, p := range procs {
		if p.Start > 0 {
			t0 = min(t0, p.Start)
		}
		t1 = max(t1, p.End)
	}
	if !(t1 > t0) {
		return nil
	}
	c := &laneChart{}
	if len(procs) > htmlMaxLanes {
		c.More = len(procs) - htmlMaxLanes
		procs = procs[:htmlMaxLanes]
	}
	const w, left, right, laneH = 900.0, 200.0, 10.0, 18.0
	x := func(t float64) float64 { return left + (w-left-right)*(t-t0)/(t1-t0) }
	for i, p := range procs {
		y := 10 + laneH*float64(i)
		name := p.Exec
		if k := strings.LastIndexByte(name, '/'); k >= 0 {
			name = name[k+1:]
		}
		start := p.Start
		if start == 0 {
			start = t0
		}
		l := lane{Label: fmt.Sprintf("%d %s", p.PID, Name(name)), Y: y + 12,
			Life: bar{X: x(start), Y: y + 3, W: max(1, x(p.End)-x(start)), H: laneH - 6,
				Tip: fmt.Sprintf("%d %s: %.3f s, %.3f s in calls, %.3f s outside", p.PID, Name(p.Exec), p.End-start, p.SyscallS, p.OutsideS)}}
		for _, b := range p.Blocked {
			l.Blocks = append(l.Blocks, bar{X: x(b.Start), Y: y + 3, W: max(1, x(b.Start+b.DurS)-x(b.Start)), H: laneH - 6,
				Tip: fmt.Sprintf("%s %s: %.3f s", b.Name, Name(b.Target), b.DurS)})
		}
		for _, e := range p.Execs {
			if e.Start > 0 {
				l.Execs = append(l.Execs, bar{X: x(e.Start), Y: y + 1, W: 2, H: laneH - 2, Tip: "exec " + argsText(e.Args)})
			}
		}
		if p.Exit != nil || p.Killed != "" {
			tip := p.Killed
			if p.Exit != nil {
				tip = fmt.Sprintf("exit %d", *p.Exit)
			}
			l.Exit = &bar{X: x(p.End) - 1, Y: y + 1, W: 3, H: laneH - 2, Tip: tip}
		}
		c.Lanes = append(c.Lanes, l)
	}
	c.Width, c.Height = int(w), int(10+laneH*float64(len(procs))+30)
	c.XLabels = xAxis([]float64{0, 0.25, 0.5, 0.75, 1}, float64(c.Height-8), func(f float64) float64 { return x(t0 + (t1-t0)*f) },
		func(f float64) string { return secondsText((t1 - t0) * f) })
	return c
}

// --- bench ---

type benchView struct {
	B      *profile.BenchReport
	Charts []benchChart
}

// benchChart is one workload's metric: a bar per configuration, its
// median, with the 95% interval of the mean as a whisker.
type benchChart struct {
	Title  string
	Unit   string
	Width  int
	Height int
	Rows   []benchBar
}

type benchBar struct {
	Config          string
	Y               float64
	Bar             bar // its Tip: the figures in full
	LowX, HighX     float64
	Median          string // with its unit
	Ratio, Delta    string
	Baseline, Noisy bool
}

func newBenchView(b *profile.BenchReport) *benchView {
	v := &benchView{B: b}
	type key struct{ w, m string }
	var order []key
	byKey := map[key][]profile.BenchResult{}
	for _, r := range b.Results {
		k := key{r.Workload, r.Metric}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	for _, k := range order {
		rs := byKey[k]
		peak := 0.0
		for _, r := range rs {
			peak = max(peak, r.Summary.CIHigh, r.Summary.Max)
		}
		if peak <= 0 {
			continue
		}
		const w, left, right, rowH = 900.0, 220.0, 220.0, 22.0
		x := func(val float64) float64 { return left + (w-left-right)*val/peak }
		c := benchChart{Title: k.w + ": " + k.m, Unit: rs[0].Unit, Width: int(w), Height: int(rowH*float64(len(rs)) + 10)}
		for i, r := range rs {
			y := 5 + rowH*float64(i)
			sum := r.Summary
			tip := fmt.Sprintf("%s: median %s, mean %s", r.Configuration, withUnit(precise(sum.Median), r.Unit), withUnit(precise(sum.Mean), r.Unit))
			if sum.N > 1 {
				tip += fmt.Sprintf(", 95%% interval of the mean %s to %s", withUnit(precise(sum.CILow), r.Unit), withUnit(precise(sum.CIHigh), r.Unit))
			}
			tip += ", " + plural(sum.N, "run", "runs")
			// A whisker stops at zero: no run took less than nothing.
			row := benchBar{Config: r.Configuration, Y: y + 14, Median: withUnit(fixedFigure(sum.Median, 4), r.Unit), Baseline: r.Configuration == b.Baseline,
				Bar:  bar{X: left, Y: y + 3, W: max(1, x(sum.Median)-left), H: rowH - 8, Tip: tip},
				LowX: x(max(0, sum.CILow)), HighX: x(max(0, sum.CIHigh)), Noisy: r.Noisy != ""}
			if c := r.VsBaseline; c != nil {
				if c.Ratio > 0 {
					row.Ratio = fixedFigure(c.Ratio, 3) + "x"
				}
				row.Delta = c.Delta()
			}
			c.Rows = append(c.Rows, row)
		}
		v.Charts = append(v.Charts, c)
	}
	return v
}

// knownName is a name as Name quotes it, "?" where it is not known, as
// the terminal views print both.
func knownName(s string) string {
	if s == "" {
		return "?"
	}
	return Name(s)
}

// printable is a line of text as it is, or quoted as Name quotes it
// where it holds a character that is not printable: it has no column to
// split, but a control character must not reach the page.
func printable(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || (!unicode.IsPrint(r) && r != ' ') {
			return strconv.Quote(s)
		}
	}
	return s
}

// argsText is a command line, each argument quoted where it must be.
func argsText(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = Name(a)
	}
	return strings.Join(q, " ")
}

// fixedFigure prints a number in fixed notation (never 2.038e+05) with sig
// significant digits, and every digit of its integer part, in groups of
// three: 203812.5 is 203,813; 0.0027531 is 0.00275 (sig 3).
func fixedFigure(v float64, sig int) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	mag := int(math.Floor(math.Log10(math.Abs(v))))
	return grouped(strconv.FormatFloat(v, 'f', max(0, sig-1-mag), 64))
}

// precise prints a number for a tooltip: seven significant digits,
// trailing zeros after the point left out (0.0019425, 203,812.7).
func precise(v float64) string {
	s := fixedFigure(v, 7)
	if strings.Contains(s, ".") {
		s = strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// grouped puts commas between the thousands of a number's integer part.
func grouped(s string) string {
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	whole, frac, dot := strings.Cut(s, ".")
	if len(whole) <= 3 || strings.ContainsAny(whole, "NI") {
		return sign + s
	}
	var b strings.Builder
	for i, d := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	if dot {
		b.WriteString("." + frac)
	}
	return sign + b.String()
}

// withUnit is a figure and its unit.
func withUnit(number, unit string) string {
	if unit == "" {
		return number
	}
	return number + " " + unit
}

func humanBytes(n any) string {
	var v float64
	switch x := n.(type) {
	case uint64:
		v = float64(x)
	case int64:
		v = float64(x)
	case int:
		v = float64(x)
	}
	for _, u := range []string{"B", "KiB", "MiB", "GiB"} {
		if v < 1024 || u == "GiB" {
			if u == "B" {
				return fmt.Sprintf("%.0f %s", v, u)
			}
			return fmt.Sprintf("%.1f %s", v, u)
		}
		v /= 1024
	}
	return ""
}
