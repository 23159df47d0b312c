package ktrace

import (
	"errors"
	"fmt"
	mathbits "math/bits"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"github.com/fusescope/fusescope/internal/bpf"
	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/sysevent"
)

// The live system-call source (fusescope syscalls -- CMD, -p PID). The BPF
// side (internal/bpf/systrace.bpf.c) counts calls per thread and system call
// and fd I/O per process and fd in kernel maps; only the calls that create,
// name or end fds, processes and programs, and calls longer than MinWait,
// travel to user space whole. This side reads them and hands them on as
// typed events (internal/sysevent): the interpretation (fd tables, names
// of the counted I/O, the analyzers an strace log feeds too) is the
// system-call packages', which ktrace does not import.

// Sizes of internal/bpf/systrace.h (TestSysTraceSizesMatchHeader checks).
const (
	sysMaxNR      = 512
	sysNRWords    = sysMaxNR / 64
	sysMaxTSlots  = 256
	sysMaxPSlots  = 64
	sysMaxFDs     = 256
	sysIOKinds    = 22
	sysMaxBins    = 4096
	sysCats       = 8
	sysErrnoSlots = 160
	rareIfDup     = 2 // RARE_IF_DUP: fcntl, sent whole when it duplicates an fd
	rareIfCounted = 3 // RARE_IF_COUNTED: close, sent whole when its fd has counters to move
	rareIfMissing = 4 // RARE_IF_MISSING: a path lookup, sent whole when it failed with ENOENT
)

// Event kinds of enum sys_event_kind.
const (
	sevSyscall = 1
	sevFork    = 2
	sevExec    = 3
	sevExit    = 4
	sevAdopt   = 5
	sevFDIO    = 6
	sevCalls   = 7

	handedTSlot = 1 // HANDED_TSLOT: an exit handed over its thread's per-call counters
	handedPSlot = 2 // HANDED_PSLOT: and its process's per-fd counters
)

// sysDropNames name enum sys_drop_reason's counters in reports.
var sysDropNames = []string{
	"ring buffer full (calls counted, not kept whole)",
	"threads beyond 255 alive at once (their calls are counted, but not per process)",
	"I/O on fds >= 256 or in processes beyond 64 alive at once (counted per call, not per fd)",
	"system call numbers >= 512 (not counted)",
	"task state not created (not traced)",
	"calls after the last timeline bin (counted in it)",
}

// The calls counted per fd and the transfer calls' second fds, in the
// order of the fd_io counters, and the calls that return a new fd (its
// counters are flushed to the fd's old name first, in case it was closed
// without a close call: exec, close_range): the interpretation's tables.
var (
	ioKinds    = sysevent.IOKinds
	peerKinds  = sysevent.PeerKinds
	peerArgs   = sysevent.PeerArgs
	fdCreators = sysevent.FDCreators
)

// rareCalls are always sent whole: they change what fds and processes are.
var rareCalls = union(fdCreators, strset("close", "dup2", "dup3", "socketpair", "connect", "bind", "pipe", "pipe2",
	"execve", "execveat", "clone", "clone3", "fork", "vfork", "chdir", "fchdir"))

// Where the BPF side finds a call's strings (1 + argument index).
var (
	pathArgs = map[string]uint8{"open": 1, "openat": 2, "openat2": 2, "creat": 1, "chdir": 1,
		"stat": 1, "lstat": 1, "newfstatat": 2, "statx": 2, "access": 1, "faccessat": 2, "faccessat2": 2,
		"readlink": 1, "readlinkat": 2, "execve": 1, "execveat": 2}
	// missingCalls look a path up: their failures with ENOENT are sent
	// whole, with the path (a search path's probes).
	missingCalls = strset("stat", "lstat", "newfstatat", "statx", "access", "faccessat", "faccessat2", "readlink", "readlinkat")
	addrArgs     = map[string]uint8{"connect": 2, "bind": 2, "accept": 2, "accept4": 2, "sendto": 5}
	// 8 bytes behind a pointer: the two new fds of pipe and socketpair,
	// the first struct pollfd of poll and ppoll (the fd it waits on).
	word8Args = map[string]uint8{"pipe": 1, "pipe2": 1, "socketpair": 4, "poll": 1, "ppoll": 1}
	flushArgs = map[string]uint8{"close": 1, "dup2": 2, "dup3": 2}
)

const flushRet = 7 // flush_arg: the fd the call returns

func strset(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

func union(a, b map[string]bool) map[string]bool {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}

// SyscallOptions select what the live source traces.
type SyscallOptions struct {
	// PID traces a running process: each of its threads from its next
	// call, and the processes it creates from then on.
	PID int
	// GateParent traces the command a process starts once the programs
	// are attached: the first exec by a child of GateParent, and what it
	// does from there on.
	GateParent int
	// MinWait: calls at least this long are kept whole (they make the
	// waits list); 0 means DefaultMinWait.
	MinWait time.Duration
	// TimelineS is the timeline's bin width in seconds; 0: no timeline.
	TimelineS float64
	// Since and Until bound, after the run's origin (the attach, or the
	// command's release: SetOrigin), the entry of the calls the kernel
	// counts (0: no bound); calls sent whole come all the same, for the fd
	// tables, and the caller keeps those in the window.
	Since, Until time.Duration
	// EmptyPrograms attaches programs that return at once: benchmarks
	// measure what attaching alone costs with it.
	EmptyPrograms bool
	// Category names a system call's category (one of
	// profile.SyscallCategories), which the kernel side counts the
	// timeline by.
	Category func(name string) string
}

// DefaultMinWait is the duration from which a call is kept whole.
const DefaultMinWait = time.Millisecond

// SyscallTracer is a loaded and attached live source: one run.
type SyscallTracer struct {
	*sysObjects
	owner  *SyscallPrograms // programs loaded once for many runs; nil: this run's own
	links  []link.Link
	opts   SyscallOptions
	t0     uint64       // CLOCK_MONOTONIC ns of the run's origin: the attach, or the command's release (SetOrigin)
	clock  kernel.Clock // anchored at t0
	began  time.Time
	ended  time.Time
	root   atomic.Int64      // -p's process, or the command's once its exec was read
	exe    string            // -p: the program the process was running when tracing began
	tids   map[uint32]uint32 // tslot -> tid
	tgids  map[uint32]uint32 // tslot -> its process
	shared bool              // the last tslot took threads beyond sysMaxTSlots: its calls are no one thread's
	pslots map[uint32]uint32 // pslot -> tgid
	ev     sysevent.Event
	short  int           // events shorter than struct sys_event
	setup  time.Duration // loading and attaching
	live   liveCounts    // CountLive: counts that left the maps (top --syscalls)
	closed bool
	// alive: the threads the programs took up (forks, the command's exec,
	// -p's adoptions) that have not exited.
	alive    map[uint32]bool
	detached chan struct{} // closed once the programs are detached
}

// sysObjects are the live source's programs and maps with their readers.
type sysObjects struct {
	objs    bpf.SysTraceObjects
	rd      *ringbuf.Reader
	fdmem   *ebpf.Memory
	ncpu    int
	scratch []byte // eachStriped's copy of a counter array, kept from run to run
}

func (o *sysObjects) close() error {
	if o.rd != nil {
		o.rd.Close()
	}
	return o.objs.Close()
}

// StartSyscalls checks the kernel, loads the programs and attaches them:
// a run with programs of its own, freed by Close.
func StartSyscalls(opts SyscallOptions) (*SyscallTracer, error) {
	start := time.Now()
	o, err := loadSyscalls(opts)
	if err != nil {
		return nil, err
	}
	t, err := o.start(opts, start)
	if err != nil {
		o.close()
		return nil, err
	}
	return t, nil
}

// SyscallPrograms are the live source's programs loaded once, for one run
// after another (syscalls --serve): a run then only attaches them, which
// takes a millisecond where loading takes 40 (docs/performance.md).
type SyscallPrograms struct {
	mu      sync.Mutex
	o       *sysObjects // nil once closed
	busy    bool        // a run holds them
	ending  bool        // its Run has returned: the maps are being cleared
	cleared sync.Cond   // signalled when a run hands them back
	closing bool        // Close came during a run: its end frees them
}

// ErrBusy: the programs loaded once trace one run at a time.
var ErrBusy = errors.New("the pre-loaded programs are tracing another run")

// LoadSyscallPrograms loads the programs for runs to come; category is
// SyscallOptions.Category.
func LoadSyscallPrograms(category func(name string) string) (*SyscallPrograms, error) {
	o, err := loadSyscalls(SyscallOptions{Category: category})
	if err != nil {
		return nil, err
	}
	p := &SyscallPrograms{o: o}
	p.cleared.L = &p.mu
	return p, nil
}

// Start begins a run on the loaded programs (opts.Category and
// EmptyPrograms are the load's): ErrBusy while another one goes on. The
// run's Close hands the programs back, with their maps cleared.
func (p *SyscallPrograms) Start(opts SyscallOptions) (*SyscallTracer, error) {
	start := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	// A run that has ended is only clearing the maps (a few ms): the next
	// one waits for that rather than loading programs of its own.
	for p.busy && p.ending {
		p.cleared.Wait()
	}
	if p.o == nil || p.closing {
		return nil, fmt.Errorf("the pre-loaded programs were closed")
	}
	if p.busy {
		return nil, ErrBusy
	}
	t, err := p.o.start(opts, start)
	if err != nil {
		// Nothing ran: the maps are as they were.
		return nil, err
	}
	p.busy = true
	t.owner = p
	return t, nil
}

// Close frees the programs; a run still going on keeps them until its own
// Close.
func (p *SyscallPrograms) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.o == nil {
		return nil
	}
	if p.busy {
		p.closing = true
		return nil
	}
	err := p.o.close()
	p.o = nil
	return err
}

// ended marks the run's Run as returned: what is left of it is clearing.
func (p *SyscallPrograms) ended() {
	p.mu.Lock()
	p.ending = true
	p.mu.Unlock()
}

// release takes a run's programs back: the maps cleared for the next run,
// or freed when Close came during the run.
func (p *SyscallPrograms) release() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.cleared.Broadcast()
	p.busy, p.ending = false, false
	if p.closing {
		err := p.o.close()
		p.o = nil
		return err
	}
	if err := p.o.reset(); err != nil {
		// Counts of this run would leak into the next: never reuse them.
		p.o.close()
		p.o = nil
		return fmt.Errorf("clearing the programs' maps for the next run: %w", err)
	}
	return nil
}

// loadSyscalls checks the kernel and loads the programs, detached.
func loadSyscalls(opts SyscallOptions) (*sysObjects, error) {
	if runtime.GOARCH != "amd64" {
		return nil, fmt.Errorf("the live system-call source knows x86-64 system call numbers only (this is %s): analyse an strace log instead", runtime.GOARCH)
	}
	if opts.Category == nil {
		return nil, fmt.Errorf("internal error: SyscallOptions.Category is not set")
	}
	if err := CheckPrivileges(); err != nil {
		return nil, err
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return nil, fmt.Errorf("kernel %s has no BTF (/sys/kernel/btf/vmlinux), which the live source's tp_btf programs need: analyse an strace log instead", kernel.Release())
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raising RLIMIT_MEMLOCK: %w", err)
	}
	spec, err := bpf.LoadSysTrace()
	if err != nil {
		return nil, fmt.Errorf("reading the embedded BPF object: %w", err)
	}
	var rare, io, peerArg, peerKind, cat, path, addr, word8, flush [sysMaxNR]uint8
	catIndex := map[string]uint8{}
	for i, c := range profile.SyscallCategories {
		catIndex[c] = uint8(i)
	}
	ioIndex, peerIndex := map[string]uint8{}, map[string]uint8{}
	for i, n := range ioKinds {
		ioIndex[n] = uint8(i + 1)
	}
	for i, n := range peerKinds {
		peerIndex[n] = uint8(len(ioKinds) + i + 1)
	}
	for nr, name := range bpf.SyscallNames {
		if nr >= sysMaxNR {
			continue
		}
		if rareCalls[name] {
			rare[nr] = 1
		}
		io[nr] = ioIndex[name]
		peerArg[nr], peerKind[nr] = peerArgs[name], peerIndex[name]
		cat[nr] = catIndex[opts.Category(name)]
		path[nr], addr[nr], word8[nr], flush[nr] = pathArgs[name], addrArgs[name], word8Args[name], flushArgs[name]
		if fdCreators[name] {
			flush[nr] = flushRet
		}
		if name == "fcntl" { // an fd creator only when it duplicates one
			rare[nr], flush[nr] = rareIfDup, flushRet
		}
		if name == "close" {
			rare[nr] = rareIfCounted
		}
		if missingCalls[name] {
			rare[nr] = rareIfMissing
		}
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, err
	}
	consts := map[string]any{
		"rare": rare, "io_kind": io, "peer_arg": peerArg, "peer_kind": peerKind, "category": cat, "str_arg": path, "addr_arg": addr,
		"word8_arg": word8, "flush_arg": flush, "nr_cpus": uint32(ncpu),
	}
	if opts.EmptyPrograms {
		consts["empty_programs"] = uint8(1)
	}
	if err := stripeCPUs(spec, ncpu, "sysstats", "bins", "errnos"); err != nil {
		return nil, err
	}
	o := &sysObjects{ncpu: ncpu}
	// The exit program is the verifier's longest (its loops over the
	// counters); the others are verified beside it.
	groups := [][]string{{"sched_process_exit"}, {"sys_exit", "sys_enter", "sched_process_fork", "sched_process_exec"}}
	if err := loadParallel(spec, consts, &o.objs, groups, "system-call tracer"); err != nil {
		return nil, err
	}
	if o.fdmem, err = o.objs.Fdstats.Memory(); err != nil {
		o.close()
		return nil, fmt.Errorf("mapping the fd counters: %w", err)
	}
	if o.rd, err = ringbuf.NewReader(o.objs.Events); err != nil {
		o.close()
		return nil, fmt.Errorf("opening the ring buffer: %w", err)
	}
	return o, nil
}

// start sets a run's settings in the programs' globals and attaches them;
// start is when the run began (its load, or its request to a server). Its
// origin, from which --since, --until and the timeline count, is the
// attach: a -p process's first call comes after it. On an error nothing is
// attached.
func (o *sysObjects) start(opts SyscallOptions, start time.Time) (*SyscallTracer, error) {
	minWait := opts.MinWait
	if minWait <= 0 {
		minWait = DefaultMinWait
	}
	t := &SyscallTracer{sysObjects: o, opts: opts, tids: map[uint32]uint32{}, tgids: map[uint32]uint32{},
		pslots: map[uint32]uint32{}, began: start, alive: map[uint32]bool{}}
	t.clock = kernel.NewClock()
	var bin uint64
	if opts.TimelineS > 0 {
		bin = uint64(opts.TimelineS * 1e9)
	}
	v := &o.objs.SysTraceVariables
	for _, set := range []struct {
		v   *ebpf.Variable
		val any
	}{{v.FollowTgid, uint32(opts.PID)}, {v.GateParent, uint32(opts.GateParent)}, {v.DetailNs, uint64(minWait.Nanoseconds())},
		{v.BinNs, bin}} {
		if err := set.v.Set(set.val); err != nil {
			return nil, fmt.Errorf("setting the run's %s: %w", set.v, err)
		}
	}
	if err := t.SetOrigin(); err != nil {
		return nil, err
	}
	// -p's process; the command's is learned from its exec (process slot 0).
	root := opts.PID
	t.root.Store(int64(root))
	t.pslots[0] = uint32(root)
	// For -p, the program the process runs: its exec came before tracing.
	if opts.PID != 0 {
		t.exe, _ = os.Readlink(fmt.Sprintf("/proc/%d/exe", root))
	}
	for _, prog := range []*ebpf.Program{o.objs.SysEnter, o.objs.SysExit, o.objs.SchedProcessFork, o.objs.SchedProcessExec, o.objs.SchedProcessExit} {
		l, err := link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			t.Detach()
			return nil, fmt.Errorf("attaching %s: %w", prog, err)
		}
		t.links = append(t.links, l)
	}
	t.setup = time.Since(start)
	return t, nil
}

// reset clears what a run left in the maps, the ring buffer and the
// globals, so that the next run starts as from a fresh load. The programs
// are detached: nothing writes meanwhile.
func (o *sysObjects) reset() error {
	for _, m := range []*ebpf.Map{o.objs.Tasks, o.objs.Sysstats, o.objs.Fdstats, o.objs.Bins, o.objs.Errnos, o.objs.UsedNrs, o.objs.UsedFds, o.objs.UsedErrnos} {
		mem, err := m.Memory()
		if err != nil {
			return err
		}
		if err := clearMemory(mem); err != nil {
			return err
		}
	}
	zeros := make([]uint64, o.ncpu)
	for i := range sysDropNames {
		if err := o.objs.Sdrops.Put(uint32(i), zeros); err != nil {
			return err
		}
	}
	var slot uint32
	for _, q := range []*ebpf.Map{o.objs.FreeTslots, o.objs.FreePslots} {
		for q.LookupAndDelete(nil, &slot) == nil {
		}
	}
	if err := o.objs.NextTslot.Set(uint32(0)); err != nil {
		return err
	}
	if err := o.objs.NextPslot.Set(uint32(1)); err != nil {
		return err
	}
	// Records a run left unread (it ended on an error).
	var rec ringbuf.Record
	for {
		o.rd.SetDeadline(time.Now())
		if err := o.rd.ReadInto(&rec); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ringbuf.ErrFlushed) {
				return nil
			}
			return err
		}
	}
}

// clearMemory zeroes a map's memory.
func clearMemory(mem *ebpf.Memory) error {
	zeros := make([]byte, min(int(mem.Size()), 1<<20))
	for off := 0; off < int(mem.Size()); off += len(zeros) {
		if _, err := mem.WriteAt(zeros[:min(len(zeros), int(mem.Size())-off)], int64(off)); err != nil {
			return err
		}
	}
	return nil
}

// SetOrigin makes now the run's time 0, from which --since, --until and
// the timeline's bins count, in the kernel and in Window. A run of a
// command calls it as it releases the command (whose exec follows), as a
// log's times count from its first line; it must come before Run, and
// before the command's first call.
func (t *SyscallTracer) SetOrigin() error {
	t0 := kernel.Monotonic()
	var from, to uint64
	if t.opts.Since > 0 {
		from = t0 + uint64(t.opts.Since)
	}
	if t.opts.Until > 0 {
		to = t0 + uint64(t.opts.Until)
	}
	v := &t.objs.SysTraceVariables
	for _, set := range []struct {
		v   *ebpf.Variable
		val uint64
	}{{v.T0Ns, t0}, {v.FromNs, from}, {v.ToNs, to}} {
		if err := set.v.Set(set.val); err != nil {
			return fmt.Errorf("setting the run's %s: %w", set.v, err)
		}
	}
	t.t0 = t0
	return nil
}

// Running returns the programs of the processes that were running when
// tracing began (the -p process): their execs were not seen.
func (t *SyscallTracer) Running() map[int]string {
	if t.exe == "" {
		return nil
	}
	return map[int]string{t.Root(): t.exe}
}

// Began and Ended are when the programs were attached and detached (zero
// while tracing goes on).
func (t *SyscallTracer) Began() time.Time { return t.began }
func (t *SyscallTracer) Ended() time.Time { return t.ended }

// Root is the traced process: -p's, or the command once its exec was read.
func (t *SyscallTracer) Root() int { return int(t.root.Load()) }

func (t *SyscallTracer) wall(ts uint64) float64 { return t.clock.Seconds(ts) }

// Window is the trace's origin (the attach, or the command's release:
// SetOrigin) and end (the detach), in wall-clock seconds; the end is 0
// while tracing goes on.
func (t *SyscallTracer) Window() (start, end float64) {
	if !t.ended.IsZero() {
		end = float64(t.ended.UnixNano()) / 1e9
	}
	return t.clock.Seconds(t.t0), end
}

// Detach stops tracing; the maps stay readable.
func (t *SyscallTracer) Detach() {
	<-t.detachAsync()
}

// detachAsync starts detaching the programs and returns a channel closed
// once they are: each link's close waits for the tracepoint's RCU grace
// period, 1-2 ms, side by side (8 ms for the five one after another).
func (t *SyscallTracer) detachAsync() <-chan struct{} {
	if t.ended.IsZero() {
		t.ended = time.Now()
	}
	if t.detached == nil {
		done := make(chan struct{})
		t.detached = done
		links := t.links
		t.links = nil
		go func() {
			defer close(done)
			var wg sync.WaitGroup
			for _, l := range links {
				wg.Go(func() { l.Close() })
			}
			wg.Wait()
		}()
	}
	return t.detached
}

// quiet reports whether no program can write the maps any more, detached
// or not: under -- CMD, once every thread the programs took up has exited
// (each came with an event, and none was lost to a full ring buffer) and
// no command is awaited, they only ever look up a thread and return.
func (t *SyscallTracer) quiet() bool {
	if t.opts.PID != 0 || len(t.alive) > 0 {
		return false // -p adopts threads on their next call
	}
	if err := t.objs.GateParent.Set(uint32(0)); err != nil {
		return false
	}
	drops, err := t.drops()
	return err == nil && drops[0] == 0 // SDROP_RINGBUF: a fork's event may be lost
}

// Close detaches the programs and frees the maps, or hands them back to
// the programs loaded once. It is safe to call twice.
func (t *SyscallTracer) Close() error {
	t.Detach()
	if t.closed {
		return nil
	}
	t.closed = true
	if t.owner != nil {
		return t.owner.release()
	}
	return t.close()
}

// Run passes the trace's events to emit until stop is closed, then detaches,
// drains the ring buffer and emits the counted calls. It fills info.
func (t *SyscallTracer) Run(stop <-chan struct{}, emit func(*sysevent.Event), info *profile.LiveInfo) error {
	t.ev = sysevent.Event{Kind: sysevent.Start, Root: t.Root(), Time: t.wall(t.t0)}
	emit(&t.ev)
	var rec ringbuf.Record
	draining := false
	// The end of tracing wakes the reader at once, rather than at its next
	// 10 ms deadline (7 ms of a short command's end-to-end time).
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-stop:
			t.rd.Flush()
		case <-done:
		}
	}()
	var detached <-chan struct{}
	for {
		if !draining {
			select {
			case <-stop:
				detached = t.detachAsync()
				draining = true
			default:
			}
		}
		if draining {
			t.rd.SetDeadline(time.Now())
		} else {
			// The programs wake the reader only when the ring fills up
			// (wakeup_flags): poll it often enough that it never does.
			t.rd.SetDeadline(time.Now().Add(10 * time.Millisecond))
		}
		err := t.rd.ReadInto(&rec)
		if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ringbuf.ErrFlushed) {
			if !draining {
				continue
			}
			// The ring is empty. Unless nothing can write the maps any
			// more (the usual end of a short command), wait for the
			// detach, and read what came meanwhile.
			if detached == nil || t.quiet() {
				break
			}
			<-detached
			detached = nil
			continue
		}
		if err != nil {
			return fmt.Errorf("reading the ring buffer: %w", err)
		}
		t.handle(rec.RawSample, emit)
	}
	err := t.finish(emit, info)
	if t.owner != nil {
		t.owner.ended()
	}
	return err
}

func (t *SyscallTracer) handle(raw []byte, emit func(*sysevent.Event)) {
	// The slot tables, and the counts that leave the maps, are shared
	// with Counts.
	t.live.mu.Lock()
	defer t.live.mu.Unlock()
	if len(raw) >= int(unsafe.Sizeof(bpf.SysTraceSysCalls{})) {
		if c := (*bpf.SysTraceSysCalls)(unsafe.Pointer(&raw[0])); c.Kind == sevCalls {
			t.retire(int(c.Pid), syscallName(c.Nr), c.Calls, c.Errors, c.Ns)
			t.emitCalls(emit, c.Nr, int(c.Tid), int(c.Pid), []bpf.SysTraceSysStats{{Calls: c.Calls, Errors: c.Errors, Ns: c.Ns}})
			return
		}
	}
	if len(raw) < int(unsafe.Sizeof(bpf.SysTraceSysEvent{})) {
		t.short++
		return
	}
	ev := (*bpf.SysTraceSysEvent)(unsafe.Pointer(&raw[0]))
	e := &t.ev
	switch ev.Kind {
	case sevSyscall:
		// Most opens find their fd's counters empty (mask 0): naming the
		// fd then would cost a readlink in /proc for nothing.
		if ev.FlushedFd >= 0 && ev.FlushedMask != 0 {
			*e = sysevent.Event{Kind: sysevent.FDIO, PID: int(ev.Pid), FD: int(ev.FlushedFd), IO: ioCounts(ev.Flushed[:], ev.FlushedMask)}
			t.retireIO(int(ev.Pid), e.IO)
			emit(e)
		}
		failed := uint64(0)
		if ev.Ret < 0 && ev.Ret > -4096 {
			failed = 1
		}
		t.retire(int(ev.Pid), syscallName(ev.Nr), 1, failed, ev.Dur)
		*e = sysevent.Event{Kind: sysevent.Call, Name: syscallName(ev.Nr), TID: int(ev.Tid), PID: int(ev.Pid),
			Time: t.wall(ev.Ts), Dur: float64(ev.Dur) / 1e9, Ret: ev.Ret, Args: ev.Args,
			Str: cstring(ev.Str[:], ev.StrLen)}
		if name := e.Name; addrArgs[name] > 0 || word8Args[name] > 0 {
			e.Raw = rawBytes(ev.Str[:], ev.StrLen) // a copy: the record is reused
		}
		emit(e)
	case sevFork:
		t.alive[ev.ChildTid] = true
		t.bind(ev.Tslot, ev.ChildTid, ev.ChildPid)
		t.pslots[ev.Pslot] = ev.ChildPid
		*e = sysevent.Event{Kind: sysevent.Fork, TID: int(ev.Tid), PID: int(ev.Pid), ChildTID: int(ev.ChildTid), ChildPID: int(ev.ChildPid)}
		emit(e)
	case sevExec:
		delete(t.alive, ev.ChildTid) // a thread's exec takes its leader's tid
		t.alive[ev.Tid] = true
		t.bind(ev.Tslot, ev.Tid, ev.Pid)
		if ev.Pslot == 0 {
			t.pslots[0] = ev.Pid
			t.root.CompareAndSwap(0, int64(ev.Pid))
		}
		*e = sysevent.Event{Kind: sysevent.Exec, TID: int(ev.Tid), PID: int(ev.Pid), Str: cstring(ev.Str[:], ev.StrLen),
			Argv: execArgs(unsafe.Slice((*byte)(unsafe.Pointer(&ev.Flushed[0])), unsafe.Sizeof(ev.Flushed)), ev.Args[0])}
		emit(e)
	case sevExit:
		delete(t.alive, ev.Tid)
		*e = sysevent.Event{Kind: sysevent.Exit, TID: int(ev.Tid), PID: int(ev.Pid), Time: t.wall(ev.Ts), ExitCode: int(ev.ExitCode),
			UserNs: ev.Args[0], SysNs: ev.Args[1]}
		emit(e)
		// The counters came before the exit, and the programs took the
		// slots back for new tasks. When the ring buffer was full, they
		// stay where they are, with the slots, and are read at the end.
		if ev.HandedOver&handedTSlot != 0 && t.tids[ev.Tslot] == ev.Tid {
			delete(t.tids, ev.Tslot)
			delete(t.tgids, ev.Tslot)
		}
		if ev.HandedOver&handedPSlot != 0 && t.pslots[ev.Pslot] == ev.Pid {
			delete(t.pslots, ev.Pslot)
		}
	case sevFDIO:
		if ev.FlushedFd >= 0 && ev.FlushedMask != 0 {
			*e = sysevent.Event{Kind: sysevent.FDIO, PID: int(ev.Pid), FD: int(ev.FlushedFd), IO: ioCounts(ev.Flushed[:], ev.FlushedMask)}
			t.retireIO(int(ev.Pid), e.IO)
			emit(e)
		}
	case sevAdopt:
		t.alive[ev.Tid] = true
		t.bind(ev.Tslot, ev.Tid, ev.Pid)
	}
}

// execArgs splits an exec's arguments, NUL-separated in b's first n
// bytes; a last one cut at the limit is kept as far as it went.
func execArgs(b []byte, n uint64) []string {
	if n == 0 || n > uint64(len(b)) {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b[:n]), "\x00"), "\x00")
}

// bind records that thread tid of process tgid counts its calls in tslot.
// The programs give the last slot to every thread beyond sysMaxTSlots.
func (t *SyscallTracer) bind(tslot, tid, tgid uint32) {
	if old, ok := t.tids[tslot]; ok && old != tid && tslot == sysMaxTSlots-1 {
		t.shared = true
	}
	t.tids[tslot], t.tgids[tslot] = tid, tgid
}

func cstring(b []int8, n uint32) string {
	if int(n) > len(b) {
		n = uint32(len(b))
	}
	s := make([]byte, 0, n)
	for _, c := range b[:n] {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

// rawBytes copies the first n bytes of b: the event's buffer is reused.
func rawBytes(b []int8, n uint32) []byte {
	if int(n) > len(b) {
		n = uint32(len(b))
	}
	if n == 0 {
		return nil
	}
	return slices.Clone(unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), n))
}

func syscallName(nr uint32) string {
	if n, ok := bpf.SyscallNames[nr]; ok {
		return n
	}
	return "syscall_" + strconv.Itoa(int(nr))
}

// ioCounts are an fd's counters of the kinds in mask (the others were not
// written), by call.
func ioCounts(counters []bpf.SysTraceFdIo, mask uint32) []sysevent.IOCount {
	var out []sysevent.IOCount
	for k, c := range counters {
		if mask&(1<<k) == 0 || c.Calls == 0 || k >= len(ioKinds)+len(peerKinds) {
			continue
		}
		n := sysevent.IOCount{Calls: int(c.Calls), Errors: int(c.Errors), Bytes: int64(c.Bytes), Ns: c.Ns}
		if k < len(ioKinds) {
			n.Name = ioKinds[k]
		} else {
			n.Name, n.Peer = peerKinds[k-len(ioKinds)], true
		}
		out = append(out, n)
	}
	return out
}

// emitFD emits the counters c (sysIOKinds of them) of an fd of process
// tgid (known false: the pslot's process is not known).
func (t *SyscallTracer) emitFD(emit func(*sysevent.Event), tgid uint32, known bool, fd int, c []bpf.SysTraceFdIo) {
	used := false
	for _, k := range c {
		used = used || k.Calls > 0
	}
	if !used {
		return
	}
	t.ev = sysevent.Event{Kind: sysevent.FDTotals, PID: int(tgid), FD: fd, Known: known, IO: ioCounts(c, 1<<sysIOKinds-1)}
	emit(&t.ev)
}

// emitCalls emits a thread's counts of one system call, summed over CPUs.
func (t *SyscallTracer) emitCalls(emit func(*sysevent.Event), nr uint32, tid, tgid int, perCPU []bpf.SysTraceSysStats) {
	var s bpf.SysTraceSysStats
	for _, v := range perCPU {
		s.Calls += v.Calls
		s.Errors += v.Errors
		s.Ns += v.Ns
	}
	if s.Calls == 0 {
		return
	}
	t.ev = sysevent.Event{Kind: sysevent.Counted, Name: syscallName(nr), TID: tid, PID: tgid,
		Calls: int(s.Calls), Errors: int(s.Errors), Ns: s.Ns}
	emit(&t.ev)
}

// errnoOfSlot is the error counted in slot of a system call's counters
// (count_errno in systrace.bpf.c); 0 is none of those.
func errnoOfSlot(slot uint32) (int64, bool) {
	switch {
	case slot == 0 || slot >= sysErrnoSlots:
		return 0, false
	case slot < 144:
		return int64(slot), true
	}
	return 512 + int64(slot-144), true
}

// emitErrnos emits the failed calls the kernel counted by system call and
// errno (the calls sent whole are counted from their events).
func (t *SyscallTracer) emitErrnos(emit func(*sysevent.Event)) error {
	words, err := readWords(t.objs.UsedErrnos, sysMaxNR*sysErrnoSlots/64)
	if err != nil {
		return err
	}
	perCPU := make([]uint64, t.ncpu)
	for w, bits := range words {
		for ; bits != 0; bits &= bits - 1 {
			key := w*64 + mathbits.TrailingZeros64(bits)
			if err := readStriped(t.objs.Errnos, sysMaxNR*sysErrnoSlots, key, perCPU); err != nil {
				return err
			}
			t.emitErrno(emit, uint32(key), perCPU)
		}
	}
	return nil
}

// emitErrno emits the failures counted at key of the errno counters.
func (t *SyscallTracer) emitErrno(emit func(*sysevent.Event), key uint32, perCPU []uint64) {
	var n uint64
	for _, v := range perCPU {
		n += v
	}
	if n == 0 {
		return
	}
	name := "other"
	if err, ok := errnoOfSlot(key % sysErrnoSlots); ok {
		name = kernel.ErrnoName(err)
	}
	t.ev = sysevent.Event{Kind: sysevent.Errnos, Name: syscallName(key / sysErrnoSlots), Errno: name, Calls: int(n),
		TID: sysevent.Unattributed, PID: sysevent.Unattributed}
	emit(&t.ev)
}

// finish emits what the kernel counted: per-fd I/O under each fd's current
// name, per-thread calls, timeline bins. Then it fills info.
func (t *SyscallTracer) finish(emit func(*sysevent.Event), info *profile.LiveInfo) error {
	// Per-fd I/O under each fd's name, and per-thread calls.
	err := t.eachUsedFD(func(fdi int, counters []bpf.SysTraceFdIo) {
		tgid, known := t.pslots[uint32(fdi/sysMaxFDs)]
		t.emitFD(emit, tgid, known, fdi%sysMaxFDs, counters)
	})
	if err != nil {
		return err
	}
	err = t.eachUsedCall(func(key int, perCPU []bpf.SysTraceSysStats) {
		tslot, nr := uint32(key/sysMaxNR), uint32(key%sysMaxNR)
		pid, tgid := int(t.tids[tslot]), int(t.tgids[tslot])
		if tslot == sysMaxTSlots-1 && t.shared {
			pid, tgid = sysevent.Unattributed, sysevent.Unattributed // several threads' calls: counted, but no one's
		}
		t.emitCalls(emit, nr, pid, tgid, perCPU)
	})
	if err != nil {
		return err
	}
	if err := t.emitErrnos(emit); err != nil {
		return fmt.Errorf("reading the errno counters: %w", err)
	}
	// Timeline bins.
	if t.opts.TimelineS > 0 {
		err := eachStriped(t.objs.Bins, sysMaxBins*sysCats, t.ncpu, &t.scratch, func(key uint32, perCPU []bpf.SysTraceBinStats) {
			var s bpf.SysTraceBinStats
			for _, v := range perCPU {
				s.Calls += v.Calls
				s.Ns += v.Ns
			}
			bin, cat := key/sysCats, key%sysCats
			if s.Calls == 0 || int(cat) >= len(profile.SyscallCategories) {
				return
			}
			t.ev = sysevent.Event{Kind: sysevent.Bin, Category: profile.SyscallCategories[cat], Calls: int(s.Calls),
				Ns: s.Ns, Time: t.wall(t.t0) + (float64(bin)+0.5)*t.opts.TimelineS}
			emit(&t.ev)
		})
		if err != nil {
			return fmt.Errorf("reading the timeline: %w", err)
		}
	}
	info.PID = t.Root()
	info.MinWaitS = t.minWait().Seconds()
	info.WallS = t.ended.Sub(t.began).Seconds()
	info.SetupS = t.setup.Seconds()
	drops, err := t.drops()
	if err != nil {
		return err
	}
	for i, n := range drops {
		if n > 0 {
			if info.Drops == nil {
				info.Drops = map[string]uint64{}
			}
			info.Drops[sysDropNames[i]] = n
		}
	}
	if t.short > 0 {
		if info.Drops == nil {
			info.Drops = map[string]uint64{}
		}
		info.Drops["short ring buffer records"] = uint64(t.short)
	}
	return nil
}

func (t *SyscallTracer) minWait() time.Duration {
	if t.opts.MinWait > 0 {
		return t.opts.MinWait
	}
	return DefaultMinWait
}

func (t *SyscallTracer) drops() ([]uint64, error) {
	out := make([]uint64, len(sysDropNames))
	for i := range out {
		var per []uint64
		if err := t.objs.Sdrops.Lookup(uint32(i), &per); err != nil {
			return nil, fmt.Errorf("reading drop counters: %w", err)
		}
		for _, n := range per {
			out[i] += n
		}
	}
	return out, nil
}
