package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/stats"
)

// Tracer records the FUSE requests of each run as an interval (ktrace's
// request source; nil: no traces): one ends as the run starts, and the
// next is the run's, its extremes its own (a difference of cumulative
// snapshots knows only the buckets they fall in).
type Tracer interface {
	Interval(final bool) (interval, whole *profile.Record, err error)
	// WatchDaemons finds the daemons of mounts made since, for stages.
	WatchDaemons() error
}

// Options are how a bench is run, beside its Spec.
type Options struct {
	Self string // the fusescope binary (for the lab file system)
	// Trace opens the request tracer, with stages or without; nil or an
	// error: runs have no trace, and a note says why.
	Trace func(stages, calls bool) (Tracer, func(), error)
	// Progress receives progress: a bar with ETA on a terminal, lines
	// otherwise (Progress.Plain).
	Progress Progress
	// ScratchDir is where the scratch directory goes; "": /var/tmp.
	ScratchDir string
}

// Progress reports the bench's progress.
type Progress interface {
	Start(total int, what string)
	// Step is called after each run, with what it was.
	Step(done int, line string)
	Finish()
}

// Run runs the bench and returns its report; the error is for what stops
// the whole bench (no scratch file system, a signal). A configuration
// that does not mount, or a workload that fails in one, is a note: the
// rest goes on.
func Run(ctx context.Context, spec *Spec, opt Options) (*profile.BenchReport, error) {
	rep := &profile.BenchReport{
		Name: spec.Name, Description: spec.Description, Baseline: spec.Baseline, Order: spec.Order, Seed: spec.Seed,
		Repetitions: spec.Repetitions, Warmup: spec.Warmup, DropCaches: spec.DropCaches == nil || *spec.DropCaches,
		Remount: spec.Remount, Scratch: spec.Scratch,
	}
	if rep.Seed == 0 {
		rep.Seed = uint64(time.Now().UnixNano())
	}
	for _, w := range spec.Workloads {
		if _, ok := w.Kind.(sideBySide); ok {
			rep.SideBySide = append(rep.SideBySide, w.Name)
		}
	}
	for cmd, key := range needs(spec.Workloads) {
		if _, err := exec.LookPath(cmd); err != nil {
			return nil, fmt.Errorf("%s is not installed: install it (apt-get install %s), or leave out the %s workloads", cmd, cmd, key)
		}
	}
	rep.Notes = append(rep.Notes, CleanStale(opt.ScratchDir)...)
	base, cleanup, err := makeScratch(spec, opt.ScratchDir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	src := filepath.Join(base, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return nil, err
	}
	for _, w := range spec.Workloads {
		if err := layout(w, src); err != nil {
			return nil, fmt.Errorf("laying out workload %q's file: %w", w.Name, err)
		}
	}

	drop := func() error { return nil }
	if rep.DropCaches {
		drop = dropCaches
	}
	b := &bencher{spec: spec, opt: opt, rep: rep, src: src, base: base, drop: drop,
		mounts: map[string]*mounted{}, broken: map[string]string{}, mountings: map[string]int{}}
	defer b.closeTracer()
	modes := map[string]bool{}
	for _, c := range spec.Configurations {
		if !c.Native {
			modes[spec.traceMode(c)] = true
		}
	}
	calls := slices.ContainsFunc(spec.Workloads, func(w Workload) bool { return w.Calls })
	switch {
	case len(modes) == 0 || (len(modes) == 1 && modes["off"]):
	case opt.Trace == nil:
		rep.Notes = append(rep.Notes, "runs are not traced: no tracer")
	case len(modes) == 1 && !calls:
		// One way for all: the tracer stays attached for the whole bench.
		if err := b.openTracer(modes["stages"], false); err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("runs are not traced: %v", err))
		} else {
			rep.Traced = true
		}
	default:
		// Configurations traced differently (or not at all) beside each
		// other, or workloads whose calls are traced beside others: the
		// tracer is attached for each traced run only, as that run needs.
		b.perRun, rep.Traced = true, true
	}
	defer b.unmountAll()
	return rep, b.run(ctx)
}

func (b *bencher) openTracer(stages, calls bool) error {
	t, closeTracer, err := b.opt.Trace(stages, calls)
	if err != nil {
		return err
	}
	b.tracer, b.untrace = t, closeTracer
	return nil
}

func (b *bencher) closeTracer() {
	if b.untrace != nil {
		b.untrace()
	}
	b.tracer, b.untrace = nil, nil
}

type bencher struct {
	spec   *Spec
	opt    Options
	rep    *profile.BenchReport
	src    string
	base   string
	tracer Tracer
	// untrace closes the tracer; perRun: it is opened for each traced
	// run only, as some configurations are not traced.
	untrace func()
	perRun  bool
	drop    func() error
	mounts  map[string]*mounted
	// broken names the configurations that did not mount, and why;
	// mountings counts each one's mounts.
	broken    map[string]string
	mountings map[string]int
	seq       int
}

func (b *bencher) mnt(c Configuration) string {
	return filepath.Join(b.base, "mnt-"+strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' {
			return '_'
		}
		return r
	}, c.Name))
}

// mount makes c ready (again, under remount).
func (b *bencher) mount(ctx context.Context, c Configuration) (*mounted, error) {
	if m := b.mounts[c.Name]; m != nil {
		return m, nil
	}
	if why, ok := b.broken[c.Name]; ok {
		return nil, errors.New(why)
	}
	dir := b.mnt(c)
	os.MkdirAll(dir, 0o755)
	m, err := Mounter{Self: b.opt.Self}.Mount(ctx, c, b.src, dir)
	if err == nil && ctx.Err() != nil {
		m.umount() // mounted as the bench was stopped
		return nil, ctx.Err()
	}
	if err != nil {
		if ctx.Err() == nil {
			b.broken[c.Name] = err.Error()
			b.rep.Notes = append(b.rep.Notes, err.Error()+": left out")
		}
		return nil, err
	}
	b.mounts[c.Name] = m
	b.mountings[c.Name]++
	for i := range b.rep.Configs {
		if b.rep.Configs[i].Name == c.Name {
			b.rep.Configs[i].Conn = m.conn
		}
	}
	for _, w := range b.spec.Workloads {
		if err := setupWorkload(ctx, w, m.dir); err != nil {
			b.rep.Notes = append(b.rep.Notes, fmt.Sprintf("workload %q on %q: %v", w.Name, c.Name, err))
		}
	}
	return m, nil
}

func (b *bencher) unmount(name string) {
	if m := b.mounts[name]; m != nil {
		if err := m.umount(); err != nil {
			b.rep.Notes = append(b.rep.Notes, err.Error())
		}
		delete(b.mounts, name)
	}
}

func (b *bencher) unmountAll() {
	for name := range b.mounts {
		b.unmount(name)
	}
}

// order is the configurations' order in round r.
func (b *bencher) order(r int, rng *rand.Rand) []Configuration {
	cs := slices.Clone(b.spec.Configurations)
	if b.spec.Order == "rotate" {
		k := ((r % len(cs)) + len(cs)) % len(cs)
		return append(cs[k:], cs[:k]...)
	}
	rng.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
	return cs
}

func (b *bencher) run(ctx context.Context) error {
	spec, rep := b.spec, b.rep
	for _, c := range spec.Configurations {
		kind, detail := "mount", c.Mount
		switch {
		case c.Native:
			kind, detail = "native", ""
		case c.LabFS != nil:
			kind, detail = "labfs", strings.Join(c.LabFS, " ")
		}
		trace := ""
		if !c.Native {
			trace = spec.traceMode(c)
		}
		rep.Configs = append(rep.Configs, profile.BenchConfiguration{Name: c.Name, Kind: kind, Detail: detail, Trace: trace, AsksURing: c.IOURing})
	}
	rng := rand.New(rand.NewPCG(rep.Seed, rep.Seed^0x9e3779b97f4a7c15))
	nC, nW := len(spec.Configurations), len(spec.Workloads)
	total := (spec.Warmup + spec.Repetitions) * nC * nW
	if b.opt.Progress != nil {
		b.opt.Progress.Start(total, fmt.Sprintf("%d configurations x %d workloads x %d runs", nC, nW, spec.Repetitions))
		defer b.opt.Progress.Finish()
	}
	start := time.Now()
	done := 0
	for r := -spec.Warmup; r < spec.Repetitions; r++ {
		if r >= 1 && spec.Budget > 0 && time.Since(start) > time.Duration(spec.Budget) {
			rep.Notes = append(rep.Notes, fmt.Sprintf("the time budget of %v ran out after %d of %d rounds", time.Duration(spec.Budget), r, spec.Repetitions))
			break
		}
		for _, w := range spec.Workloads {
			for _, c := range b.order(r, rng) {
				if err := ctx.Err(); err != nil {
					return err
				}
				run := b.runOne(ctx, r, c, w)
				if err := ctx.Err(); err != nil {
					return err
				}
				done++
				if r >= 0 {
					rep.Runs = append(rep.Runs, run)
				}
				if b.opt.Progress != nil {
					b.opt.Progress.Step(done, progressLine(r, run))
				}
			}
		}
		if r >= 0 {
			rep.Rounds = r + 1
		}
	}
	summarise(rep, spec)
	transports(rep)
	return nil
}

// transports says, per configuration, which transport carried its traced
// runs' requests, and names a daemon that asked for FUSE over io_uring and
// fell back to /dev/fuse: its figures are /dev/fuse's.
func transports(rep *profile.BenchReport) {
	for i := range rep.Configs {
		c := &rep.Configs[i]
		var ring, all uint64
		for _, run := range rep.Runs {
			if run.Configuration != c.Name || run.Requests == nil {
				continue
			}
			for _, s := range run.Requests.Ops {
				ring, all = ring+s.URing, all+s.Count
			}
		}
		c.Transport = profile.TransportOf(ring, all)
		if c.AsksURing && all > 0 && ring == 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("configuration %q asked for FUSE over io_uring, and its daemon fell back to /dev/fuse: none of its %d traced requests came over the ring (is fuse's enable_uring there, and did the daemon's ring start?); its figures are /dev/fuse's", c.Name, all))
		}
	}
}

// decimals keeps about four significant digits without an exponent.
func decimals(v float64) int {
	switch v = abs(v); {
	case v >= 1000:
		return 0
	case v >= 100:
		return 1
	case v >= 10:
		return 2
	}
	return 3
}

func progressLine(r int, run profile.BenchRun) string {
	what := fmt.Sprintf("round %d", r+1)
	if r < 0 {
		what = "warm-up"
	}
	fig := ""
	switch {
	case run.Error != "":
		fig = "failed: " + run.Error
	case len(run.Metrics) > 0:
		fig = strconv.FormatFloat(run.Metrics[0].Value, 'f', decimals(run.Metrics[0].Value), 64) + " " + run.Metrics[0].Unit
	}
	return fmt.Sprintf("%s: %s on %s: %s", what, run.Workload, run.Configuration, fig)
}

// runOne runs workload w in configuration c, round r.
func (b *bencher) runOne(ctx context.Context, r int, c Configuration, w Workload) profile.BenchRun {
	b.seq++
	run := profile.BenchRun{Round: r, Seq: b.seq, Configuration: c.Name, Workload: w.Name, Start: time.Now()}
	if r < 0 {
		run.Round = -1
	}
	if b.spec.Remount {
		b.unmount(c.Name)
	}
	m, err := b.mount(ctx, c)
	if err != nil {
		run.Error = err.Error()
		return run
	}
	run.Conn, run.Mount = m.conn, b.mountings[c.Name]
	intervalOpen := false
	mode := b.spec.traceMode(c)
	traced := b.rep.Traced && m.conn != 0 && mode != "off"
	if traced && b.perRun {
		if err := b.openTracer(mode == "stages", w.Calls); err != nil {
			b.rep.Notes = append(b.rep.Notes, fmt.Sprintf("run %d is not traced: %v", run.Seq, err))
		}
		defer b.closeTracer()
	}
	if traced && b.tracer != nil {
		b.tracer.WatchDaemons()
		_, _, err := b.tracer.Interval(false) // what came before the run
		intervalOpen = err == nil
	}
	env := runEnv{ctx: ctx, dir: m.dir, src: b.src, drop: b.drop}
	begin := time.Now()
	metrics, err := runWorkload(w, env)
	run.Elapsed = time.Since(begin).Seconds()
	if err != nil {
		run.Error = err.Error()
		if r >= 0 && ctx.Err() == nil {
			b.rep.Notes = append(b.rep.Notes, fmt.Sprintf("workload %q on %q, round %d: %v", w.Name, c.Name, r+1, err))
		}
		return run
	}
	run.Metrics = metrics
	if intervalOpen && b.tracer != nil {
		if iv, _, err := b.tracer.Interval(false); err == nil {
			d := iv.Profile
			d.Ops = slices.DeleteFunc(d.Ops, func(s profile.OpStats) bool { return s.Conn != m.conn })
			d.SortByTime()
			run.Requests = &d
			run.Metrics = append(run.Metrics, requestFigures(w, &d)...)
			if w.Calls {
				run.Calls = iv.Calls
			}
		}
	}
	return run
}

// requestFigures are the workload's figures from the run's trace: the
// requests of each opcode it names.
func requestFigures(w Workload, p *profile.Profile) []profile.BenchMetric {
	var m []profile.BenchMetric
	for _, name := range w.Requests {
		op, _ := fuseproto.ParseOpcode(name)
		var n uint64
		for _, s := range p.Ops {
			if fuseproto.Opcode(s.Opcode) == op {
				n += s.Count
			}
		}
		m = append(m, profile.BenchMetric{Name: op.String(), Unit: "requests", Value: float64(n)})
	}
	return m
}

// summarise fills in the results: per workload, metric and configuration,
// the summary of its rounds and the comparison with the baseline, paired
// by round.
func summarise(rep *profile.BenchReport, spec *Spec) {
	type key struct{ w, m, c string }
	values := map[key][]float64{}
	byRound := map[key]map[int]float64{}
	meta := map[[2]string]profile.BenchMetric{}
	var order [][2]string
	for _, run := range rep.Runs {
		for _, m := range run.Metrics {
			k := key{run.Workload, m.Name, run.Configuration}
			values[k] = append(values[k], m.Value)
			if byRound[k] == nil {
				byRound[k] = map[int]float64{}
			}
			byRound[k][run.Round] = m.Value
			wm := [2]string{run.Workload, m.Name}
			if _, ok := meta[wm]; !ok {
				meta[wm] = m
			}
		}
	}
	for _, w := range spec.Workloads {
		for _, run := range rep.Runs {
			if run.Workload != w.Name {
				continue
			}
			for _, m := range run.Metrics {
				wm := [2]string{w.Name, m.Name}
				if !slices.Contains(order, wm) {
					order = append(order, wm)
				}
			}
		}
	}
	headline := map[string]string{} // each workload's first figure, the one the seeds report
	for _, wm := range order {
		if _, ok := headline[wm[0]]; !ok {
			headline[wm[0]] = wm[1]
		}
		mt := meta[wm]
		bk := key{wm[0], wm[1], spec.Baseline}
		for _, c := range spec.Configurations {
			k := key{wm[0], wm[1], c.Name}
			v := values[k]
			if len(v) == 0 {
				continue
			}
			res := profile.BenchResult{Workload: wm[0], Metric: wm[1], Unit: mt.Unit, HigherIsBetter: mt.HigherIsBetter,
				Configuration: c.Name, Values: v, Summary: stats.Describe(v)}
			if c.Name != spec.Baseline && len(values[bk]) > 0 {
				// Paired by round, on the rounds both ran (a failed run
				// leaves its round out); unpaired if fewer than two.
				var xs, bs []float64
				for r, x := range byRound[k] {
					if bv, ok := byRound[bk][r]; ok && bv > 0 && x > 0 {
						xs, bs = append(xs, x), append(bs, bv)
					}
				}
				paired := len(xs) >= 2
				if !paired {
					xs, bs = v, values[bk]
				}
				cmp := stats.Compare(bs, xs, paired)
				res.VsBaseline = &cmp
			}
			if res.Summary.N >= 3 && res.Summary.CV > profile.NoisyCV && headline[wm[0]] == wm[1] {
				res.Noisy = noisyCause(rep, wm[0], c.Name, res)
			}
			rep.Results = append(rep.Results, res)
		}
	}
	for _, p := range spec.Published {
		pb := profile.BenchPublished{Workload: p.Workload, Configuration: p.Configuration, Published: p.Ratio, Source: p.Source}
		for _, r := range rep.Results {
			if r.Workload == p.Workload && r.Configuration == p.Configuration && (p.Metric == "" || p.Metric == r.Metric) {
				pb.Metric = r.Metric
				if r.VsBaseline != nil {
					pb.Measured = r.VsBaseline.Ratio
				}
				break // the first metric, unless one is named
			}
		}
		if pb.Metric == "" {
			pb.Metric = p.Metric
		}
		rep.Published = append(rep.Published, pb)
	}
}

// noisyCause says what the traces show about a result that spread: the
// run furthest from the median, which way (a faster or a slower run, by
// the figure's own direction), and how its FUSE requests differ from the
// others' (count, time in FUSE); or that the time was outside FUSE.
func noisyCause(rep *profile.BenchReport, workload, config string, res profile.BenchResult) string {
	med := res.Summary.Median
	var outlier *profile.BenchRun
	var value float64
	worst := -1.0
	var reqs, fuseNs []float64
	for i := range rep.Runs {
		run := &rep.Runs[i]
		if run.Workload != workload || run.Configuration != config || len(run.Metrics) == 0 {
			continue
		}
		for _, m := range run.Metrics {
			if m.Name != res.Metric {
				continue
			}
			if d := abs(m.Value-med) / med; d > worst {
				worst, outlier, value = d, run, m.Value
			}
		}
		if run.Requests != nil {
			var n uint64
			for _, s := range run.Requests.Ops {
				n += s.Count
			}
			reqs = append(reqs, float64(n))
			fuseNs = append(fuseNs, float64(run.Requests.TotalNs()))
		}
	}
	// Faster: a figure above the median where higher is better (MiB/s,
	// files/s), below it where lower is (seconds).
	faster := (value > med) == res.HigherIsBetter
	pace := map[bool]string{true: "faster", false: "slower"}
	side := map[bool]string{true: "above", false: "below"}[value > med]
	msg := fmt.Sprintf("CV %.0f%% (over %.0f%%): round %d is %.0f%% %s the median (%s against %s %s): a %s run",
		100*res.Summary.CV, 100*profile.NoisyCV, outlier.Round+1, 100*worst, side,
		strconv.FormatFloat(value, 'f', decimals(value), 64), strconv.FormatFloat(med, 'f', decimals(med), 64), res.Unit, pace[faster])
	if outlier.Requests == nil || len(reqs) == 0 {
		if i := slices.IndexFunc(rep.Configs, func(c profile.BenchConfiguration) bool { return c.Name == config }); i >= 0 && rep.Configs[i].Kind == "native" {
			return msg + "; native runs make no FUSE requests to tell why"
		}
		return msg + "; no trace of the runs to tell why"
	}
	var n uint64
	for _, s := range outlier.Requests.Ops {
		n += s.Count
	}
	medReqs, medNs := stats.Median(reqs), stats.Median(fuseNs)
	ns := float64(outlier.Requests.TotalNs())
	switch {
	case medReqs > 0 && abs(float64(n)-medReqs)/medReqs > 0.2:
		more := map[bool]string{true: "more", false: "fewer"}[float64(n) > medReqs]
		return msg + fmt.Sprintf("; it made %d FUSE requests, %s than the median of %.0f (the kernel's caches, read-ahead or write-back differed)", n, more, medReqs)
	case medNs > 0 && abs(ns-medNs)/medNs > 0.2:
		took := fmt.Sprintf("; its requests took %.0f ms in FUSE against a median of %.0f ms", ns/1e6, medNs/1e6)
		if (ns < medNs) == faster {
			return msg + took + fmt.Sprintf(" (the daemon or its backend was %s)", pace[faster])
		}
		// FUSE time moved against the figure: it cannot be the cause.
		return msg + took + fmt.Sprintf(", yet the run was %s: the time went outside FUSE (the machine, the disk)", pace[faster])
	}
	return msg + "; its FUSE requests were as in the other runs: the time went outside FUSE (the machine, the disk)"
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// makeScratch makes the bench's scratch file system: ext4 with a journal
// on a loop device (test/bench learnt that the VM's unjournalled ext4
// checks for recently deleted inodes before it reuses any, which made the
// order of the configurations show in file-creation rates), or a directory.
// A file beside it holds the bench's PID, so that a later bench can tell a
// killed one's leftovers (CleanStale).
func makeScratch(spec *Spec, parent string) (string, func(), error) {
	if parent == "" {
		parent = "/var/tmp"
	}
	dir, err := os.MkdirTemp(parent, scratchPrefix)
	if err != nil {
		return "", nil, fmt.Errorf("scratch directory: %w", err)
	}
	pidFile := dir + ".pid"
	os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())), 0o644)
	if spec.Scratch == "tmp" {
		return dir, func() { removeScratch(dir) }, nil
	}
	size, _ := ParseSize(spec.ScratchSize)
	img := dir + ".img"
	fail := func(what string, err error, out []byte) (string, func(), error) {
		os.Remove(img)
		os.RemoveAll(dir)
		os.Remove(pidFile)
		return "", nil, fmt.Errorf("scratch ext4 file system: %s: %s (or set scratch: tmp)", what, firstLine(out, err))
	}
	f, err := os.Create(img)
	if err != nil {
		return fail("image", err, nil)
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		return fail("image", err, nil)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-N", "262144", img).CombinedOutput(); err != nil {
		return fail("mkfs.ext4", err, out)
	}
	out, err := exec.Command("losetup", "--direct-io=on", "--find", "--show", img).CombinedOutput()
	if err != nil {
		return fail("losetup", err, out)
	}
	dev := strings.TrimSpace(string(out))
	if out, err := exec.Command("mount", dev, dir).CombinedOutput(); err != nil {
		exec.Command("losetup", "-d", dev).Run()
		return fail("mount", err, out)
	}
	return dir, func() { removeScratch(dir) }, nil
}

const scratchPrefix = "fusescope-bench-"

// removeScratch unmounts everything at and under dir (deepest first;
// lazily where busy), detaches its image's loop devices and removes it.
func removeScratch(dir string) {
	if infos, err := fuseconn.ReadMountInfo(); err == nil {
		var under []string
		for _, m := range infos {
			if m.MountPoint == dir || strings.HasPrefix(m.MountPoint, dir+"/") {
				under = append(under, m.MountPoint)
			}
		}
		sort.Sort(sort.Reverse(sort.StringSlice(under))) // children before parents
		for _, mp := range under {
			if exec.Command("umount", mp).Run() != nil {
				exec.Command("umount", "-l", mp).Run()
			}
		}
	}
	img := dir + ".img"
	if out, err := exec.Command("losetup", "-j", img).Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if dev, _, ok := strings.Cut(line, ":"); ok {
				exec.Command("losetup", "-d", dev).Run()
			}
		}
	}
	os.Remove(img)
	os.RemoveAll(dir)
	os.Remove(dir + ".pid")
}

// CleanStale removes what benches that were killed left in parent (their
// mounts, loop devices and scratch directories), and says what it cleaned.
func CleanStale(parent string) []string {
	if parent == "" {
		parent = "/var/tmp"
	}
	pids, _ := filepath.Glob(filepath.Join(parent, scratchPrefix+"*.pid"))
	var cleaned []string
	for _, pf := range pids {
		b, err := os.ReadFile(pf)
		pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || perr != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			continue // still running (or not ours to tell)
		}
		dir := strings.TrimSuffix(pf, ".pid")
		removeScratch(dir)
		cleaned = append(cleaned, fmt.Sprintf("cleaned up after a bench that was killed (pid %d): %s", pid, dir))
	}
	return cleaned
}

// Discard is a Progress that shows nothing.
type Discard struct{}

func (Discard) Start(int, string) {}
func (Discard) Step(int, string)  {}
func (Discard) Finish()           {}

// Lines is a Progress of plain lines, for logs and pipes.
type Lines struct {
	W     io.Writer
	total int
	start time.Time
}

func (l *Lines) Start(total int, what string) {
	l.total, l.start = total, time.Now()
	fmt.Fprintf(l.W, "bench: %s, %d runs\n", what, total)
}

func (l *Lines) Step(done int, line string) {
	eta := ""
	if done > 0 && done < l.total {
		left := time.Duration(float64(time.Since(l.start)) / float64(done) * float64(l.total-done))
		eta = fmt.Sprintf(", about %v left", left.Round(time.Second))
	}
	fmt.Fprintf(l.W, "[%d/%d%s] %s\n", done, l.total, eta, line)
}

func (l *Lines) Finish() {}
