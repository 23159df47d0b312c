package ktrace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/fusescope/fusescope/internal/bpf"
	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/option"
)

// Before Linux 6.12 the kernel has no fuse tracepoints: the programs attach
// to the kernel functions that queue and end a request instead
// (internal/bpf/funcs.bpf.h), and --stages to the kernel's side of
// /dev/fuse.
const (
	// AttachFentry attaches to those functions through BPF trampolines,
	// the programs reading the request as tp_btf's do: it needs the
	// functions in the kernel's BTF (fuse's own, where it is a module).
	AttachFentry = "fentry"
	// AttachKprobe attaches kprobes to them, the programs reading the
	// request through bpf_probe_read_kernel: for kernels whose fuse has
	// no BTF (Debian's 5.10), with its types from fusebtf.
	AttachKprobe = "kprobe"
)

// sendFuncs are the kernel functions that queue a request for the daemon,
// the request their second argument, in the order they are looked for
// (available_filter_functions and BTF: a static function may be inlined,
// and names change):
//   - queue_request_and_unlock, 5.10 to 6.9: under the input queue's lock,
//     before the request is on its list; the callers set its id, the
//     function its length (which the program sums itself);
//   - fuse_dev_queue_req, 6.10 on: /dev/fuse's send_req, called through a
//     pointer, so never inlined; its entry has the length, and the id
//     only where the caller set it (a notification's reply): it sets the
//     id itself, even where the tracepoint reports it (6.18 on; keyed by
//     id, it counted no request in Debian's 7.3 guest).
//
// Where the id is set does not matter: the programs key every request by
// its address (key_by_address), as the stage programs find it.
var sendFuncs = []string{"queue_request_and_unlock", "fuse_dev_queue_req"}

// The request's end, and --stages' two functions on the kernel's side of
// /dev/fuse (the end stamps the reply's start), in every version fusescope
// knows.
const (
	endFunc   = "fuse_request_end"
	takenFunc = "fuse_copy_args"    // copying a request to the daemon
	writeFunc = "fuse_dev_do_write" // a reply begins
)

// stageFuncs are --stages' functions, by the program's name in
// funcs.bpf.h (stage_NAME_fentry, stage_NAME_kprobe).
var stageFuncs = []struct{ prog, fn string }{{"taken", takenFunc}, {"write", writeFunc}}

// funcMech is the request programs on kernel functions: which mechanism,
// which functions, and why.
type funcMech struct {
	attach string // AttachFentry or AttachKprobe
	forced bool   // --attach asked for it
	send   string // one of sendFuncs
	// stages: the kernel's side of /dev/fuse can be traced (both
	// functions), or why not.
	stages error
	// noCAS: the kernel's BPF has no compare-and-swap (before 5.12), so
	// the object compiled without it is loaded (fusereq_nocas.bpf.c).
	noCAS bool
	// types: fuse's types where the kernel's BTF has none (fusebtf).
	types *btf.Spec
	// why says which mechanism and why, in a few words (Probes).
	why string
}

// kernelFuncs is what the running kernel offers the function mechanism.
type kernelFuncs struct {
	release   string
	traceable map[string]bool // available_filter_functions: present and not inlined
	inBTF     map[string]bool // functions the kernel's BTF (fuse's included) describes
	ftrace    error           // nil: available_filter_functions lists functions
	kprobes   error           // nil: the kernel has kprobes
	fentry    error           // nil: it has what fentry needs (the attach is the last word)
}

// wantedFuncs are the functions looked up in the kernel.
func wantedFuncs() []string {
	names := []string{endFunc, takenFunc, writeFunc}
	return append(names, sendFuncs...)
}

// inventory reads what the kernel offers: its traceable functions, its
// BTF, its kprobes.
func inventory(tracefs string) kernelFuncs {
	k := kernelFuncs{release: kernel.Release(), traceable: map[string]bool{}, inBTF: map[string]bool{}}
	wanted := map[string]bool{}
	for _, n := range wantedFuncs() {
		wanted[n] = true
	}
	k.ftrace = k.readTraceable(filepath.Join(tracefs, "available_filter_functions"), wanted)
	_, pmuErr := os.Stat("/sys/bus/event_source/devices/kprobe")
	_, eventsErr := os.Stat(filepath.Join(tracefs, "kprobe_events"))
	if pmuErr != nil && eventsErr != nil {
		k.kprobes = errors.New("no kprobes: built without CONFIG_KPROBES")
	}
	specs, err := kernelBTF()
	if err != nil {
		k.fentry = err
		return k
	}
	for _, s := range specs {
		for name := range wanted {
			var fn *btf.Func
			if s.TypeByName(name, &fn) == nil {
				k.inBTF[name] = true
			}
		}
	}
	return k
}

// readTraceable notes which of the wanted functions the kernel can trace:
// those in available_filter_functions ("name" or "name [module]"), the
// functions ftrace (and so fentry) can attach to, which an inlined copy
// is not.
func (k kernelFuncs) readTraceable(path string, wanted map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, errors.Unwrap(err))
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		name, _, _ := strings.Cut(sc.Text(), " ")
		if wanted[name] {
			k.traceable[name] = true
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", path, errors.Unwrap(err))
	}
	if n == 0 {
		return fmt.Errorf("%s lists none", path)
	}
	return nil
}

// kernelBTF is the kernel's BTF and fuse's, where fuse is a module with
// its own.
func kernelBTF() ([]*btf.Spec, error) {
	vmlinux, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, fmt.Errorf("no kernel BTF (/sys/kernel/btf/vmlinux): built without CONFIG_DEBUG_INFO_BTF")
	}
	specs := []*btf.Spec{vmlinux}
	if mod, err := btf.LoadKernelModuleSpec("fuse"); err == nil {
		specs = append(specs, mod)
	}
	return specs, nil
}

// requestEvents is what the request programs attach to: the fuse
// tracepoints (funcs nil), or the kernel's functions where the kernel has
// no tracepoints (before 6.12) or --attach asks for fentry or kprobes.
func requestEvents(opts Options, tracefs string) (*funcMech, Tracepoints, error) {
	haveTP := hasEvent(tracefs, "fuse", "fuse_request_send")
	switch opts.Attach {
	case AttachFentry, AttachKprobe:
	case AttachBTF, AttachTracepoint:
		if !haveTP && hasFuse() {
			return nil, Tracepoints{}, option.Errorf("kernel %s has no fuse tracepoints (Linux 6.12) for {attach} %s: leave out {attach}, and fusescope traces the kernel's fuse functions instead", kernel.Release(), opts.Attach)
		}
		fallthrough
	default:
		if haveTP && (opts.Attach == "" || opts.Attach == AttachAuto) && opts.Stages && !opts.Calls && opts.StageCost == StagesMeasured &&
			!hasEvent(tracefs, "fuse", "fuse_request_sent") {
			if m := stagesOnFentry(tracefs); m != nil {
				return m, m.events(), nil
			}
		}
		if haveTP || !hasFuse() {
			tps, err := CheckTracepoints(tracefs, kernel.Release())
			return nil, tps, err
		}
	}
	m, err := inventory(tracefs).plan(opts.Attach)
	if err != nil {
		return nil, Tracepoints{}, err
	}
	if opts.Calls {
		return nil, Tracepoints{}, option.Errorf("kernel %s: {calls} needs the fuse tracepoints (Linux 6.12), and the trace is on %s here; leave out {calls} and the rest of the trace works", kernel.Release(), m.attach)
	}
	return m, m.events(), nil
}

// stagesOnFentry is the mechanism for --stages on a kernel with the
// tracepoints, where fentry reaches the kernel's side of /dev/fuse: the
// split there costs half the system-call side's programs per request in
// the 6.12 guest (docs/performance.md), and needs fentry's send and end.
// Not where the kernel has fuse_request_sent (7.3), which ends the queue
// stage with no program on the daemons' reads: the system-call side costs
// the same there (within 4% in the 7.3 guest), and sees the requests of
// FUSE over io_uring taken, which the kernel's side of /dev/fuse does not.
// nil where fentry cannot: the tracepoints and the system-call side then.
func stagesOnFentry(tracefs string) *funcMech {
	m, err := inventory(tracefs).plan(AttachAuto)
	if err != nil || m.attach != AttachFentry || m.stages != nil || m.probeFentry() != nil {
		return nil
	}
	m.forced = true // no kprobe fallback: the tracepoints are cheaper
	m.why = "--stages times the kernel's side of /dev/fuse, which fentry reaches: half the cost of the daemons' system calls"
	return m
}

// hasFuse says whether fuse is in the kernel (built in, or its module
// loaded): without it there are no functions to look for, and the
// tracepoints' check says so.
func hasFuse() bool {
	_, err := os.Stat("/sys/fs/fuse")
	return err == nil
}

// plan picks the mechanism and the functions for attach (auto: fentry,
// else kprobes), or says in one line why the kernel can do neither.
func (k kernelFuncs) plan(attach string) (*funcMech, error) {
	m := &funcMech{forced: attach == AttachFentry || attach == AttachKprobe}
	refuse := func(why string) error {
		if m.forced {
			return option.Errorf("kernel %s %s, which {attach} %s needs: leave out {attach} %s", k.release, why, attach, attach)
		}
		return fmt.Errorf("kernel %s has no fuse tracepoints (Linux 6.12), and %s to trace its fuse functions instead: boot Linux 6.12 or later", k.release, why)
	}
	if k.ftrace != nil {
		return nil, refuse(fmt.Sprintf("cannot trace its functions (%v)", k.ftrace))
	}
	for _, f := range sendFuncs {
		if m.send == "" && k.traceable[f] {
			m.send = f
		}
	}
	switch {
	case m.send == "":
		return nil, refuse(fmt.Sprintf("can trace none of the functions that queue a request (%s: inlined, or renamed)", strings.Join(sendFuncs, ", ")))
	case !k.traceable[endFunc]:
		return nil, refuse(fmt.Sprintf("cannot trace %s (inlined, or renamed)", endFunc))
	}
	for _, f := range stageFuncs {
		if !k.traceable[f.fn] {
			m.stages = fmt.Errorf("%s cannot be traced (inlined, or renamed)", f.fn)
		}
	}
	if k.fentry == nil && (!k.inBTF[m.send] || !k.inBTF[endFunc]) {
		k.fentry = fmt.Errorf("%s and %s are not in its BTF: fuse without BTF", m.send, endFunc)
	}
	switch {
	case attach == AttachFentry && k.fentry != nil:
		return nil, refuse(fmt.Sprintf("has no fentry for %s (%v)", m.send, k.fentry))
	case attach == AttachKprobe && k.kprobes != nil:
		return nil, refuse(fmt.Sprintf("has no kprobes (%v)", k.kprobes))
	case attach == AttachFentry || attach == AttachKprobe:
		m.attach, m.why = attach, "as --attach asked"
	case k.fentry == nil:
		m.attach, m.why = AttachFentry, "this kernel has no fuse tracepoints (Linux 6.12)"
	case k.kprobes == nil:
		m.attach, m.why = AttachKprobe, fmt.Sprintf("this kernel has no fuse tracepoints (Linux 6.12) and no fentry for them (%v)", k.fentry)
	default:
		return nil, refuse(fmt.Sprintf("neither fentry (%v) nor kprobes (%v)", k.fentry, k.kprobes))
	}
	return m, nil
}

// events is what the mechanism gives the rest of the tracer in place of
// the tracepoints' facts. The programs key requests by address and the
// stage programs stamp their slots (loadRequests), so nothing needs the
// id at the send, which SendHasID guards elsewhere (the note on 6.12 to
// 6.17's tracepoints, the table of stamps by id).
func (m *funcMech) events() Tracepoints { return Tracepoints{SendHasID: true} }

// loadSpec reads the object to load: the one without compare-and-swap on
// a kernel without it.
func (m *funcMech) loadSpec() (*ebpf.CollectionSpec, error) {
	m.noCAS = !haveCompareAndSwap()
	if m.noCAS {
		return bpf.LoadFuseReqNoCAS()
	}
	return bpf.LoadFuseReq()
}

// options gives the loader fuse's types where the kernel's BTF has none.
func (m *funcMech) options(repl map[string]*ebpf.Map) *ebpf.CollectionOptions {
	opts := &ebpf.CollectionOptions{MapReplacements: repl}
	if m.types != nil {
		opts.Programs.ExtraRelocationTargets = []*btf.Spec{m.types}
	}
	return opts
}

// funcObjects is the pair of request programs on kernel functions.
type funcObjects struct {
	bpf.FuseReqMaps
	Send  *ebpf.Program  `ebpf:"funcs_send"`
	End   *ebpf.Program  `ebpf:"funcs_end"`
	Epoch *ebpf.Variable `ebpf:"interval_epoch"`
}

// loadRequests loads the maps and the request programs, twin the suffix
// of the ones the options need (_slow, _stages, _files). Auto falls back
// from fentry to kprobes where fentry does not attach.
func (m *funcMech) loadRequests(t *Tracer, spec *ebpf.CollectionSpec, consts map[string]any, twin string, files bool) error {
	// Found by address, stamped in their slots (funcs.bpf.h).
	consts["key_by_address"] = uint8(1)
	if strings.Contains(twin, "_stages") {
		consts["stamps_in_slot"] = uint8(1)
	}
	if m.attach == AttachKprobe {
		if err := m.needTypes(); err != nil {
			return err
		}
	}
	err := m.loadPair(t, spec, consts, twin, files)
	if err != nil && m.attach == AttachFentry && !m.forced {
		m.attach = AttachKprobe
		m.why = fmt.Sprintf("this kernel has no fuse tracepoints (Linux 6.12), and fentry did not load (%v)", err)
		if err = m.needTypes(); err == nil {
			err = m.loadPair(t, spec, consts, twin, files)
		}
	}
	if err != nil {
		return err
	}
	t.attach, t.epoch, t.funcs = m.attach, 1, m
	return nil
}

func (m *funcMech) loadPair(t *Tracer, spec *ebpf.CollectionSpec, consts map[string]any, twin string, files bool) error {
	for name, v := range consts {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("setting %s: %w", name, err)
		}
	}
	end := "fuse_end" + twin
	if files {
		end += "_files"
	}
	s := spec.Copy()
	send := s.Programs["fuse_send"+twin+"_"+m.attach].Copy()
	send.AttachTo = m.send
	var endProg *ebpf.ProgramSpec
	if m.attach == AttachFentry {
		if err := m.probeFentry(); err != nil {
			return err
		}
		// tp_btf/fuse_request_end's programs, at the function's entry,
		// but under --stages, which stamps the reply first.
		if endProg = s.Programs[end+"_fentry"]; endProg == nil {
			endProg = s.Programs["fuse_end_btf"+strings.TrimPrefix(end, "fuse_end")].Copy()
			endProg.AttachType, endProg.AttachTo = ebpf.AttachTraceFEntry, endFunc
		}
	} else {
		endProg = s.Programs[end+"_kprobe"].Copy()
	}
	s.Programs["funcs_send"], s.Programs["funcs_end"] = send, endProg
	var o funcObjects
	if err := s.LoadAndAssign(&o, m.options(nil)); err != nil {
		return kernelLacks(err, "the FUSE tracer ("+m.attach+" on "+m.send+" and "+endFunc+")")
	}
	t.maps, t.send, t.end, t.epochVar = o.FuseReqMaps, o.Send, o.End, o.Epoch
	return nil
}

// probeFentry attaches a program that does nothing at the send function's
// entry: a kernel may describe its functions in BTF and still refuse BPF
// trampolines.
func (m *funcMech) probeFentry() error {
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.Tracing, AttachType: ebpf.AttachTraceFEntry, AttachTo: m.send, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		return fmt.Errorf("kernel %s cannot load fentry programs on %s: %w", kernel.Release(), m.send, err)
	}
	defer p.Close()
	l, err := link.AttachTracing(link.TracingOptions{Program: p})
	if err != nil {
		return fmt.Errorf("kernel %s cannot attach fentry programs to %s: %w", kernel.Release(), m.send, err)
	}
	return l.Close()
}

// needTypes finds fuse's types for the programs' CO-RE relocations where
// the kernel's BTF has none: fuse a module built without BTF.
func (m *funcMech) needTypes() error {
	if m.types != nil || haveFuseBTF() {
		return nil
	}
	id, err := fuseBuildID()
	if err != nil {
		return fmt.Errorf("kernel %s's fuse module has no BTF (/sys/kernel/btf/fuse), and its build id could not be read (%v): fusescope cannot read its requests", kernel.Release(), err)
	}
	types, err := embeddedFuseTypes(id)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("kernel %s's fuse module has no BTF (/sys/kernel/btf/fuse), and fusescope carries no types for its build (%s): generate them with scripts/fuse-btf.sh from the kernel's -dbg package (docs/kernels.md)", kernel.Release(), id)
	}
	if err != nil {
		return err
	}
	m.types = types
	return nil
}

// haveFuseBTF says whether the kernel's BTF describes fuse's requests:
// fuse built in, or a module with its own BTF.
func haveFuseBTF() bool { return haveFuseBTFType("fuse_req") }

// haveFuseBTFType says whether the kernel's or fuse's BTF has the struct
// name: fuse_ring_ent where fuse was built with FUSE over io_uring.
func haveFuseBTFType(name string) bool {
	specs, err := kernelBTF()
	if err != nil {
		return false
	}
	for _, s := range specs {
		var st *btf.Struct
		if s.TypeByName(name, &st) == nil {
			return true
		}
	}
	return false
}

// fusebtf holds fuse's types for fuse modules built without BTF, each the
// BTF pahole generated from the module's debug information (the
// distribution's -dbg package), named by the module's GNU build id:
// scripts/fuse-btf.sh makes them (docs/kernels.md). A build id names one
// build exactly, so the types are never another build's.
//
//go:embed fusebtf
var fusebtf embed.FS

// embeddedFuseTypes is fuse's BTF for the module build id.
func embeddedFuseTypes(id string) (*btf.Spec, error) {
	f, err := fusebtf.Open("fusebtf/" + id + ".btf.gz")
	if err != nil {
		return nil, os.ErrNotExist
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("internal error: fusebtf/%s.btf.gz: %w", id, err)
	}
	raw, err := io.ReadAll(z)
	if err != nil {
		return nil, fmt.Errorf("internal error: fusebtf/%s.btf.gz: %w", id, err)
	}
	spec, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("internal error: fusebtf/%s.btf.gz: %w", id, err)
	}
	return spec, nil
}

// fuseModuleNotes is where the kernel shows the fuse module's notes.
var fuseModuleNotes = "/sys/module/fuse/notes/.note.gnu.build-id"

// fuseBuildID is the loaded fuse module's GNU build id, in hex.
func fuseBuildID() (string, error) {
	b, err := os.ReadFile(fuseModuleNotes)
	if err != nil {
		return "", err
	}
	return parseBuildIDNote(b)
}

// parseBuildIDNote reads an ELF note section holding NT_GNU_BUILD_ID.
func parseBuildIDNote(b []byte) (string, error) {
	const ntGNUBuildID = 3
	for len(b) >= 12 {
		namesz := binary.LittleEndian.Uint32(b[0:])
		descsz := binary.LittleEndian.Uint32(b[4:])
		typ := binary.LittleEndian.Uint32(b[8:])
		nameEnd := 12 + (uint64(namesz)+3)&^3
		descEnd := nameEnd + uint64(descsz)
		if descEnd > uint64(len(b)) {
			break
		}
		if typ == ntGNUBuildID && namesz == 4 && string(b[12:16]) == "GNU\x00" && descsz > 0 {
			return hex.EncodeToString(b[nameEnd:descEnd]), nil
		}
		b = b[min((descEnd+3)&^3, uint64(len(b))):]
	}
	return "", errors.New("no GNU build id note")
}

// haveCompareAndSwap says whether the kernel's BPF has compare-and-swap
// (Linux 5.12): a program with one on its stack loads.
func haveCompareAndSwap() bool {
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type: ebpf.SocketFilter, License: "GPL",
		Instructions: asm.Instructions{
			asm.StoreImm(asm.RFP, -8, 0, asm.DWord),
			asm.Mov.Imm(asm.R0, 0),
			asm.Mov.Imm(asm.R1, 1),
			asm.CmpXchg.Mem(asm.RFP, asm.R1, asm.DWord, -8),
			asm.Mov.Imm(asm.R0, 0),
			asm.Return(),
		},
	})
	if err != nil {
		return false
	}
	p.Close()
	return true
}

// attachEvent attaches the send or end program (Tracer.Resume names them
// by the tracepoints they stand in for).
func (m *funcMech) attachEvent(event string, prog *ebpf.Program) (link.Link, error) {
	fn := endFunc
	if event == "fuse_request_send" {
		fn = m.send
	}
	return m.attachTo(fn, prog)
}

// attachTo attaches one program to fn's entry.
func (m *funcMech) attachTo(fn string, prog *ebpf.Program) (link.Link, error) {
	var l link.Link
	var err error
	if m.attach == AttachFentry {
		l, err = link.AttachTracing(link.TracingOptions{Program: prog})
	} else {
		l, err = link.Kprobe(fn, prog, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("attaching %s to %s: %w", m.attach, fn, err)
	}
	return l, nil
}

// note is the line Probes adds: the mechanism, the functions, why.
func (m *funcMech) note() string {
	return fmt.Sprintf("%s on %s and %s: %s", m.attach, m.send, endFunc, m.why)
}

// kernelStages is --stages from the kernel's side of /dev/fuse
// (funcs.bpf.h): a program on each of stageFuncs.
type kernelStages struct {
	m     *funcMech
	progs []*ebpf.Program // in stageFuncs' order
}

// loadStages loads them over the request programs' maps.
func (m *funcMech) loadStages(t *Tracer, spec *ebpf.CollectionSpec) (*kernelStages, error) {
	if m.stages != nil {
		return nil, option.Errorf("kernel %s cannot split requests into stages: %v; leave out {stages} and the rest of the trace works", kernel.Release(), m.stages)
	}
	s := spec.Copy()
	progs := map[string]*ebpf.ProgramSpec{}
	for _, f := range stageFuncs {
		p := s.Programs["stage_"+f.prog+"_"+m.attach].Copy()
		p.AttachTo = f.fn
		progs[f.prog] = p
	}
	s.Programs = progs
	coll, err := ebpf.NewCollectionWithOptions(s, *m.options(map[string]*ebpf.Map{
		"inflight": t.maps.Inflight, "drops": t.maps.Drops, "stage_stamps": t.maps.StageStamps,
		"passthrough_opens": t.maps.PassthroughOpens, "reply_starts": t.maps.ReplyStarts,
	}))
	if err != nil {
		return nil, kernelLacks(err, "{stages} ("+m.attach+" on the kernel's side of /dev/fuse)")
	}
	defer coll.Close()
	k := &kernelStages{m: m}
	for _, f := range stageFuncs {
		k.progs = append(k.progs, coll.DetachProgram(f.prog))
	}
	return k, nil
}

func (k *kernelStages) attach() ([]link.Link, error) {
	var links []link.Link
	for i, f := range stageFuncs {
		l, err := k.m.attachTo(f.fn, k.progs[i])
		if err != nil {
			closeLinks(links)
			return nil, err
		}
		links = append(links, l)
	}
	return links, nil
}

func (k *kernelStages) close() error {
	var errs []error
	for _, p := range k.progs {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// programs are the stage programs, by what they run on (ProgramStats).
func (k *kernelStages) programs() map[string]*ebpf.Program {
	out := map[string]*ebpf.Program{}
	for i, f := range stageFuncs {
		out["stage:"+f.fn] = k.progs[i]
	}
	return out
}

// loadNames loads the program that learns file names (names.bpf.h) at
// fuse_request_end: tp_btf's own at the function's entry, or the kprobe's.
func (m *funcMech) loadNames(t *Tracer, spec *ebpf.CollectionSpec) (*ebpf.Program, error) {
	s := spec.Copy()
	var p *ebpf.ProgramSpec
	if m.attach == AttachFentry {
		p = s.Programs["fuse_names"].Copy()
		p.AttachType, p.AttachTo = ebpf.AttachTraceFEntry, endFunc
	} else {
		p = s.Programs["fuse_names_kprobe"].Copy()
	}
	s.Programs = map[string]*ebpf.ProgramSpec{"names": p}
	var o struct {
		Prog *ebpf.Program `ebpf:"names"`
	}
	repl := map[string]*ebpf.Map{"filter_conns": t.maps.FilterConns, "names_sent": t.maps.NamesSent, "node_names": t.maps.NodeNames}
	if err := s.LoadAndAssign(&o, m.options(repl)); err != nil {
		return nil, kernelLacks(err, "the program that names files ({files}, {slower})")
	}
	return o.Prog, nil
}
