package ktrace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"github.com/fusescope/fusescope/internal/bpf"
	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/systrace"
	"golang.org/x/sys/unix"
)

// The live system-call source (fusescope syscalls -- CMD, -p PID). The BPF
// side (internal/bpf/systrace.bpf.c) counts calls per thread and system call
// and fd I/O per process and fd in kernel maps; only the calls that create,
// name or end fds, processes and programs, and calls longer than MinWait,
// travel to user space whole. This side keeps each process's fd table from
// those, names the counted I/O with it, and hands the analyzers of
// internal/systrace the same events an strace log gives them: single calls,
// and aggregates that stand for many.

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

// ioKinds are the calls counted per fd, in the order of the fd_io counters.
var ioKinds = []string{"read", "write", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev",
	"preadv2", "pwritev2", "recvfrom", "sendto", "recvmsg", "sendmsg", "splice", "tee", "sendfile", "copy_file_range"}

// peerKinds count the transfer calls' second fds (splice's fd_out,
// sendfile's in_fd), in the fd_io counters after ioKinds'; peerArgs says
// where that fd is (1 + argument index).
var (
	peerKinds = []string{"splice", "tee", "sendfile", "copy_file_range"}
	peerArgs  = map[string]uint8{"splice": 3, "tee": 2, "sendfile": 2, "copy_file_range": 3}
)

// fdCreators return a new fd (its counters are flushed to the fd's old
// name first, in case it was closed without a close call: exec, close_range).
var fdCreators = strset("open", "openat", "openat2", "creat", "socket", "accept", "accept4", "dup", "eventfd", "eventfd2",
	"epoll_create", "epoll_create1", "timerfd_create", "signalfd", "signalfd4", "memfd_create", "inotify_init",
	"inotify_init1", "pidfd_open", "userfaultfd", "fanotify_init", "perf_event_open", "io_uring_setup", "memfd_secret")

// rareCalls are always sent whole: they change what fds and processes are.
var rareCalls = union(fdCreators, strset("close", "dup2", "dup3", "socketpair", "connect", "bind", "pipe", "pipe2",
	"execve", "execveat", "clone", "clone3", "fork", "vfork", "chdir", "fchdir"))

// Where the BPF side finds a call's strings (1 + argument index).
var (
	pathArgs = map[string]uint8{"open": 1, "openat": 2, "openat2": 2, "creat": 1, "chdir": 1}
	addrArgs = map[string]uint8{"connect": 2, "bind": 2, "accept": 2, "accept4": 2, "sendto": 5}
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
	// GatePID traces a process from its next exec on: the started command,
	// held before its exec until the programs are attached.
	GatePID int
	// MinWait: calls at least this long are kept whole (they make the
	// waits list); 0 means DefaultMinWait.
	MinWait time.Duration
	// TimelineS is the timeline's bin width in seconds; 0: no timeline.
	TimelineS float64
	// EmptyPrograms attaches programs that return at once: benchmarks
	// measure what attaching alone costs with it.
	EmptyPrograms bool
}

// DefaultMinWait is the duration from which a call is kept whole.
const DefaultMinWait = time.Millisecond

// SyscallTracer is a loaded and attached live source.
type SyscallTracer struct {
	objs   bpf.SysTraceObjects
	links  []link.Link
	rd     *ringbuf.Reader
	fdmem  *ebpf.Memory
	ncpu   int
	opts   SyscallOptions
	t0     uint64       // CLOCK_MONOTONIC ns at load
	clock  kernel.Clock // anchored at t0
	began  time.Time
	ended  time.Time
	root   int
	exe    string               // -p: the program the process was running when tracing began
	procs  map[uint32]*liveProc // by tgid
	tids   map[uint32]uint32    // tslot -> tid
	tgids  map[uint32]uint32    // tslot -> its process
	shared bool                 // the last tslot took threads beyond sysMaxTSlots: its calls are no one thread's
	pslots map[uint32]uint32    // pslot -> tgid
	execs  map[uint32]string    // tid -> program of its last exec
	ev     systrace.Event
	short  int // events shorter than struct sys_event
	pairs  int // pipes and socket pairs numbered, /proc having lost them
}

// liveProc is what user space knows of a traced process.
type liveProc struct {
	pid int
	fds map[int]string
	// execClosed holds the names of fds an exec seemed to close (gone from
	// /proc when the exec was read, which can be long after it): the
	// kernel still holds their counters, flushed when the number is reused
	// or at the end, and those are named by what the fd was.
	execClosed map[int]string
	cwd        string // "" until needed
}

// StartSyscalls checks the kernel, loads the programs and attaches them.
func StartSyscalls(opts SyscallOptions) (*SyscallTracer, error) {
	if runtime.GOARCH != "amd64" {
		return nil, fmt.Errorf("the live system-call source knows x86-64 system call numbers only (this is %s): analyse an strace log instead", runtime.GOARCH)
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
		cat[nr] = catIndex[systrace.Category(name)]
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
	}
	minWait := opts.MinWait
	if minWait <= 0 {
		minWait = DefaultMinWait
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, err
	}
	t := &SyscallTracer{ncpu: ncpu, opts: opts, procs: map[uint32]*liveProc{}, tids: map[uint32]uint32{}, tgids: map[uint32]uint32{},
		pslots: map[uint32]uint32{}, execs: map[uint32]string{}}
	t.clock = kernel.NewClock()
	t.t0 = kernel.Monotonic()
	t.began = time.Now()
	consts := map[string]any{
		"follow_tgid": uint32(opts.PID), "gate_pid": uint32(opts.GatePID), "detail_ns": uint64(minWait.Nanoseconds()),
		"t0_ns": t.t0, "rare": rare, "io_kind": io, "peer_arg": peerArg, "peer_kind": peerKind, "category": cat, "str_arg": path, "addr_arg": addr,
		"word8_arg": word8, "flush_arg": flush, "nr_cpus": uint32(ncpu),
	}
	if opts.EmptyPrograms {
		consts["empty_programs"] = uint8(1)
	}
	if opts.TimelineS > 0 {
		consts["bin_ns"] = uint64(opts.TimelineS * 1e9)
	}
	if err := load(spec, consts, &t.objs, "system-call tracer"); err != nil {
		return nil, err
	}
	if t.fdmem, err = t.objs.Fdstats.Memory(); err != nil {
		t.Close()
		return nil, fmt.Errorf("mapping the fd counters: %w", err)
	}
	if t.rd, err = ringbuf.NewReader(t.objs.Events); err != nil {
		t.Close()
		return nil, fmt.Errorf("opening the ring buffer: %w", err)
	}
	root := opts.PID
	if root == 0 {
		root = opts.GatePID
	}
	t.root = root
	p := t.proc(uint32(root))
	t.pslots[0] = uint32(root)
	// What the root holds already: its inherited fds, its cwd, and for -p
	// its program, whose exec came before tracing.
	p.cwd, _ = os.Readlink(fmt.Sprintf("/proc/%d/cwd", root))
	if opts.PID != 0 {
		t.exe, _ = os.Readlink(fmt.Sprintf("/proc/%d/exe", root))
	}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", root)); err == nil {
		for _, e := range ents {
			fd, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if target, err := procFD(root, fd); err == nil {
				p.fds[fd] = target
			}
		}
	}
	for _, prog := range []*ebpf.Program{t.objs.SysEnter, t.objs.SysExit, t.objs.SchedProcessFork, t.objs.SchedProcessExec, t.objs.SchedProcessExit} {
		l, err := link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("attaching %s: %w", prog, err)
		}
		t.links = append(t.links, l)
	}
	return t, nil
}

// Running returns the programs of the processes that were running when
// tracing began (the -p process): their execs were not seen.
func (t *SyscallTracer) Running() map[int]string {
	if t.exe == "" {
		return nil
	}
	return map[int]string{t.root: t.exe}
}

// Forget drops what the root's fd table holds for fd (the gate's pipe,
// closed at its exec).
func (t *SyscallTracer) Forget(fd int) { delete(t.proc(uint32(t.root)).fds, fd) }

func (t *SyscallTracer) wall(ts uint64) float64 { return t.clock.Seconds(ts) }

// Window is the trace's start (the programs' load) and end (their
// detach), in wall-clock seconds; the end is 0 while tracing goes on.
func (t *SyscallTracer) Window() (start, end float64) {
	if !t.ended.IsZero() {
		end = float64(t.ended.UnixNano()) / 1e9
	}
	return t.clock.Seconds(t.t0), end
}

// Detach stops tracing; the maps stay readable.
func (t *SyscallTracer) Detach() {
	for _, l := range t.links {
		l.Close()
	}
	t.links = nil
	if t.ended.IsZero() {
		t.ended = time.Now()
	}
}

// Close detaches the programs and frees the maps. It is safe to call twice.
func (t *SyscallTracer) Close() error {
	t.Detach()
	if t.rd != nil {
		t.rd.Close()
	}
	return t.objs.Close()
}

// Run passes the trace's events to emit until stop is closed, then detaches,
// drains the ring buffer and emits the counted calls. It fills info.
func (t *SyscallTracer) Run(stop <-chan struct{}, emit func(*systrace.Event), info *profile.LiveInfo) error {
	// A sample at the start anchors the timeline's bins to the kernel's.
	t.ev = systrace.Event{Kind: systrace.Sample, Time: t.wall(t.t0)}
	emit(&t.ev)
	var rec ringbuf.Record
	draining := false
	for {
		if !draining {
			select {
			case <-stop:
				t.Detach()
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
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if draining {
				break
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("reading the ring buffer: %w", err)
		}
		t.handle(rec.RawSample, emit)
	}
	return t.finish(emit, info)
}

func (t *SyscallTracer) proc(tgid uint32) *liveProc {
	p := t.procs[tgid]
	if p == nil {
		p = &liveProc{pid: int(tgid), fds: map[int]string{}, execClosed: map[int]string{}}
		t.procs[tgid] = p
	}
	return p
}

// target names what fd refers to in p, asking /proc for fds the trace did
// not see created.
func (p *liveProc) target(fd int) string {
	if fd < 0 {
		return ""
	}
	if s, ok := p.fds[fd]; ok {
		return s
	}
	s, err := procFD(p.pid, fd)
	if err != nil {
		s = "fd:" + strconv.Itoa(fd)
	}
	p.fds[fd] = s
	return s
}

// pastTarget names fd for what it did before now: counters flushed at its
// close or reuse, or at the end. An fd an exec seemed to close keeps the
// name it had.
func (p *liveProc) pastTarget(fd int) string {
	if _, ok := p.fds[fd]; !ok {
		if s, ok := p.execClosed[fd]; ok {
			return s
		}
	}
	return p.target(fd)
}

// name records what fd now refers to.
func (p *liveProc) name(fd int, target string) {
	p.fds[fd] = target
	delete(p.execClosed, fd)
}

// procFD names fd of process pid from /proc, a socket as procSocket does.
func procFD(pid, fd int) (string, error) {
	s, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
	if err != nil {
		return "", err
	}
	if ino, ok := strings.CutPrefix(s, "socket:["); ok {
		if n, err := strconv.ParseUint(strings.TrimSuffix(ino, "]"), 10, 64); err == nil {
			if name, ok := procSocket(pid, n); ok {
				return name, nil
			}
		}
	}
	return s, nil
}

// resolve makes an open's path absolute, as strace -y prints it.
func (p *liveProc) resolve(dirfd int, path string) string {
	if path == "" || filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	base := ""
	if dirfd == unix.AT_FDCWD {
		if p.cwd == "" {
			p.cwd, _ = os.Readlink(fmt.Sprintf("/proc/%d/cwd", p.pid))
		}
		base = p.cwd
	} else {
		base = p.target(dirfd)
	}
	if !filepath.IsAbs(base) {
		return path
	}
	return filepath.Join(base, path)
}

func (t *SyscallTracer) handle(raw []byte, emit func(*systrace.Event)) {
	if len(raw) >= int(unsafe.Sizeof(bpf.SysTraceSysCalls{})) {
		if c := (*bpf.SysTraceSysCalls)(unsafe.Pointer(&raw[0])); c.Kind == sevCalls {
			t.emitCalls(emit, c.Nr, int(c.Tid), int(c.Pid), []bpf.SysTraceSysStats{{Calls: c.Calls, Errors: c.Errors, Ns: c.Ns}})
			return
		}
	}
	if len(raw) < int(unsafe.Sizeof(bpf.SysTraceSysEvent{})) {
		t.short++
		return
	}
	ev := (*bpf.SysTraceSysEvent)(unsafe.Pointer(&raw[0]))
	switch ev.Kind {
	case sevSyscall:
		t.syscall(ev, emit)
	case sevFork:
		t.bind(ev.Tslot, ev.ChildTid, ev.ChildPid)
		t.pslots[ev.Pslot] = ev.ChildPid
		if ev.ChildPid != ev.Pid { // a process, not a thread: it inherits the fd table
			parent, child := t.proc(ev.Pid), t.proc(ev.ChildPid)
			for fd, s := range parent.fds {
				child.fds[fd] = s
			}
			child.cwd = parent.cwd
		}
	case sevExec:
		t.bind(ev.Tslot, ev.Tid, ev.Pid)
		t.execs[ev.Tid] = cstring(ev.Str[:], ev.StrLen)
		if ev.Pslot == 0 {
			t.pslots[0] = ev.Pid
		}
		// Exec closed the close-on-exec fds: keep what /proc still shows,
		// or everything if the process is already gone.
		p := t.proc(ev.Pid)
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/fd", ev.Pid)); err == nil {
			for fd, s := range p.fds {
				if _, err := os.Lstat(fmt.Sprintf("/proc/%d/fd/%d", ev.Pid, fd)); err != nil {
					delete(p.fds, fd)
					p.execClosed[fd] = s
				}
			}
		}
	case sevExit:
		e := &t.ev
		*e = systrace.Event{Kind: systrace.Exit, PID: int(ev.Tid), TGID: int(ev.Pid), Time: t.wall(ev.Ts), Dur: -1}
		code := int(ev.ExitCode)
		if sig := code & 0x7f; sig != 0 {
			e.Kind, e.Name = systrace.Killed, unix.SignalName(syscall.Signal(sig))
		} else {
			e.Status = code >> 8 & 0xff
		}
		emit(e) // every thread's, as strace prints +++ exited +++ for each
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
			t.emitIO(emit, ev.Pid, t.proc(ev.Pid).pastTarget(int(ev.FlushedFd)), ev.Flushed[:], ev.FlushedMask)
		}
	case sevAdopt:
		t.bind(ev.Tslot, ev.Tid, ev.Pid)
	}
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

func rawBytes(b []int8, n uint32) []byte {
	if int(n) > len(b) {
		n = uint32(len(b))
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), n)
}

func syscallName(nr uint32) string {
	if n, ok := bpf.SyscallNames[nr]; ok {
		return n
	}
	return "syscall_" + strconv.Itoa(int(nr))
}

// emitIO emits an fd's counted I/O as aggregate events: the counters of
// the kinds in mask (the others were not written).
func (t *SyscallTracer) emitIO(emit func(*systrace.Event), tgid uint32, target string, counters []bpf.SysTraceFdIo, mask uint32) {
	for k, c := range counters {
		if mask&(1<<k) == 0 || c.Calls == 0 || k >= len(ioKinds)+len(peerKinds) {
			continue
		}
		kind, name := systrace.Syscall, ""
		if k < len(ioKinds) {
			name = ioKinds[k]
		} else {
			kind, name = systrace.PeerIO, peerKinds[k-len(ioKinds)]
		}
		e := &t.ev
		*e = systrace.Event{Kind: kind, Name: name, PID: int(tgid), TGID: int(tgid), Dur: float64(c.Ns) / 1e9,
			Calls: int(c.Calls), Errors: int(c.Errors), Bytes: int64(c.Bytes), Ret: "0"}
		e.SetTarget(target)
		emit(e)
	}
}

func (t *SyscallTracer) syscall(ev *bpf.SysTraceSysEvent, emit func(*systrace.Event)) {
	name := syscallName(ev.Nr)
	p := t.proc(ev.Pid)
	// Most opens find their fd's counters empty (mask 0): naming the fd
	// then would cost a readlink in /proc for nothing.
	if ev.FlushedFd >= 0 && ev.FlushedMask != 0 {
		t.emitIO(emit, ev.Pid, p.pastTarget(int(ev.FlushedFd)), ev.Flushed[:], ev.FlushedMask)
	}
	e := &t.ev
	*e = systrace.Event{Kind: systrace.Syscall, Name: name, PID: int(ev.Tid), TGID: int(ev.Pid), Time: t.wall(ev.Ts), Dur: float64(ev.Dur) / 1e9}
	ret := ev.Ret
	if ret < 0 && ret > -4096 {
		e.Ret, e.Errno = "-1", kernel.ErrnoName(-ret)
	} else {
		e.Ret = strconv.FormatInt(ret, 10)
	}
	fd := int(int32(ev.Args[0]))
	str := cstring(ev.Str[:], ev.StrLen)
	switch name {
	case "open", "creat", "openat", "openat2":
		dirfd := unix.AT_FDCWD
		if name == "openat" || name == "openat2" {
			dirfd = fd
		}
		target := ""
		if ret >= 0 {
			target = p.resolve(dirfd, str)
			p.name(int(ret), target)
		}
		e.Args = strconv.Quote(str)
		e.SetTarget(target)
	case "close":
		e.SetTarget(p.pastTarget(fd))
		delete(p.fds, fd)
		delete(p.execClosed, fd)
	case "dup", "dup2", "dup3", "fcntl":
		// fcntl arrives whole only when it duplicated the fd (F_DUPFD,
		// F_DUPFD_CLOEXEC) or lasted --min-wait.
		old := p.target(fd)
		if ret >= 0 && (name != "fcntl" || isDupCmd(ev.Args[1])) {
			p.name(int(ret), old)
		}
		e.SetTarget(old)
	case "socket":
		if ret >= 0 {
			p.name(int(ret), systrace.SocketTarget(int(ev.Args[0]), int(ev.Args[1])))
		}
	case "connect", "bind":
		target := p.target(fd)
		if a := sockaddr(rawBytes(ev.Str[:], ev.StrLen)); a != "" {
			named := systrace.Protocol(target) + ":[" + a + "]"
			if ret == 0 || e.Errno == "EINPROGRESS" {
				p.name(fd, named)
				target = named
			} else {
				target = named // what it failed to reach; the fd stays unnamed
			}
		}
		e.SetTarget(target)
	case "accept", "accept4":
		listener := p.target(fd)
		if ret >= 0 {
			peer := sockaddr(rawBytes(ev.Str[:], ev.StrLen))
			p.name(int(ret), systrace.Protocol(listener)+":["+peer+"]")
		}
		e.SetTarget(listener)
	case "pipe", "pipe2", "socketpair":
		if ret == 0 && ev.StrLen == 8 {
			// /proc names the pair (pipe:[inode]) while it exists; a
			// short-lived one (a shell's command substitution) is often
			// gone by the time its event is read, and is then numbered as
			// in a log without -y: pipe:[#1], UNIX:[#2].
			kind := "pipe"
			if name == "socketpair" {
				kind = systrace.Protocol(systrace.SocketTarget(int(ev.Args[0]), int(ev.Args[1])))
			}
			b := rawBytes(ev.Str[:], 8)
			ends := []int{int(int32(binary.LittleEndian.Uint32(b))), int(int32(binary.LittleEndian.Uint32(b[4:])))}
			// Either end names both: a pipe's ends share its inode (the
			// process may have closed one already).
			pair := ""
			for _, nfd := range ends {
				if s, err := procFD(p.pid, nfd); err == nil && (strings.HasPrefix(s, kind+":[") || kind != "pipe" && strings.HasPrefix(s, "socket:[")) {
					pair = s
					break
				}
			}
			if pair == "" {
				t.pairs++
				pair = kind + ":[#" + strconv.Itoa(t.pairs) + "]"
			}
			for _, nfd := range ends {
				p.name(nfd, pair)
			}
		}
	case "poll", "ppoll":
		// Sent whole only when it lasted --min-wait: name the first fd it
		// waited on, as strace -y does inside the pollfd array.
		if ev.StrLen == 8 && ev.Args[1] > 0 {
			if pfd := int(int32(binary.LittleEndian.Uint32(rawBytes(ev.Str[:], 8)))); pfd >= 0 {
				e.SetTarget(p.target(pfd))
			}
		}
	case "chdir", "fchdir":
		// Followed here rather than read from /proc later: a short-lived
		// process is gone by the time its events are read.
		dir := ""
		if name == "chdir" {
			dir = p.resolve(unix.AT_FDCWD, str)
		} else {
			dir = p.target(fd)
			e.SetTarget(dir) // strace -y names fchdir's fd, not chdir's path
		}
		if ret == 0 {
			p.cwd = dir
		}
	case "execve", "execveat":
		e.Args = strconv.Quote(t.execs[ev.Tid])
	default:
		if fdCreators[name] && ret >= 0 {
			delete(p.fds, int(ret))
			delete(p.execClosed, int(ret))
			p.target(int(ret))
		}
		if systrace.TakesFD(name) && fd >= 0 {
			e.SetTarget(p.target(fd))
		}
		if a := peerArgs[name]; a > 0 {
			if pfd := int(int32(ev.Args[a-1])); pfd >= 0 {
				e.SetPeer(p.target(pfd))
			}
		}
	}
	emit(e)
}

func isDupCmd(cmd uint64) bool { return cmd == unix.F_DUPFD || cmd == unix.F_DUPFD_CLOEXEC }

// sockaddr renders a struct sockaddr as strace -yy does: 1.2.3.4:53,
// [::1]:80, or a unix path.
func sockaddr(b []byte) string {
	if len(b) < 2 {
		return ""
	}
	switch binary.LittleEndian.Uint16(b) {
	case unix.AF_INET:
		if len(b) >= 8 {
			ip := netip.AddrFrom4([4]byte(b[4:8]))
			return netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[2:4])).String()
		}
	case unix.AF_INET6:
		if len(b) >= 24 {
			ip := netip.AddrFrom16([16]byte(b[8:24]))
			return netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[2:4])).String()
		}
	case unix.AF_UNIX:
		path := b[2:]
		if i := strings.IndexByte(string(path), 0); i > 0 {
			path = path[:i]
		} else if i == 0 && len(path) > 1 { // abstract
			return "@" + strings.TrimRight(string(path[1:]), "\x00")
		}
		return string(path)
	}
	return ""
}

// emitFDs emits one pslot's per-fd counters (sysMaxFDs x sysIOKinds), each
// fd under its name in process tgid, or "fd:N" if the pslot's process is
// not known.
func (t *SyscallTracer) emitFDs(emit func(*systrace.Event), tgid uint32, known bool, counters []bpf.SysTraceFdIo) {
	for fd := 0; fd < sysMaxFDs; fd++ {
		c := counters[fd*sysIOKinds : (fd+1)*sysIOKinds]
		used := false
		for _, k := range c {
			used = used || k.Calls > 0
		}
		if !used {
			continue
		}
		target := "fd:" + strconv.Itoa(fd)
		if known {
			target = t.proc(tgid).pastTarget(fd)
		}
		t.emitIO(emit, tgid, target, c, 1<<sysIOKinds-1)
	}
}

// emitCalls emits a thread's counts of one system call, summed over CPUs.
func (t *SyscallTracer) emitCalls(emit func(*systrace.Event), nr uint32, tid, tgid int, perCPU []bpf.SysTraceSysStats) {
	var s bpf.SysTraceSysStats
	for _, v := range perCPU {
		s.Calls += v.Calls
		s.Errors += v.Errors
		s.Ns += v.Ns
	}
	if s.Calls == 0 {
		return
	}
	e := &t.ev
	*e = systrace.Event{Kind: systrace.Syscall, Name: syscallName(nr), PID: tid, TGID: tgid,
		Dur: float64(s.Ns) / 1e9, Calls: int(s.Calls), Errors: int(s.Errors), Ret: "0"}
	emit(e)
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
func (t *SyscallTracer) emitErrnos(emit func(*systrace.Event)) error {
	return eachPerCPU(t.objs.Errnos, func(key uint32, perCPU []uint64) {
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
		e := &t.ev
		*e = systrace.Event{Kind: systrace.Failed, Name: syscallName(key / sysErrnoSlots), Errno: name, Calls: int(n),
			PID: systrace.Unattributed, TGID: systrace.Unattributed}
		emit(e)
	})
}

// finish emits what the kernel counted: per-fd I/O under each fd's current
// name, per-thread calls, timeline bins. Then it fills info.
func (t *SyscallTracer) finish(emit func(*systrace.Event), info *profile.LiveInfo) error {
	// Per-fd I/O.
	var one bpf.SysTraceFdIo
	size := int(unsafe.Sizeof(one))
	buf := make([]byte, sysMaxPSlots*sysMaxFDs*sysIOKinds*size)
	if _, err := t.fdmem.ReadAt(buf, 0); err != nil {
		return fmt.Errorf("reading the fd counters: %w", err)
	}
	counters := unsafe.Slice((*bpf.SysTraceFdIo)(unsafe.Pointer(&buf[0])), sysMaxPSlots*sysMaxFDs*sysIOKinds)
	for ps := 0; ps < sysMaxPSlots; ps++ {
		tgid, known := t.pslots[uint32(ps)]
		t.emitFDs(emit, tgid, known, counters[ps*sysMaxFDs*sysIOKinds:(ps+1)*sysMaxFDs*sysIOKinds])
	}
	// Per-thread calls.
	err := eachPerCPU(t.objs.Sysstats, func(key uint32, perCPU []bpf.SysTraceSysStats) {
		tslot, nr := key/sysMaxNR, key%sysMaxNR
		pid, tgid := int(t.tids[tslot]), int(t.tgids[tslot])
		if tslot == sysMaxTSlots-1 && t.shared {
			pid, tgid = systrace.Unattributed, systrace.Unattributed // several threads' calls: counted, but no one's
		}
		t.emitCalls(emit, nr, pid, tgid, perCPU)
	})
	if err != nil {
		return fmt.Errorf("reading the call counters: %w", err)
	}
	if err := t.emitErrnos(emit); err != nil {
		return fmt.Errorf("reading the errno counters: %w", err)
	}
	// Timeline bins.
	if t.opts.TimelineS > 0 {
		err := eachPerCPU(t.objs.Bins, func(key uint32, perCPU []bpf.SysTraceBinStats) {
			var s bpf.SysTraceBinStats
			for _, v := range perCPU {
				s.Calls += v.Calls
				s.Ns += v.Ns
			}
			bin, cat := key/sysCats, key%sysCats
			if s.Calls == 0 || int(cat) >= len(profile.SyscallCategories) {
				return
			}
			e := &t.ev
			*e = systrace.Event{Kind: systrace.Sample, Name: profile.SyscallCategories[cat], Calls: int(s.Calls),
				Dur: float64(s.Ns) / 1e9, Time: t.wall(t.t0) + (float64(bin)+0.5)*t.opts.TimelineS}
			emit(e)
		})
		if err != nil {
			return fmt.Errorf("reading the timeline: %w", err)
		}
	}
	info.PID = t.root
	info.MinWaitS = t.minWait().Seconds()
	info.WallS = t.ended.Sub(t.began).Seconds()
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
