package kfunc

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/fusescope/fusescope/internal/profile"
)

// indexMarker is the immediate kfunc.bpf.c's func_index() loads: each
// copy of a program loaded for one function has it replaced by the
// function's index (KFUNC_INDEX_MARKER in kfunc.h).
const indexMarker = 0x6b66756e63696478

// withIndex is a copy of a program patched for function i: its marker
// replaced by i.
func withIndex(p *ebpf.ProgramSpec, i int) (*ebpf.ProgramSpec, error) {
	c := p.Copy()
	n := 0
	for j := range c.Instructions {
		ins := &c.Instructions[j]
		if ins.OpCode.IsDWordLoad() && ins.Src == asm.R0 && ins.Constant == indexMarker {
			ins.Constant = int64(i)
			n++
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("internal error: program %s has no function index to patch", p.Name)
	}
	return c, nil
}

// probe is one program to load for one function and how to attach it.
// The probes of one group (a timed function's entry and return) stand or
// fall together: an entry without its return would fill the table of
// calls in progress.
type probe struct {
	spec   *ebpf.ProgramSpec
	sym    Symbol
	group  int
	attach func(*ebpf.Program) (link.Link, error)
	// kept is called with the program once it is attached for good.
	kept func(*ebpf.Program)
}

// loadAndAttach loads each probe's program against the shared maps (the
// verifier runs on every CPU) and attaches it. A function the kernel
// will not probe is noted in NotAttached, and the run goes on without it.
func (s *Source) loadAndAttach(probes []probe, cache *btf.Cache) {
	type result struct {
		prog *ebpf.Program
		l    link.Link
		err  error
	}
	res := make([]result, len(probes))
	work := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range work {
				p := probes[i]
				coll, err := ebpf.NewCollectionWithOptions(specFor(p.spec, s.mapSpecs), ebpf.CollectionOptions{MapReplacements: s.maps.Maps, Cache: cache})
				if err != nil {
					res[i].err = err
					continue
				}
				prog := coll.DetachProgram(p.spec.Name)
				coll.Close()
				l, err := p.attach(prog)
				if err != nil {
					prog.Close()
					res[i].err = err
					continue
				}
				res[i] = result{prog: prog, l: l}
			}
		})
	}
	for i := range probes {
		work <- i
	}
	close(work)
	wg.Wait()
	failed := map[int]bool{}
	for i, r := range res {
		if r.err != nil {
			s.notAttached(probes[i].sym, r.err)
			failed[probes[i].group] = true
		}
	}
	for i, r := range res {
		switch {
		case r.err != nil:
		case failed[probes[i].group]:
			r.l.Close()
			r.prog.Close()
		default:
			s.progs = append(s.progs, r.prog)
			s.links = append(s.links, r.l)
			s.attached(probes[i].sym)
			if probes[i].kept != nil {
				probes[i].kept(r.prog)
			}
		}
	}
}

// attached notes a function probed.
func (s *Source) attached(sym Symbol) {
	if s.probed == nil {
		s.probed = map[Symbol]bool{}
	}
	s.probed[sym] = true
	s.fn.Attached = len(s.probed)
}

// notAttached notes a function the kernel would not probe, and why.
func (s *Source) notAttached(sym Symbol, err error) { s.skip(sym, probeError(err)) }

// skip notes a function left out, once.
func (s *Source) skip(sym Symbol, why string) {
	for _, f := range s.fn.NotAttached {
		if f.Name == sym.String() {
			return
		}
	}
	s.fn.NotAttached = append(s.fn.NotAttached, profile.FunctionError{Name: sym.String(), Error: why})
}

// specFor is a collection of one program over the run's maps.
func specFor(p *ebpf.ProgramSpec, maps map[string]*ebpf.MapSpec) *ebpf.CollectionSpec {
	return &ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{p.Name: p}, Maps: maps}
}

// probeError is why the kernel would not probe a function, without the
// library's wrapping where the errno says it.
func probeError(err error) string {
	var ve *ebpf.VerifierError
	switch {
	case errors.As(err, &ve):
		return "the verifier rejected its program"
	case errors.Is(err, os.ErrNotExist):
		return "not found"
	case errors.Is(err, ebpf.ErrNotSupported):
		return "the kernel will not probe it"
	}
	return err.Error()
}

// attachFentry loads a counting fentry program for each counted function
// and an fentry/fexit pair for each timed one.
func (s *Source) attachFentry(spec *ebpf.CollectionSpec, cache *btf.Cache) error {
	s.fn.Mechanism = profile.MechanismFentry
	var probes []probe
	s.countProgs = map[int]*ebpf.Program{}
	add := func(name string, i int, sym Symbol, attachType ebpf.AttachType, group int, kept func(*ebpf.Program)) error {
		p, err := withIndex(spec.Programs[name], i)
		if err != nil {
			return err
		}
		p.AttachTo, p.AttachType = sym.Name, attachType
		probes = append(probes, probe{spec: p, sym: sym, group: group, kept: kept, attach: func(prog *ebpf.Program) (link.Link, error) {
			return link.AttachTracing(link.TracingOptions{Program: prog})
		}})
		return nil
	}
	for i, sym := range s.counted {
		if err := add("kfunc_count_fentry", i, sym, ebpf.AttachTraceFEntry, len(probes), func(p *ebpf.Program) { s.countProgs[i] = p }); err != nil {
			return err
		}
	}
	timed := func(p *ebpf.Program) { s.timedProgs = append(s.timedProgs, p) }
	for j, sym := range s.timed {
		group := len(probes)
		if err := add("kfunc_enter_fentry", j, sym, ebpf.AttachTraceFEntry, group, timed); err != nil {
			return err
		}
		if err := add("kfunc_exit_fexit", j, sym, ebpf.AttachTraceFExit, group, timed); err != nil {
			return err
		}
	}
	s.loadAndAttach(probes, cache)
	if s.fn.Attached == 0 && len(s.fn.NotAttached) > 0 {
		return errors.New(s.fn.NotAttached[0].Error)
	}
	return nil
}

// attachKprobes attaches the counting program to every counted function,
// through one kprobe.multi link where the kernel has them, else a kprobe
// each, and a kprobe/kretprobe pair to each timed function.
func (s *Source) attachKprobes(spec *ebpf.CollectionSpec, cache *btf.Cache) error {
	s.fn.Mechanism = profile.MechanismKprobe
	if len(s.counted) > 0 {
		want := map[Symbol]bool{}
		index := map[Symbol]int{}
		for i, sym := range s.counted {
			want[sym], index[sym] = true, i
		}
		f, err := os.Open("/proc/kallsyms")
		if err != nil {
			return fmt.Errorf("kprobes count by address, which /proc/kallsyms names: %v", withoutPath(err))
		}
		addrs, err := ParseKallsyms(f, want)
		f.Close()
		if err != nil {
			return err
		}
		s.ips = newAddrIndex(addrs, index)
		if err := s.attachCounter(spec, cache); err != nil {
			return err
		}
	}
	var probes []probe
	for j, sym := range s.timed {
		group := len(probes)
		for _, p := range []struct {
			name string
			ret  bool
		}{{"kfunc_enter_kprobe", false}, {"kfunc_exit_kretprobe", true}} {
			ps, err := withIndex(spec.Programs[p.name], j)
			if err != nil {
				return err
			}
			name, ret := sym.Name, p.ret
			probes = append(probes, probe{spec: ps, sym: sym, group: group, attach: func(prog *ebpf.Program) (link.Link, error) {
				if ret {
					return link.Kretprobe(name, prog, nil)
				}
				return link.Kprobe(name, prog, nil)
			}})
		}
	}
	s.loadAndAttach(probes, cache)
	return nil
}

// attachCounter attaches the kprobe counter to every counted function:
// one kprobe.multi link, or a kprobe link each.
func (s *Source) attachCounter(spec *ebpf.CollectionSpec, cache *btf.Cache) error {
	names := make([]string, len(s.counted))
	for i, sym := range s.counted {
		names[i] = sym.Name
	}
	if features.HaveBPFLinkKprobeMulti() == nil {
		p := spec.Programs["kfunc_count_kprobe"].Copy()
		p.AttachType = ebpf.AttachTraceKprobeMulti
		coll, err := ebpf.NewCollectionWithOptions(specFor(p, s.mapSpecs), ebpf.CollectionOptions{MapReplacements: s.maps.Maps, Cache: cache})
		if err != nil {
			return fmt.Errorf("loading the kprobe counter: %w", err)
		}
		prog := coll.DetachProgram(p.Name)
		coll.Close()
		l, err := link.KprobeMulti(prog, link.KprobeMultiOptions{Symbols: unique(names)})
		if err == nil {
			s.progs, s.links = append(s.progs, prog), append(s.links, l)
			s.fn.Mechanism = profile.MechanismKprobeMulti
			for _, sym := range s.counted {
				s.attached(sym)
			}
			return nil
		}
		// One function it will not hook (a name listed twice, say)
		// fails the whole link: a link each, and the failures named.
		prog.Close()
	}
	p := spec.Programs["kfunc_count_kprobe"]
	coll, err := ebpf.NewCollectionWithOptions(specFor(p, s.mapSpecs), ebpf.CollectionOptions{MapReplacements: s.maps.Maps, Cache: cache})
	if err != nil {
		return fmt.Errorf("loading the kprobe counter: %w", err)
	}
	prog := coll.DetachProgram(p.Name)
	coll.Close()
	s.progs = append(s.progs, prog)
	for _, sym := range s.counted {
		l, err := link.Kprobe(sym.Name, prog, nil)
		if err != nil {
			s.notAttached(sym, err)
			continue
		}
		s.links = append(s.links, l)
		s.attached(sym)
	}
	return nil
}

func unique(names []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// closeProbes detaches every link (in parallel: a trampoline's detach
// waits for a grace period) and frees the programs.
func (s *Source) closeProbes() {
	var wg sync.WaitGroup
	work := make(chan link.Link)
	for range min(len(s.links), 16) {
		wg.Go(func() {
			for l := range work {
				l.Close()
			}
		})
	}
	for _, l := range s.links {
		work <- l
	}
	close(work)
	wg.Wait()
	for _, p := range s.progs {
		p.Close()
	}
	s.links, s.progs, s.ips, s.probed, s.countProgs, s.timedProgs = nil, nil, nil, nil, nil, nil
	s.fn.NotAttached, s.fn.Attached = nil, 0
}
