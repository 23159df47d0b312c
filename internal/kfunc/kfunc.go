// Package kfunc counts and times calls of kernel functions (fusescope
// kfunc), as bcc's funccount and libbpf-tools' funclatency do, for many
// functions at once: fentry/fexit programs where the kernel has BTF for
// the functions, kprobes (kprobe.multi for the counts where it can)
// otherwise. Counts and histograms are kept in kernel maps; a snapshot
// reads them into a record's kernel_functions section.
package kfunc

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"github.com/fusescope/fusescope/internal/bpf"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/profile"
)

// fentryMany is the most functions auto counts through fentry where the
// kernel has kprobe.multi: beyond it, detaching fentry's trampolines one
// by one costs more than a one-link kprobe.multi (docs/performance.md).
const fentryMany = 16

// Limits of one run, as the BPF maps hold them.
const (
	MaxCounted = 1024 // functions counted (KFUNC_MAX_FUNCS)
	MaxTimed   = 64   // functions timed (KFUNC_MAX_TIMED)
)

// Config is one run of kfunc.
type Config struct {
	// Pattern is the glob of the functions to count ("fuse_*"); "" counts
	// none.
	Pattern string
	// Latency are the functions to time (names or globs).
	Latency []string
	// Attach is AttachAuto, AttachFentry or AttachKprobe.
	Attach string
	// PID keeps one process's calls (its threads'); 0 keeps every one's.
	PID int
	// Command and Tool go in the record's metadata: the fusescope command
	// line and version.
	Command []string
	Tool    string
}

// Source is a run's programs, attached: a session source whose snapshots
// are cumulative and whose intervals are their differences.
type Source struct {
	cfg     Config
	counted []Symbol // by index in the counts map
	timed   []Symbol // by index in the hists map
	// matched are counted and timed as the globs matched them, before
	// fentry left out the functions without BTF.
	matched [2][]Symbol
	fn      profile.KernelFunctions

	maps     *ebpf.Collection
	mapSpecs map[string]*ebpf.MapSpec
	progs    []*ebpf.Program
	probed   map[Symbol]bool // functions with a probe attached
	// The fentry programs by function index, whose recursion misses are
	// calls they did not see (counting), or did not time.
	countProgs map[int]*ebpf.Program
	timedProgs []*ebpf.Program
	links      []link.Link
	ips        *addrIndex // kprobe counts: the function at each probed address

	start time.Time
	prev  *profile.Record
}

// Open checks what the kernel offers, finds the functions, loads the
// programs and attaches them. Each failure is one line that says what is
// missing and what to do.
func Open(cfg Config) (_ *Source, err error) {
	if cfg.Attach == "" {
		cfg.Attach = AttachAuto
	}
	switch cfg.Attach {
	case AttachAuto, AttachFentry, AttachKprobe:
	default:
		return nil, fmt.Errorf("--attach %q: give auto, fentry or kprobe", cfg.Attach)
	}
	if err := ktrace.CheckPrivileges(); err != nil {
		return nil, err
	}
	tracefs, tracefsErr := ktrace.EnsureTracefs()
	release := kernel.Release()
	mech := detectMechanisms(tracefs)
	if err := mech.refusal(release, cfg.Attach); err != nil {
		return nil, err
	}
	var avail []Symbol
	var availErr error
	if tracefsErr != nil {
		availErr = tracefsErr
	} else {
		avail, availErr = readAvailable(tracefs)
	}
	s := &Source{cfg: cfg}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	cache := btf.NewCache()
	useFentry, why, err := s.choose(mech, avail, availErr, cache)
	if err != nil {
		return nil, err
	}
	if len(s.counted) > MaxCounted {
		return nil, fmt.Errorf("pattern %q matches %d functions, more than the %d one run counts: narrow it", cfg.Pattern, len(s.counted), MaxCounted)
	}
	if len(s.timed) > MaxTimed {
		return nil, fmt.Errorf("--latency names %d functions, more than the %d one run times: give fewer", len(s.timed), MaxTimed)
	}
	// Kernels before 5.11 charge BPF maps to the locked-memory limit.
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raising the locked-memory limit for BPF maps (kernel %s): %w", release, err)
	}
	spec, err := bpf.LoadKfunc()
	if err != nil {
		return nil, err
	}
	if cfg.PID > 0 {
		if err := spec.Variables["filter_tgid"].Set(uint32(cfg.PID)); err != nil {
			return nil, err
		}
	}
	mapsOnly := spec.Copy()
	mapsOnly.Programs = nil
	s.mapSpecs = spec.Maps
	if s.maps, err = ebpf.NewCollectionWithOptions(mapsOnly, ebpf.CollectionOptions{Cache: cache}); err != nil {
		return nil, fmt.Errorf("creating kfunc's maps in kernel %s: %w", release, err)
	}
	began := time.Now()
	if useFentry {
		err = s.attachFentry(spec, cache)
		if err != nil && cfg.Attach == AttachAuto && mech.kprobes == nil && s.fn.Attached == 0 {
			// Tracing programs load, but no trampoline attaches.
			why = fmt.Sprintf("fentry loads but does not attach here (%v)", err)
			s.closeProbes()
			s.counted, s.timed = s.matched[0], s.matched[1]
			useFentry, err = false, nil
		}
	}
	if !useFentry {
		err = s.attachKprobes(spec, cache)
	}
	if err != nil {
		return nil, err
	}
	s.fn.AttachNs = int64(time.Since(began))
	s.fn.Why = why
	s.fn.Pattern, s.fn.Timed = cfg.Pattern, cfg.Latency
	if s.fn.Attached == 0 {
		return nil, fmt.Errorf("no function could be probed in kernel %s (%s: %s)", release, s.fn.NotAttached[0].Name, s.fn.NotAttached[0].Error)
	}
	s.start = time.Now()
	s.prev = s.record(s.start, s.start, &profile.KernelFunctions{Functions: []profile.FunctionCalls{}})
	return s, nil
}

// readAvailable reads the functions ftrace can hook.
func readAvailable(tracefs string) ([]Symbol, error) {
	f, err := os.Open(tracefs + "/available_filter_functions")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseAvailableFilterFunctions(f)
}

// choose finds the functions to count and to time, and picks the
// mechanism: fentry where the kernel has it and BTF for every function's
// module, kprobes otherwise. why is the reason, for the line that says
// which was chosen.
func (s *Source) choose(mech mechanisms, avail []Symbol, availErr error, cache *btf.Cache) (useFentry bool, why string, err error) {
	cfg := s.cfg
	if availErr != nil && (cfg.Attach == AttachKprobe || mech.fentry != nil) {
		return false, "", fmt.Errorf("cannot read the functions kprobes can hook (available_filter_functions in tracefs: %v): mount tracefs at /sys/kernel/tracing, or use --attach fentry on a kernel with BTF", withoutPath(availErr))
	}
	// The names to glob: those ftrace can hook, or, where that list cannot
	// be read, the functions the kernel's BTF describes.
	names := avail
	if availErr != nil {
		if names, err = btfFunctions(cache); err != nil {
			return false, "", fmt.Errorf("cannot list the kernel's functions: available_filter_functions: %v; BTF: %v", withoutPath(availErr), err)
		}
	}
	if cfg.Pattern != "" {
		for _, sym := range names {
			if Match(cfg.Pattern, sym.Name) {
				s.counted = append(s.counted, sym)
			}
		}
		if len(s.counted) == 0 {
			return false, "", fmt.Errorf("no function of kernel %s matches %q (of %d it can probe): is its module loaded? (fuse: modprobe fuse, or mount a FUSE file system)", kernel.Release(), cfg.Pattern, len(names))
		}
	}
	for _, want := range cfg.Latency {
		n := len(s.timed)
		for _, sym := range names {
			if Match(want, sym.Name) {
				s.timed = append(s.timed, sym)
			}
		}
		if len(s.timed) == n {
			return false, "", fmt.Errorf("--latency %s: no such kernel function can be probed here (names are as in /proc/kallsyms; is its module loaded?)", want)
		}
	}
	sortSymbols(s.counted)
	sortSymbols(s.timed)
	s.matched = [2][]Symbol{s.counted, s.timed}

	if cfg.Attach == AttachKprobe || (cfg.Attach == AttachAuto && mech.fentry != nil) {
		if cfg.Attach == AttachKprobe {
			return false, "--attach kprobe", nil
		}
		return false, fmt.Sprintf("no fentry (%v)", mech.fentry), nil
	}
	// fentry needs the function in BTF: its module's, or the kernel's.
	var noBTF []string
	for _, sym := range append(append([]Symbol(nil), s.counted...), s.timed...) {
		if !hasModuleBTF(sym.Module) && !contains(noBTF, sym.Module) {
			noBTF = append(noBTF, sym.Module)
		}
	}
	if len(noBTF) > 0 {
		lacks := fmt.Sprintf("%s.ko has no BTF (/sys/kernel/btf/%s), which fentry needs", strings.Join(noBTF, ".ko, "), noBTF[0])
		if cfg.Attach == AttachFentry || mech.kprobes != nil {
			return false, "", fmt.Errorf("kernel %s: %s: use --attach kprobe", kernel.Release(), lacks)
		}
		return false, lacks, nil
	}
	// A function without a BTF entry of its name (a compiler's copy such
	// as fuse_fill_iomap.isra.0) has no fentry: left out, and named.
	// A function to time must be timed: where one has no BTF, auto
	// times them all through kprobes.
	total := len(s.counted) + len(s.timed)
	timed := s.withBTF(s.timed, cache)
	if len(timed) < len(s.timed) {
		lacks := fmt.Sprintf("%s has no BTF of its name, which fentry needs", s.fn.NotAttached[0].Name)
		if cfg.Attach == AttachFentry || mech.kprobes != nil {
			return false, "", fmt.Errorf("kernel %s: --latency %s: use --attach kprobe", kernel.Release(), lacks)
		}
		s.fn.NotAttached = nil
		return false, lacks, nil
	}
	s.counted = s.withBTF(s.counted, cache)
	if len(s.counted)+len(s.timed) == 0 {
		return false, "", fmt.Errorf("kernel %s: no function matching %q has BTF, which fentry needs (%s: %s): use --attach kprobe", kernel.Release(), cfg.Pattern, s.fn.NotAttached[0].Name, s.fn.NotAttached[0].Error)
	}
	// Many functions to count: fentry detaches its trampolines one at a
	// time, each after a grace period (291 took 38-42 s in a 6.12 guest,
	// where one kprobe.multi link detached in 50 ms: docs/performance.md).
	if cfg.Attach == AttachAuto && len(s.counted) > fentryMany && mech.kprobes == nil && features.HaveBPFLinkKprobeMulti() == nil {
		s.counted, s.timed, s.fn.NotAttached = s.matched[0], s.matched[1], nil
		return false, fmt.Sprintf("%d functions to count: one kprobe.multi link attaches and detaches them at once, where fentry's trampolines detach one at a time (--attach fentry forces it)", len(s.counted)), nil
	}
	why = "the kernel has BTF for every function"
	if n := len(s.fn.NotAttached); n > 0 {
		why = fmt.Sprintf("the kernel has BTF for %d of the %d functions (--attach kprobe reaches the %d others too)", total-n, total, n)
	} else if cfg.Attach == AttachAuto {
		why += " (--attach kprobe for kprobes)"
	}
	if cfg.Attach == AttachFentry {
		why = "--attach fentry; " + why
	}
	return true, why, nil
}

// withBTF keeps the functions the kernel's BTF names (its own, or their
// module's), noting the others as not attached.
func (s *Source) withBTF(list []Symbol, cache *btf.Cache) []Symbol {
	var kept []Symbol
	for _, sym := range list {
		spec, err := cache.Kernel()
		if err == nil && sym.Module != "" {
			spec, err = cache.Module(sym.Module)
		}
		var fn *btf.Func
		if err == nil {
			err = spec.TypeByName(sym.Name, &fn)
		}
		switch {
		case err == nil:
			kept = append(kept, sym)
		case errors.Is(err, btf.ErrNotFound):
			s.skip(sym, "no BTF of its name (a compiler's copy): kprobes reach it")
		case errors.Is(err, btf.ErrMultipleMatches):
			s.skip(sym, "two functions of that name in BTF: kprobes reach it")
		default:
			s.skip(sym, "its BTF does not read: "+err.Error())
		}
	}
	return kept
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortSymbols(list []Symbol) {
	sort.Slice(list, func(i, j int) bool {
		if list[i].Name != list[j].Name {
			return list[i].Name < list[j].Name
		}
		return list[i].Module < list[j].Module
	})
}

// btfFunctions lists the functions the kernel's BTF describes, the
// kernel's and each module's.
func btfFunctions(cache *btf.Cache) ([]Symbol, error) {
	var out []Symbol
	add := func(spec *btf.Spec, module string) error {
		for t, err := range spec.All() {
			if err != nil {
				return err
			}
			if fn, ok := t.(*btf.Func); ok {
				out = append(out, Symbol{Name: fn.Name, Module: module})
			}
		}
		return nil
	}
	kern, err := cache.Kernel()
	if err != nil {
		return nil, err
	}
	if err := add(kern, ""); err != nil {
		return nil, err
	}
	mods, err := cache.Modules()
	if err != nil {
		return out, nil // the kernel's own functions still count
	}
	for _, m := range mods {
		spec, err := cache.Module(m)
		if err != nil {
			continue
		}
		if err := add(spec, m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// withoutPath is an error's text without the path an *os.PathError names.
func withoutPath(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Functions is the run's kernel_functions section as attached: mechanism,
// why, attach time, the functions not attached (no calls yet).
func (s *Source) Functions() profile.KernelFunctions { return s.fn }

// Snapshot is every call since the programs were attached.
func (s *Source) Snapshot() (*profile.Record, error) {
	fn, err := s.read()
	if err != nil {
		return nil, err
	}
	return s.record(s.start, time.Now(), fn), nil
}

// Interval is the calls since the previous interval (or the start), and
// every call since the start.
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
			Tool: s.cfg.Tool, Source: "kernel:functions (" + s.fn.Mechanism + ")", Kernel: kernel.Release(), Host: kernel.Hostname(),
			Start: from, End: to, Command: s.cfg.Command, Filters: profile.Filters{PID: s.cfg.PID},
		},
		Functions: fn,
	}
}

// read sums the maps' per-CPU counters into the section.
func (s *Source) read() (*profile.KernelFunctions, error) {
	fn := s.fn
	fn.Functions = nil
	calls := make([]uint64, len(s.counted))
	if s.ips != nil {
		var ip uint64
		var perCPU []uint64
		it := s.maps.Maps["ip_counts"].Iterate()
		unknown := map[uint64]uint64{}
		for it.Next(&ip, &perCPU) {
			n := sum(perCPU)
			if i, ok := s.ips.lookup(ip); ok {
				calls[i] += n
			} else {
				unknown[ip] += n
			}
		}
		if err := it.Err(); err != nil {
			return nil, fmt.Errorf("reading the kprobe counts: %w", err)
		}
		for ip, n := range unknown {
			fn.Functions = append(fn.Functions, profile.FunctionCalls{Name: fmt.Sprintf("0x%x", ip), Count: n})
		}
	} else {
		var perCPU []uint64
		for i := range s.counted {
			if err := s.maps.Maps["counts"].Lookup(uint32(i), &perCPU); err != nil {
				return nil, fmt.Errorf("reading the counts: %w", err)
			}
			calls[i] = sum(perCPU)
		}
		// A call during which a run of its program was preempted on the
		// same CPU is not seen by the program: the kernel counts it.
		for i, prog := range s.countProgs {
			if skipped := recursionMisses(prog); skipped > 0 {
				fn.Skipped += skipped
				if s.cfg.PID == 0 {
					calls[i] += skipped
				}
			}
		}
	}
	at := map[Symbol]int{}
	for i, sym := range s.counted {
		if calls[i] > 0 {
			at[sym] = len(fn.Functions)
			fn.Functions = append(fn.Functions, profile.FunctionCalls{Name: sym.Name, Module: sym.Module, Count: calls[i]})
		}
	}
	var perCPU []hist.CPUHist
	for j, sym := range s.timed {
		if err := s.maps.Maps["hists"].Lookup(uint32(j), &perCPU); err != nil {
			return nil, fmt.Errorf("reading the histograms: %w", err)
		}
		h := hist.MergeCPUs(perCPU)
		if h.Count == 0 {
			continue
		}
		i, ok := at[sym]
		if !ok {
			i = len(fn.Functions)
			at[sym] = i
			fn.Functions = append(fn.Functions, profile.FunctionCalls{Name: sym.Name, Module: sym.Module, Count: h.Count})
		}
		fn.Functions[i].Latency = &h
	}
	var missed []uint64
	if err := s.maps.Maps["missed"].Lookup(uint32(0), &missed); err != nil {
		return nil, fmt.Errorf("reading the missed calls: %w", err)
	}
	fn.Missed = sum(missed)
	for _, prog := range s.timedProgs {
		fn.Missed += recursionMisses(prog)
	}
	if fn.Functions == nil {
		fn.Functions = []profile.FunctionCalls{}
	}
	fn.NotAttached = append([]profile.FunctionError(nil), s.fn.NotAttached...)
	fn.Sort()
	return &fn, nil
}

// recursionMisses is how many times the kernel did not run prog: a run
// of it was in progress on that CPU (0 before Linux 5.12, which did not
// count them).
func recursionMisses(prog *ebpf.Program) uint64 {
	st, err := prog.Stats()
	if err != nil {
		return 0
	}
	return st.RecursionMisses
}

func sum(perCPU []uint64) uint64 {
	var n uint64
	for _, v := range perCPU {
		n += v
	}
	return n
}

// Close detaches the programs and frees the maps.
func (s *Source) Close() error {
	s.closeProbes()
	if s.maps != nil {
		s.maps.Close()
		s.maps = nil
	}
	return nil
}
