package ktrace

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/fusescope/fusescope/internal/kernel"
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

// stagePIDLimit is the number of process ids the daemons' bitmap holds
// (DAEMON_BITMAP_WORDS * 64, the kernel's PID_MAX_LIMIT).
const stagePIDLimit = 65536 * 64

// WatchDaemons adds processes to those whose reads of requests and writes of
// replies the stage programs time. A process may be added again.
func (t *Tracer) WatchDaemons(pids []int) error {
	if !t.stages {
		return nil
	}
	words := map[uint32]uint64{}
	for _, pid := range pids {
		if pid <= 0 || pid >= stagePIDLimit {
			return fmt.Errorf("process %d is beyond the %d process ids --stages can watch", pid, stagePIDLimit)
		}
		if t.daemons[pid] {
			continue
		}
		t.daemons[pid] = true
		words[uint32(pid/64)] = 0
	}
	for w := range words {
		var bits uint64
		for b := range uint32(64) {
			if t.daemons[int(w*64+b)] {
				bits |= 1 << b
			}
		}
		if err := t.maps.DaemonTgids.Put(w, bits); err != nil {
			return fmt.Errorf("watching the daemons: %w", err)
		}
	}
	return nil
}

// Stages says whether the tracer splits requests into stages.
func (t *Tracer) Stages() bool { return t.stages }

// attachStages attaches the programs on the daemons' system calls.
func (t *Tracer) attachStages() error {
	if t.rawFloor != nil {
		for _, p := range []*ebpf.Program{t.rawFloor.Enter, t.rawFloor.Exit} {
			l, err := link.AttachTracing(link.TracingOptions{Program: p})
			if err != nil {
				return fmt.Errorf("attaching to the raw system-call tracepoints: %w", err)
			}
			t.links = append(t.links, l)
		}
		return nil
	}
	if t.stageSent != nil {
		l, err := link.AttachTracing(link.TracingOptions{Program: t.stageSent.Sent})
		if err != nil {
			return fmt.Errorf("attaching to fuse:fuse_request_sent: %w", err)
		}
		t.links = append(t.links, l)
	}
	for _, h := range t.stageProgs.hooks(t.stageSent != nil) {
		l, err := link.Tracepoint("syscalls", h.event, h.prog, nil)
		if err != nil {
			return fmt.Errorf("attaching to syscalls:%s: %w", h.event, err)
		}
		t.links = append(t.links, l)
	}
	return nil
}

func (t *Tracer) closeStages() error {
	var errs []error
	if t.stageProgs != nil {
		for _, h := range t.stageProgs.hooks(false) {
			errs = append(errs, h.prog.Close())
		}
	}
	if t.stageSent != nil {
		errs = append(errs, t.stageSent.Sent.Close())
	}
	if t.rawFloor != nil {
		errs = append(errs, t.rawFloor.Enter.Close(), t.rawFloor.Exit.Close())
	}
	return errors.Join(errs...)
}

// loadStages loads the programs on the daemons' system calls, sharing the
// maps the request programs were loaded with, and with sent the program on
// fuse:fuse_request_sent.
func (t *Tracer) loadStages(spec *ebpf.CollectionSpec, cost StageCost, sent bool) error {
	t.stages = true
	t.daemons = map[int]bool{}
	repl := map[string]*ebpf.Map{
		"inflight": t.maps.Inflight, "drops": t.maps.Drops, "daemon_tgids": t.maps.DaemonTgids,
		"daemon_threads": t.maps.DaemonThreads, "stage_table": t.maps.StageTable,
		"stage_fine0": t.maps.StageFine0, "stage_fine1": t.maps.StageFine1,
		"passthrough_opens": t.maps.PassthroughOpens, "node_names": t.maps.NodeNames, "names_sent": t.maps.NamesSent,
		"stage_stamps": t.maps.StageStamps,
	}
	opts := &ebpf.CollectionOptions{MapReplacements: repl}
	if cost == StagesRawEmpty {
		var p rawFloorPrograms
		if err := spec.LoadAndAssign(&p, opts); err != nil {
			return fmt.Errorf("loading the raw system-call floor programs: %w", err)
		}
		t.rawFloor = &p
		return nil
	}
	var p stagePrograms
	if err := spec.LoadAndAssign(&p, opts); err != nil {
		return kernelLacks(err, "--stages (the programs on the daemons' system calls)")
	}
	t.stageProgs = &p
	if sent {
		var s sentProgram
		if err := spec.LoadAndAssign(&s, opts); err != nil {
			return kernelLacks(err, "--stages (the program on fuse:fuse_request_sent)")
		}
		t.stageSent = &s
	}
	return nil
}

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

// PassthroughOpens counts, per connection, the opens its daemon answered with
// FOPEN_PASSTHROUGH (--stages only): those files' reads and writes go to the
// backing file in the kernel and are no FUSE requests.
func (t *Tracer) PassthroughOpens() (map[uint32]uint64, error) {
	out := map[uint32]uint64{}
	if !t.stages {
		return out, nil
	}
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
