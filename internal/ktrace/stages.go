package ktrace

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/fusescope/fusescope/internal/bpf"
	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/option"
)

// StageCost selects what --stages attaches; the benchmarks compare them.
type StageCost int

const (
	// StagesMeasured attaches the stage programs (the default).
	StagesMeasured StageCost = iota
	// StagesEmpty attaches the same programs to the same per-call
	// tracepoints, each returning at once: what attaching alone costs.
	StagesEmpty
	// StagesRawEmpty attaches programs that return at once to the raw
	// sys_enter and sys_exit tracepoints, which run one for every system
	// call of every process.
	StagesRawEmpty
	// StagesUncounted attaches the stage programs, which take their
	// stamps, and the end program splits each request but counts nothing:
	// the floor under the stages' accounting.
	StagesUncounted
)

// stagePrograms are the programs on the daemon's system calls (stages.bpf.h).
type stagePrograms struct {
	ExitRead      *ebpf.Program `ebpf:"stage_exit_read"`
	ExitReadv     *ebpf.Program `ebpf:"stage_exit_readv"`
	EnterSplice   *ebpf.Program `ebpf:"stage_enter_splice"`
	ExitSplice    *ebpf.Program `ebpf:"stage_exit_splice"`
	EnterWrite    *ebpf.Program `ebpf:"stage_enter_write"`
	EnterWritev   *ebpf.Program `ebpf:"stage_enter_writev"`
	EnterVmsplice *ebpf.Program `ebpf:"stage_enter_vmsplice"`
}

// rawFloorPrograms are StagesRawEmpty's.
type rawFloorPrograms struct {
	Enter *ebpf.Program `ebpf:"stage_floor_raw_enter"`
	Exit  *ebpf.Program `ebpf:"stage_floor_raw_exit"`
}

// stageHook is a stage program and the syscalls tracepoint it runs on.
type stageHook struct {
	event string
	prog  *ebpf.Program
}

// hooks are the programs to attach: with fuse_request_sent (sent), the
// replies' alone, since that tracepoint ends the queue stage.
func (p *stagePrograms) hooks(sent bool) []stageHook {
	replies := []stageHook{
		{"sys_enter_splice", p.EnterSplice},
		{"sys_enter_write", p.EnterWrite}, {"sys_enter_writev", p.EnterWritev},
		{"sys_enter_vmsplice", p.EnterVmsplice},
	}
	if sent {
		return replies
	}
	return append(replies, stageHook{"sys_exit_read", p.ExitRead}, stageHook{"sys_exit_readv", p.ExitReadv},
		stageHook{"sys_exit_splice", p.ExitSplice})
}

// sentProgram ends the queue stage at fuse:fuse_request_sent (Linux 7.3).
type sentProgram struct {
	Sent *ebpf.Program `ebpf:"stage_sent"`
}

// ringPrograms time the requests FUSE over io_uring's ring carries: the
// command's completion that hands the daemon a request (the queue's end,
// unless fuse_request_sent came first; and which connection the ring
// serves, which the submission needs), and the submission that commits
// its reply.
type ringPrograms struct {
	Complete *ebpf.Program `ebpf:"stage_ring_complete"`
	Submit   *ebpf.Program `ebpf:"stage_ring_submit"`
}

// hooks are the io_uring tracepoints to attach to, and their programs.
func (p *ringPrograms) hooks() []stageHook {
	return []stageHook{{"io_uring_complete", p.Complete}, {"io_uring_submit_req", p.Submit}}
}

// stagePIDLimit is the number of process ids the daemons' bitmap holds
// (DAEMON_BITMAP_WORDS * 64, the kernel's PID_MAX_LIMIT).
const stagePIDLimit = 65536 * 64

// stageFeature is --stages: the programs on the daemons' system calls
// (or, for the benchmarks, the raw floor's), fuse_request_sent's where the
// kernel has it, and the daemons watched.
type stageFeature struct {
	cost   StageCost
	sent   bool // the kernel has fuse:fuse_request_sent (Linux 7.3)
	ring   bool // and FUSE over io_uring with io_uring's tracepoints
	holds  bool // the daemons' holds kept (Options.Holds)
	progs  *stagePrograms
	sentP  *sentProgram
	ringP  *ringPrograms
	floor  *rawFloorPrograms
	kernel *kernelStages // on the kernel's side of /dev/fuse (funcs.go)
	// The daemons watched, and since when (the records say so, since a
	// request a daemon took before it was watched has no stages).
	daemons map[int]time.Time
	// The forgets counted at the previous interval.
	prevForgets map[uint32]forgetCount
}

// forgetCount is a connection's FORGET and BATCH_FORGET requests read by
// its daemons, and the nodes they forgot.
type forgetCount struct{ requests, nodes uint64 }

func (f *stageFeature) configure(p *loadPlan) (bool, error) {
	// Stamps by (connection, id) only where the send has no id.
	if !p.opts.Stages || p.tps.SendHasID {
		p.unused("stage_stamps")
	}
	if !p.opts.Stages {
		p.unused("daemon_tgids", "daemon_threads", "stage_table", "stage_fast0", "stage_fast1", "stage_fine0", "stage_fine1", "passthrough_opens", "pipe_headers", "reply_starts", "ring_conns", "forgets")
	}
	if !p.opts.Stages || !p.opts.Holds {
		p.unused("daemon_held", "held_by_goroutine")
	}
	if !p.opts.Stages {
		return false, nil
	}
	if p.opts.Holds {
		p.consts["stage_holds"] = uint8(1)
	}
	p.twin += "_stages"
	if p.opts.StageCost == StagesEmpty {
		p.consts["stages_empty"] = uint8(1)
	}
	if p.opts.StageCost == StagesUncounted {
		p.consts["stages_uncounted"] = uint8(1)
	}
	f.cost, f.sent, f.ring, f.holds, f.daemons = p.opts.StageCost, p.tps.Sent, p.tps.Ring, p.opts.Holds, map[int]time.Time{}
	return true, nil
}

// load loads the programs on the daemons' system calls, sharing the maps
// the request programs were loaded with, and with sent the program on
// fuse:fuse_request_sent.
func (f *stageFeature) load(t *Tracer, spec *ebpf.CollectionSpec) (err error) {
	if t.funcs != nil {
		if f.holds {
			return option.Errorf("the daemon stage by function needs the stage programs on the daemons' system calls, and {stages} here times the daemons from the kernel's functions: this kernel cannot join them")
		}
		f.kernel, err = t.funcs.loadStages(t, spec)
		return err
	}
	repl := map[string]*ebpf.Map{
		"inflight": t.maps.Inflight, "drops": t.maps.Drops, "daemon_tgids": t.maps.DaemonTgids,
		"daemon_threads": t.maps.DaemonThreads, "stage_table": t.maps.StageTable,
		"stage_fast0": t.maps.StageFast0, "stage_fast1": t.maps.StageFast1,
		"stage_fine0": t.maps.StageFine0, "stage_fine1": t.maps.StageFine1,
		"passthrough_opens": t.maps.PassthroughOpens, "node_names": t.maps.NodeNames, "names_sent": t.maps.NamesSent,
		"stage_stamps": t.maps.StageStamps, "pipe_headers": t.maps.PipeHeaders, "ring_conns": t.maps.RingConns,
		"forgets": t.maps.Forgets, "daemon_held": t.maps.DaemonHeld, "held_by_goroutine": t.maps.HeldByGoroutine,
	}
	opts := &ebpf.CollectionOptions{MapReplacements: repl}
	if f.cost == StagesRawEmpty {
		var p rawFloorPrograms
		if err := spec.LoadAndAssign(&p, opts); err != nil {
			return fmt.Errorf("loading the raw system-call floor programs: %w", err)
		}
		f.floor = &p
		return nil
	}
	var p stagePrograms
	if err := spec.LoadAndAssign(&p, opts); err != nil {
		return kernelLacks(err, "{stages} (the programs on the daemons' system calls)")
	}
	f.progs = &p
	if f.sent {
		var s sentProgram
		if err := spec.LoadAndAssign(&s, opts); err != nil {
			return kernelLacks(err, "{stages} (the program on fuse:fuse_request_sent)")
		}
		f.sentP = &s
	}
	if f.ring { // fuse has the ring's types and io_uring its tracepoints
		var r ringPrograms
		if err := spec.LoadAndAssign(&r, opts); err != nil {
			return kernelLacks(err, "{stages} (the programs on io_uring's tracepoints, for FUSE over io_uring)")
		}
		f.ringP = &r
	}
	return nil
}

func (f *stageFeature) attach() ([]link.Link, error) {
	if f.kernel != nil {
		return f.kernel.attach()
	}
	if f.floor != nil {
		return attachTracing("to the raw system-call tracepoints", f.floor.Enter, f.floor.Exit)
	}
	var links []link.Link
	if f.sentP != nil {
		l, err := attachTracing("to fuse:fuse_request_sent", f.sentP.Sent)
		if err != nil {
			return nil, err
		}
		links = l
	}
	for _, h := range f.progs.hooks(f.sentP != nil) {
		l, err := link.Tracepoint("syscalls", h.event, h.prog, nil)
		if err != nil {
			closeLinks(links)
			return nil, fmt.Errorf("attaching to syscalls:%s: %w", h.event, err)
		}
		links = append(links, l)
	}
	if f.ringP != nil {
		for _, h := range f.ringP.hooks() {
			l, err := attachTracing("to io_uring:"+h.event, h.prog)
			if err != nil {
				closeLinks(links)
				return nil, err
			}
			links = append(links, l...)
		}
	}
	return links, nil
}

func (f *stageFeature) close() error {
	var errs []error
	if f.kernel != nil {
		errs = append(errs, f.kernel.close())
	}
	if f.progs != nil {
		for _, h := range f.progs.hooks(false) {
			errs = append(errs, h.prog.Close())
		}
	}
	if f.sentP != nil {
		errs = append(errs, f.sentP.Sent.Close())
	}
	if f.ringP != nil {
		errs = append(errs, f.ringP.Complete.Close(), f.ringP.Submit.Close())
	}
	if f.floor != nil {
		errs = append(errs, f.floor.Enter.Close(), f.floor.Exit.Close())
	}
	return errors.Join(errs...)
}

// programs are the stage programs attached, by what they run on, for
// ProgramStats.
func (f *stageFeature) programs() map[string]*ebpf.Program {
	out := map[string]*ebpf.Program{}
	if f.kernel != nil {
		return f.kernel.programs()
	}
	if f.progs != nil {
		for _, h := range f.progs.hooks(f.sentP != nil) {
			out["stage:"+h.event] = h.prog
		}
	}
	if f.sentP != nil {
		out["stage:fuse_request_sent"] = f.sentP.Sent
	}
	if f.ringP != nil {
		for _, h := range f.ringP.hooks() {
			out["stage:"+h.event] = h.prog
		}
	}
	if f.floor != nil {
		out["floor:sys_enter"], out["floor:sys_exit"] = f.floor.Enter, f.floor.Exit
	}
	return out
}

// WatchDaemons adds processes to those whose reads of requests and writes of
// replies the stage programs time. A process may be added again.
func (t *Tracer) WatchDaemons(pids []int) error {
	f := t.stages
	if f == nil {
		return nil
	}
	words := map[uint32]uint64{}
	now := time.Now()
	for _, pid := range pids {
		if pid <= 0 || pid >= stagePIDLimit {
			return option.Errorf("process %d is beyond the %d process ids {stages} can watch", pid, stagePIDLimit)
		}
		if _, ok := f.daemons[pid]; ok {
			continue
		}
		f.daemons[pid] = now
		words[uint32(pid/64)] = 0
	}
	for w := range words {
		var bits uint64
		for b := range uint32(64) {
			if _, ok := f.daemons[int(w*64+b)]; ok {
				bits |= 1 << b
			}
		}
		if err := t.maps.DaemonTgids.Put(w, bits); err != nil {
			return fmt.Errorf("watching the daemons: %w", err)
		}
	}
	return nil
}

// Holds is the map of the request each daemon thread or goroutine holds
// (Options.Holds), for ufunc's programs to share; nil without it.
func (t *Tracer) Holds() *ebpf.Map {
	if t.stages == nil || !t.stages.holds {
		return nil
	}
	return t.maps.DaemonHeld
}

// HoldByGoroutine has the stage programs key process pid's holds by
// goroutine: it is a Go daemon, whose goroutine may read a request on one
// thread and answer it from another.
func (t *Tracer) HoldByGoroutine(pid int) error {
	if t.Holds() == nil {
		return nil
	}
	if err := t.maps.HeldByGoroutine.Put(uint32(pid), uint8(1)); err != nil {
		return fmt.Errorf("keeping process %d's requests by goroutine: %w", pid, err)
	}
	return nil
}

// Stages says whether the tracer splits requests into stages.
func (t *Tracer) Stages() bool { return t.stages != nil }

// stageDurations turns a slow request's stages into durations; nil when
// the request was not seen in all three.
func stageDurations(ns [3]uint64) []time.Duration {
	if ns[0] == 0 && ns[1] == 0 && ns[2] == 0 {
		return nil
	}
	return []time.Duration{time.Duration(ns[0]), time.Duration(ns[1]), time.Duration(ns[2])}
}

// InFlight is a request the kernel sent that has not ended.
type InFlight struct {
	Conn, Opcode, PID uint32
	Age               time.Duration
	// Taken and Replied say whether the stage programs saw the daemon read
	// it and begin its reply (--stages only).
	Taken, Replied bool
}

// InFlight returns the requests in flight for at least min.
func (t *Tracer) InFlight(min time.Duration) ([]InFlight, error) {
	slots, err := t.inflightSlots()
	if err != nil {
		return nil, err
	}
	now := kernel.Monotonic()
	var out []InFlight
	for _, s := range slots {
		if s.StartNs == 0 || s.StartNs > now || time.Duration(now-s.StartNs) < min {
			continue
		}
		out = append(out, InFlight{Conn: s.Conn, Opcode: s.Opcode, PID: s.Pid, Age: time.Duration(now - s.StartNs),
			Taken: s.TakenNs != 0, Replied: s.RepliedNs != 0})
	}
	return out, nil
}

// WaitInFlight waits, at most max, for the requests in flight now to end
// (their slots freed or taken by later requests). A request whose
// connection has gone never ends and is not waited for.
func (t *Tracer) WaitInFlight(max time.Duration) error {
	type request struct {
		conn          uint32
		unique, start uint64
	}
	pending := func(want map[request]bool) (map[request]bool, error) {
		slots, err := t.inflightSlots()
		if err != nil {
			return nil, err
		}
		left := map[request]bool{}
		for _, s := range slots {
			r := request{s.Conn, s.Unique, s.StartNs}
			if s.StartNs != 0 && (want == nil || want[r]) {
				left[r] = true
			}
		}
		return left, nil
	}
	left, err := pending(nil)
	if err != nil || len(left) == 0 {
		return err
	}
	if live, err := fuseconn.Live(); err == nil {
		for r := range left {
			if !live[r.conn] {
				delete(left, r)
			}
		}
	}
	for deadline := time.Now().Add(max); len(left) > 0 && time.Now().Before(deadline); {
		time.Sleep(2 * time.Millisecond)
		if left, err = pending(left); err != nil {
			return err
		}
	}
	return nil
}

// read adds to each mount of the records the opens its daemon answered
// with FOPEN_PASSTHROUGH and since when each of its daemons is watched.
// The stages themselves are read with each opcode's totals (recordRead).
func (f *stageFeature) read(t *Tracer, rd *recordRead) error {
	passthrough, _ := t.passthroughOpens() // a count missing leaves the records without it
	var forgets map[uint32]forgetCount
	if t.CountsForgets() {
		forgets, _ = t.forgets()
	}
	for _, r := range rd.records() {
		for i := range r.Meta.Mounts {
			m := &r.Meta.Mounts[i]
			m.PassthroughOpens = passthrough[m.Conn]
			fc := forgets[m.Conn]
			if r == rd.interval {
				prev := f.prevForgets[m.Conn]
				fc = forgetCount{fc.requests - prev.requests, fc.nodes - prev.nodes}
			}
			m.Forgets, m.ForgetNodes = fc.requests, fc.nodes
			for j := range m.Daemons {
				if at, ok := f.daemons[m.Daemons[j].PID]; ok {
					m.Daemons[j].Watched = at
				}
			}
		}
	}
	if rd.interval != nil {
		f.prevForgets = forgets
	}
	return nil
}

// CountsForgets says whether the programs on the daemons' reads of
// /dev/fuse run, which count the FORGET and BATCH_FORGET requests they read
// (not where fuse_request_sent or the kernel's functions end the queue
// stage instead).
func (t *Tracer) CountsForgets() bool {
	return t.stages != nil && t.stages.progs != nil && t.stages.sentP == nil
}

// forgets reads the forgets counted per connection.
func (t *Tracer) forgets() (map[uint32]forgetCount, error) {
	out := map[uint32]forgetCount{}
	var conn uint32
	var c bpf.FuseReqForgetCount
	it := t.maps.Forgets.Iterate()
	for it.Next(&conn, &c) {
		out[conn] = forgetCount{c.Requests, c.Nodes}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading the forgets: %w", err)
	}
	return out, nil
}

// passthroughOpens counts, per connection, the opens its daemon answered
// with FOPEN_PASSTHROUGH (--stages only): those files' reads and writes go
// to the backing file in the kernel and are no FUSE requests.
func (t *Tracer) passthroughOpens() (map[uint32]uint64, error) {
	out := map[uint32]uint64{}
	var conn uint32
	var n uint64
	it := t.maps.PassthroughOpens.Iterate()
	for it.Next(&conn, &n) {
		out[conn] = n
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading the passthrough opens: %w", err)
	}
	return out, nil
}
