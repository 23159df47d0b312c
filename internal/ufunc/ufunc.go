package ufunc

import (
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"

	"github.com/fusescope/fusescope/internal/bpf"
	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/profile"
)

// Limits of one run: the programs' maps are this size.
const (
	MaxCounted = 1024 // KFUNC_MAX_FUNCS
	MaxTimed   = 64   // KFUNC_MAX_TIMED
)

// Mechanism is how ufunc reaches the functions (the record's
// daemon_functions.mechanism).
const Mechanism = "uprobe"

// Config is one run of fusescope ufunc.
type Config struct {
	Binary  string // the executable or library whose functions are probed
	Pattern string // glob of the functions counted (and timed under Latency)
	Latency bool   // time each call, entry to return, in a log2 histogram
	USDT    bool   // Pattern matches USDT probes (provider:name), counted
	Arg     int    // USDT: count the hits per value of this argument (from 1); 0: none
	PID     int    // only this process's calls (and probes in it alone)
	Command []string
	Tool    string
	// holds is the tracer's map of the requests the daemons hold
	// (OpenStages): each timed call within a hold counts for its request.
	holds *ebpf.Map
	bin   *Binary // the binary, when the caller has read it already
}

// Source is the run's probes, read as records (a session source).
type Source struct {
	cfg     Config
	bin     *Binary
	counted []Symbol
	timed   int // the first timed functions of counted
	fn      profile.KernelFunctions
	coll    *ebpf.Collection
	links   []link.Link
	start   time.Time
	prev    *profile.Record
}

// Open finds the functions, loads the programs and attaches a uprobe (and
// with Latency a uretprobe) to each. Each failure is one line that says
// what is wrong and what to do.
func Open(cfg Config) (_ *Source, err error) {
	if err := ktrace.CheckPrivileges(); err != nil {
		return nil, err
	}
	bin := cfg.bin
	if bin == nil {
		if bin, err = OpenBinary(cfg.Binary); err != nil {
			return nil, err
		}
	}
	if cfg.USDT {
		return openUSDT(cfg, bin)
	}
	syms, err := bin.Match(cfg.Pattern)
	if err != nil {
		return nil, err
	}
	switch {
	case len(syms) > MaxCounted:
		return nil, fmt.Errorf("pattern %q matches %d functions of %s, more than the %d one run counts: narrow it", cfg.Pattern, len(syms), path.Base(cfg.Binary), MaxCounted)
	case cfg.Latency && len(syms) > MaxTimed:
		return nil, fmt.Errorf("%s: pattern %q matches %d functions, more than the %d one run times: narrow it", map[bool]string{true: "--stages", false: "--latency"}[cfg.holds != nil], cfg.Pattern, len(syms), MaxTimed)
	}
	began := time.Now()
	s, ex, err := load(cfg, bin)
	if err != nil {
		return nil, err
	}
	s.counted = syms
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	s.fn = profile.KernelFunctions{Pattern: cfg.Pattern, Mechanism: Mechanism, Why: "uprobes on " + cfg.Binary}
	if cfg.Latency {
		s.fn.Timed = []string{cfg.Pattern}
		s.timed = len(syms)
	}
	// A Go function is timed at its RET instructions, found before
	// anything is attached: one that cannot be is refused in one line.
	var rets [][]uint64
	if cfg.Latency && bin.IsGo {
		for _, sym := range syms {
			r, err := bin.Returns(sym)
			if err != nil {
				return nil, fmt.Errorf("--latency on a Go program times a function at its RET instructions (a return probe would corrupt its goroutine's stack), and %v: leave --latency out to count the calls", err)
			}
			rets = append(rets, r)
		}
		s.fn.Why += " (Go: timed at each function's RET instructions, by goroutine)"
	}
	for i, sym := range syms {
		opts := &link.UprobeOptions{Cookie: uint64(i), PID: cfg.PID}
		if bin.IsGo {
			if opts.Offset, err = bin.GoEntry(sym); err != nil {
				return nil, err
			}
		}
		prog := s.coll.Programs["ufunc_count"]
		switch {
		case i < s.timed && bin.IsGo:
			prog = s.coll.Programs["ufunc_enter_go"]
		case i < s.timed:
			prog = s.coll.Programs["ufunc_enter"]
		}
		l, err := ex.Uprobe(sym.ELFName, prog, opts)
		if err != nil {
			s.fn.NotAttached = append(s.fn.NotAttached, profile.FunctionError{Name: sym.Name, Error: err.Error()})
			continue
		}
		s.links = append(s.links, l)
		if i < s.timed && bin.IsGo {
			for _, off := range rets[i] {
				ret := &link.UprobeOptions{Offset: off, Cookie: uint64(i)<<32 | uint64(i), PID: cfg.PID}
				l, err := ex.Uprobe(sym.ELFName, s.coll.Programs["ufunc_ret_go"], ret)
				if err != nil {
					return nil, fmt.Errorf("%s: a probe on its RET at +%#x: %w", sym.Name, off, err)
				}
				s.links = append(s.links, l)
			}
		} else if i < s.timed {
			ret := &link.UprobeOptions{Cookie: uint64(i)<<32 | uint64(i), PID: cfg.PID}
			l, err := ex.Uretprobe(sym.ELFName, s.coll.Programs["ufunc_exit"], ret)
			if err != nil {
				s.fn.NotAttached = append(s.fn.NotAttached, profile.FunctionError{Name: sym.Name, Error: err.Error()})
				continue
			}
			s.links = append(s.links, l)
		}
		s.fn.Attached++
	}
	if s.fn.Attached == 0 {
		return nil, fmt.Errorf("no uprobe attached to the %d functions of %s matching %q: %s", len(syms), path.Base(cfg.Binary), cfg.Pattern, s.fn.NotAttached[0].Error)
	}
	s.started(began)
	return s, nil
}

// openUSDT attaches a counting uprobe to each USDT probe the pattern
// matches (its semaphore, if any, raised by the kernel while attached).
func openUSDT(cfg Config, bin *Binary) (_ *Source, err error) {
	if cfg.Latency {
		return nil, fmt.Errorf("--latency times functions, and a USDT probe marks a point: leave out --latency, or time the function around it")
	}
	probes, err := bin.MatchUSDT(cfg.Pattern)
	if err != nil {
		return nil, err
	}
	if len(probes) > MaxCounted {
		return nil, fmt.Errorf("pattern %q matches %d USDT probes, more than the %d one run counts: narrow it", cfg.Pattern, len(probes), MaxCounted)
	}
	began := time.Now()
	s, ex, err := load(cfg, bin)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	s.fn = profile.KernelFunctions{Pattern: cfg.Pattern, Mechanism: Mechanism, Why: "uprobes on the USDT probes of " + cfg.Binary}
	for i, p := range probes {
		s.counted = append(s.counted, Symbol{Name: "usdt:" + p.FullName()})
		opts := &link.UprobeOptions{Address: p.Offset, RefCtrOffset: p.SemaphoreOffset, Cookie: uint64(i), PID: cfg.PID}
		prog := s.coll.Programs["ufunc_count"]
		if cfg.Arg > 0 {
			spec, err := p.Arg(cfg.Arg)
			if err != nil {
				return nil, err
			}
			c, err := spec.cookie()
			if err != nil {
				return nil, fmt.Errorf("--arg %d of %s: %v", cfg.Arg, p.FullName(), err)
			}
			opts.Cookie |= uint64(c) << 32
			prog = s.coll.Programs["ufunc_count_arg"]
		}
		l, err := ex.Uprobe(p.Name, prog, opts)
		if err != nil {
			s.fn.NotAttached = append(s.fn.NotAttached, profile.FunctionError{Name: p.FullName(), Error: err.Error()})
			continue
		}
		s.links = append(s.links, l)
		s.fn.Attached++
	}
	if s.fn.Attached == 0 {
		return nil, fmt.Errorf("no uprobe attached to the %d USDT probes of %s matching %q: %s", len(probes), path.Base(cfg.Binary), cfg.Pattern, s.fn.NotAttached[0].Error)
	}
	s.started(began)
	return s, nil
}

// load loads the programs (-p's process set in them) and opens the
// binary to attach them to.
func load(cfg Config, bin *Binary) (*Source, *link.Executable, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, nil, fmt.Errorf("raising the locked-memory limit for BPF maps (kernel %s): %w", kernel.Release(), err)
	}
	spec, err := bpf.LoadUfunc()
	if err != nil {
		return nil, nil, err
	}
	if cfg.PID > 0 {
		if err := spec.Variables["filter_tgid"].Set(uint32(cfg.PID)); err != nil {
			return nil, nil, err
		}
	}
	opts := ebpf.CollectionOptions{}
	if cfg.holds != nil {
		if err := spec.Variables["stage_join"].Set(uint8(1)); err != nil {
			return nil, nil, err
		}
		opts.MapReplacements = map[string]*ebpf.Map{"daemon_held": cfg.holds}
	}
	s := &Source{cfg: cfg, bin: bin}
	if s.coll, err = ebpf.NewCollectionWithOptions(spec, opts); err != nil {
		return nil, nil, fmt.Errorf("loading the uprobe programs (kernel %s): %w", kernel.Release(), err)
	}
	ex, err := link.OpenExecutable(cfg.Binary)
	if err != nil {
		s.Close()
		return nil, nil, fmt.Errorf("%s: %w", cfg.Binary, err)
	}
	return s, ex, nil
}

// started notes that the probes are attached: the run's figures count
// from now.
func (s *Source) started(began time.Time) {
	s.fn.AttachNs = time.Since(began).Nanoseconds()
	s.start = time.Now()
	s.prev = s.record(s.start, s.start, &profile.KernelFunctions{Functions: []profile.FunctionCalls{}})
}

// Functions says what was attached.
func (s *Source) Functions() profile.KernelFunctions { return s.fn }

// Snapshot is the calls since the probes were attached.
func (s *Source) Snapshot() (*profile.Record, error) {
	fn, err := s.read()
	if err != nil {
		return nil, err
	}
	return s.record(s.start, time.Now(), fn), nil
}

// Interval is the calls since the previous one, and the whole run's.
func (s *Source) Interval(bool) (interval, whole *profile.Record, err error) {
	cur, err := s.Snapshot()
	if err != nil {
		return nil, nil, err
	}
	in, err := cur.FunctionsSince(s.prev)
	if err != nil {
		return nil, nil, err
	}
	s.prev = cur
	return in, cur, nil
}

func (s *Source) record(from, to time.Time, fn *profile.KernelFunctions) *profile.Record {
	return &profile.Record{
		Schema: profile.Schema,
		Meta: profile.Meta{
			Tool: s.cfg.Tool, Source: "user:functions (uprobe on " + s.cfg.Binary + ")", Kernel: kernel.Release(), Host: kernel.Hostname(),
			Start: from, End: to, Command: s.cfg.Command, Filters: profile.Filters{PID: s.cfg.PID},
		},
		DaemonFunctions: fn,
	}
}

func (s *Source) read() (*profile.KernelFunctions, error) {
	fn := s.fn
	fn.Functions = []profile.FunctionCalls{}
	var perCPU []uint64
	var hists []hist.CPUHist
	for i, sym := range s.counted {
		if err := s.coll.Maps["ucounts"].Lookup(uint32(i), &perCPU); err != nil {
			return nil, fmt.Errorf("reading the counts: %w", err)
		}
		var n uint64
		for _, c := range perCPU {
			n += c
		}
		if n == 0 {
			continue
		}
		f := profile.FunctionCalls{Name: sym.Name, Module: path.Base(s.cfg.Binary), Count: n}
		if i < s.timed {
			if err := s.coll.Maps["uhists"].Lookup(uint32(i), &hists); err != nil {
				return nil, fmt.Errorf("reading the histograms: %w", err)
			}
			h := hist.MergeCPUs(hists)
			f.Latency = &h
		}
		fn.Functions = append(fn.Functions, f)
	}
	if s.cfg.Arg > 0 {
		if err := s.readValues(&fn); err != nil {
			return nil, err
		}
	}
	var missed []uint64
	if err := s.coll.Maps["umissed"].Lookup(uint32(0), &missed); err != nil {
		return nil, fmt.Errorf("reading the missed calls: %w", err)
	}
	for _, m := range missed {
		fn.Missed += m
	}
	fn.NotAttached = append([]profile.FunctionError(nil), s.fn.NotAttached...)
	fn.Sort()
	if s.cfg.holds != nil {
		stage, err := s.readStage()
		if err != nil {
			return nil, err
		}
		fn.DaemonStage = stage
	}
	return &fn, nil
}

// readValues reads --arg's hits per value of the argument.
func (s *Source) readValues(fn *profile.KernelFunctions) error {
	byName := map[string]*profile.FunctionCalls{}
	for i := range fn.Functions {
		byName[fn.Functions[i].Name] = &fn.Functions[i]
	}
	var k bpf.UfuncArgKey
	var n uint64
	it := s.coll.Maps["uargs"].Iterate()
	for it.Next(&k, &n) {
		if int(k.Index) >= len(s.counted) {
			continue
		}
		if f := byName[s.counted[k.Index].Name]; f != nil {
			f.Arg = s.cfg.Arg
			f.Values = append(f.Values, profile.ArgValue{Value: k.Value, Count: n})
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading the arguments' values: %w", err)
	}
	for i := range fn.Functions {
		fn.Functions[i].SortValues()
	}
	var lost []uint64
	if err := s.coll.Maps["uargs_lost"].Lookup(uint32(0), &lost); err != nil {
		return fmt.Errorf("reading the values lost: %w", err)
	}
	for _, l := range lost {
		fn.ValuesLost += l
	}
	return nil
}

// inFunctions is the index under which the join keeps each opcode's time
// inside any function (ufunc.bpf.c's UFUNC_IN_FUNCTIONS).
const inFunctions = 0xffffffff

// readStage reads the calls counted within the daemons' holds, by
// connection and opcode; the stage's own figures are the trace's
// (StageSource fills them in).
func (s *Source) readStage() ([]profile.StageFunctions, error) {
	type key struct{ conn, opcode uint32 }
	rows := map[key]*profile.StageFunctions{}
	var k bpf.UfuncStageFnKey
	var perCPU []bpf.UfuncStageFn
	it := s.coll.Maps["ustage"].Iterate()
	for it.Next(&k, &perCPU) {
		var calls, ns uint64
		for _, c := range perCPU {
			calls += c.Calls
			ns += c.Ns
		}
		r := rows[key{k.Conn, k.Opcode}]
		if r == nil {
			r = &profile.StageFunctions{Conn: k.Conn, Opcode: k.Opcode, Op: fuseproto.Opcode(k.Opcode).String(), Functions: []profile.StageFunction{}}
			rows[key{k.Conn, k.Opcode}] = r
		}
		switch {
		case k.Index == inFunctions:
			r.InFunctionsNs += ns
		case int(k.Index) < len(s.counted):
			r.Functions = append(r.Functions, profile.StageFunction{Name: s.counted[k.Index].Name, Calls: calls, Ns: ns})
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading the daemon stage by function: %w", err)
	}
	out := []profile.StageFunctions{}
	for _, r := range rows {
		out = append(out, *r)
	}
	return out, nil
}

// Close detaches the probes and frees the maps.
func (s *Source) Close() error {
	var errs []error
	for _, l := range s.links {
		errs = append(errs, l.Close())
	}
	s.links = nil
	if s.coll != nil {
		s.coll.Close()
		s.coll = nil
	}
	return errors.Join(errs...)
}
