package ktrace

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"github.com/fusescope/fusescope/internal/bpf"
	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
	"golang.org/x/sys/unix"
)

// Drop reasons: the indices of the drops map, as enum drop_reason in
// internal/bpf/fusereq.h defines them (TestDropReasonsMatchHeader checks).
const (
	dropInflightFull = 0
	dropUnmatchedEnd = 1
	dropStatsFull    = 2
	dropUniqueZero   = 3
	dropErrnoFull    = 4
	dropReasons      = 5
)

// DefaultReapAge is how long a request may stay in flight before the reaper
// gives up on it. Requests of a live connection normally end in well under a
// second; a daemon that holds one for minutes is stuck, and its entry would
// otherwise occupy the bounded in-flight table forever.
const DefaultReapAge = 10 * time.Minute

// Options select what is traced.
type Options struct {
	PID     int                // requesting process (tgid); 0 for all
	Comm    string             // requesting command name; "" for all
	Conns   []uint32           // FUSE connections; empty for all
	Ops     []fuseproto.Opcode // opcodes; empty for all
	ReapAge time.Duration      // 0 means DefaultReapAge
}

// Tracer holds the loaded programs, their links and maps.
type Tracer struct {
	objs    bpf.FuseReqObjects
	links   []link.Link
	reapAge time.Duration

	mu             sync.Mutex
	reapedConnGone uint64
	reapedStale    uint64
}

// Start checks the kernel, loads the BPF programs with the filters compiled
// in, and attaches them. Close detaches everything.
func Start(opts Options) (*Tracer, error) {
	if err := CheckPrivileges(); err != nil {
		return nil, err
	}
	tracefs, err := EnsureTracefs()
	if err != nil {
		return nil, err
	}
	if err := CheckTracepoints(tracefs, KernelRelease()); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raising RLIMIT_MEMLOCK: %v", err)
	}
	spec, err := bpf.LoadFuseReq()
	if err != nil {
		return nil, fmt.Errorf("reading the embedded BPF object: %v", err)
	}
	consts := map[string]any{}
	if opts.PID > 0 {
		consts["filter_tgid"] = uint32(opts.PID)
	}
	if opts.Comm != "" {
		if len(opts.Comm) > 15 {
			return nil, fmt.Errorf("--comm %q is longer than the kernel's 15-character command names: give its first 15 characters", opts.Comm)
		}
		var comm [16]byte
		copy(comm[:], opts.Comm)
		consts["filter_comm_on"] = uint8(1)
		consts["filter_comm"] = comm
	}
	if len(opts.Conns) > 0 {
		consts["filter_conn_on"] = uint8(1)
	}
	if len(opts.Ops) > 0 {
		var mask uint64
		for _, op := range opts.Ops {
			if op >= 64 {
				return nil, fmt.Errorf("--op %s cannot be filtered in the kernel: leave it out of --op", op)
			}
			mask |= 1 << uint(op)
		}
		consts["filter_op_mask"] = mask
	}
	for name, v := range consts {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("setting %s: %v", name, err)
		}
	}
	t := &Tracer{reapAge: opts.ReapAge}
	if t.reapAge <= 0 {
		t.reapAge = DefaultReapAge
	}
	if err := spec.LoadAndAssign(&t.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("the kernel's verifier rejected the FUSE tracer: %v", strings.Join(ve.Log[max(0, len(ve.Log)-5):], " | "))
		}
		return nil, fmt.Errorf("loading the FUSE tracer into kernel %s: %v", KernelRelease(), err)
	}
	for _, c := range opts.Conns {
		if err := t.objs.FilterConns.Put(c, uint8(1)); err != nil {
			t.Close()
			return nil, fmt.Errorf("filtering connection %d: %v", c, err)
		}
	}
	for _, p := range []struct {
		event string
		prog  *ebpf.Program
	}{{"fuse_request_send", t.objs.FuseSend}, {"fuse_request_end", t.objs.FuseEnd}} {
		l, err := link.Tracepoint("fuse", p.event, p.prog, nil)
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("attaching to fuse:%s: %v", p.event, err)
		}
		t.links = append(t.links, l)
	}
	return t, nil
}

// Close detaches the programs and frees the maps. It is safe to call twice.
func (t *Tracer) Close() error {
	for _, l := range t.links {
		l.Close()
	}
	t.links = nil
	return t.objs.Close()
}

// Programs returns the attached programs (for their run-time statistics).
func (t *Tracer) Programs() map[string]*ebpf.Program {
	return map[string]*ebpf.Program{"fuse_request_send": t.objs.FuseSend, "fuse_request_end": t.objs.FuseEnd}
}

// Snapshot reads the cumulative statistics since Start.
func (t *Tracer) Snapshot() (profile.Profile, error) {
	var p profile.Profile
	var key bpf.FuseReqStatsKey
	var perCPU []bpf.FuseReqOpStats
	byKey := map[profile.Key]int{}
	it := t.objs.Stats.Iterate()
	for it.Next(&key, &perCPU) {
		s := profile.OpStats{Conn: key.Conn, Opcode: key.Opcode, Op: fuseproto.Opcode(key.Opcode).String()}
		var slots [hist.NumBuckets]uint64
		var sum, lo, hi uint64
		for _, c := range perCPU {
			if c.Count == 0 {
				continue
			}
			if s.Count == 0 || c.MinNs < lo {
				lo = c.MinNs
			}
			hi = max(hi, c.MaxNs)
			s.Count += c.Count
			s.Errors += c.Errors
			s.ReqBytes += c.ReqBytes
			s.ReplyBytes += c.ReplyBytes
			sum += c.SumNs
			for i, n := range c.Slots {
				slots[i] += n
			}
		}
		s.Latency = hist.FromBuckets(slots[:], sum, lo, hi)
		// The count is the histogram's: a CPU may be mid-update while we read.
		s.Count = s.Latency.Count
		s.Errors = min(s.Errors, s.Count)
		byKey[s.Key()] = len(p.Ops)
		p.Ops = append(p.Ops, s)
	}
	if err := it.Err(); err != nil {
		return p, fmt.Errorf("reading FUSE statistics: %v", err)
	}
	var ek bpf.FuseReqErrnoKey
	var n uint64
	eit := t.objs.Errnos.Iterate()
	for eit.Next(&ek, &n) {
		i, ok := byKey[profile.Key{Conn: ek.Conn, Opcode: ek.Opcode}]
		if !ok {
			continue
		}
		if p.Ops[i].Errnos == nil {
			p.Ops[i].Errnos = map[string]uint64{}
		}
		p.Ops[i].Errnos[ErrnoName(ek.Error)] += n
	}
	if err := eit.Err(); err != nil {
		return p, fmt.Errorf("reading FUSE errors: %v", err)
	}
	var drops [dropReasons]uint64
	for i := range drops {
		var vals []uint64
		if err := t.objs.Drops.Lookup(uint32(i), &vals); err != nil {
			return p, fmt.Errorf("reading drop counters: %v", err)
		}
		for _, v := range vals {
			drops[i] += v
		}
	}
	t.mu.Lock()
	p.Drops = profile.Drops{
		InflightFull: drops[dropInflightFull], UnmatchedEnd: drops[dropUnmatchedEnd],
		StatsFull: drops[dropStatsFull], UniqueZero: drops[dropUniqueZero], ErrnoFull: drops[dropErrnoFull],
		ReapedConnGone: t.reapedConnGone, ReapedStale: t.reapedStale,
	}
	t.mu.Unlock()
	return p, nil
}

// ErrnoName names a FUSE reply error (a negative errno), e.g. ENOENT.
func ErrnoName(err int32) string {
	e := syscall.Errno(-err)
	if err > 0 {
		e = syscall.Errno(err)
	}
	if name := unix.ErrnoName(e); name != "" {
		return name
	}
	return fmt.Sprintf("E%d", -err)
}

// Reap removes in-flight entries that will never end: their connection is
// gone (aborted, or its daemon died and it was unmounted), or they are older
// than the reaping age. It returns how many it removed.
func (t *Tracer) Reap() (int, error) {
	live, err := LiveConns()
	if err != nil {
		return 0, err
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, err
	}
	now := uint64(ts.Nano())
	var key bpf.FuseReqInflightKey
	var val bpf.FuseReqInflightVal
	var gone, stale []bpf.FuseReqInflightKey
	it := t.objs.Inflight.Iterate()
	for it.Next(&key, &val) {
		switch {
		case !live[key.Conn]:
			gone = append(gone, key)
		case now > val.StartNs && time.Duration(now-val.StartNs) > t.reapAge:
			stale = append(stale, key)
		}
	}
	if err := it.Err(); err != nil {
		return 0, err
	}
	removed := func(keys []bpf.FuseReqInflightKey) uint64 {
		var n uint64
		for _, k := range keys {
			// The end may have raced us; only what we delete counts.
			if t.objs.Inflight.Delete(k) == nil {
				n++
			}
		}
		return n
	}
	g, s := removed(gone), removed(stale)
	t.mu.Lock()
	t.reapedConnGone += g
	t.reapedStale += s
	t.mu.Unlock()
	return int(g + s), nil
}

// InFlight is the number of requests the tracer is waiting on.
func (t *Tracer) InFlight() (int, error) {
	var key bpf.FuseReqInflightKey
	var val bpf.FuseReqInflightVal
	n := 0
	it := t.objs.Inflight.Iterate()
	for it.Next(&key, &val) {
		n++
	}
	return n, it.Err()
}

// Hostname for records.
func Hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}
