package ktrace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"github.com/fusescope/fusescope/internal/bpf"
	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/option"
	"github.com/fusescope/fusescope/internal/profile"
)

// Drop reasons: the indices of the drops map, enum drop_reason of
// internal/bpf/fusereq.h as bpf2go generates it.
const (
	dropInflightFull = bpf.FuseReqDropReasonDROP_INFLIGHT_FULL
	dropUnmatchedEnd = bpf.FuseReqDropReasonDROP_UNMATCHED_END
	dropStatsFull    = bpf.FuseReqDropReasonDROP_STATS_FULL
	dropUniqueZero   = bpf.FuseReqDropReasonDROP_UNIQUE_ZERO
	dropErrnoFull    = bpf.FuseReqDropReasonDROP_ERRNO_FULL
	dropReapedStale  = bpf.FuseReqDropReasonDROP_REAPED_STALE
	dropStagesFull   = bpf.FuseReqDropReasonDROP_STAGES_FULL
	dropNodesFull    = bpf.FuseReqDropReasonDROP_NODES_FULL
	dropReasons      = bpf.FuseReqDropReasonDROP_REASONS
)

// DefaultReapAge is how long a request may stay in flight before its slot in
// the bounded in-flight table may be given to another request. Requests of a
// live connection normally end in well under a second; a daemon that holds
// one for minutes is stuck, or dead.
const DefaultReapAge = 10 * time.Minute

// How the programs attach to fuse:fuse_request_send and fuse_request_end.
const (
	// AttachAuto tries AttachBTF and falls back to AttachTracepoint.
	AttachAuto = "auto"
	// AttachBTF attaches to the raw tracepoints with BTF (tp_btf): the
	// programs read the kernel's request directly, and the kernel fills
	// in no trace record. It needs the fuse types in the kernel's BTF.
	AttachBTF = "tp_btf"
	// AttachTracepoint attaches to the classic tracepoints, whose records
	// the kernel fills in for every event: about twice the cost of
	// attaching (docs/performance.md), but no BTF of fuse needed.
	AttachTracepoint = "tracepoint"
)

// Options select what is traced.
type Options struct {
	PID     int                // requesting process (tgid); 0 for all
	Comm    string             // requesting command name; "" for all
	Conns   []uint32           // FUSE connections; empty for all
	Ops     []fuseproto.Opcode // opcodes; empty for all
	ReapAge time.Duration      // 0 means DefaultReapAge
	Attach  string             // AttachAuto (or ""), AttachBTF or AttachTracepoint
	// Slower sends every request that took at least this long to user
	// space whole (ReadSlow); 0 sends none, and costs nothing: the code
	// is removed from the programs at load.
	Slower time.Duration
	// Stages splits each request into queue, daemon and reply by timing
	// the reads of requests and writes of replies of the processes
	// WatchDaemons names; StageCost is for the benchmarks.
	Stages    bool
	StageCost StageCost
	// Holds has the stage programs keep the request each daemon thread
	// (or a Go daemon's goroutine) holds, for ufunc's daemon stage by
	// function (Tracer.Holds).
	Holds bool
	// Files sums each node's requests in the kernel (tp_btf only), and,
	// with Slower, has nodes named from the replies that make entries.
	Files bool
	// PageCache counts the page cache of the connections SetCountedConns
	// names, from the filemap and readahead tracepoints.
	PageCache bool
	// Calls counts the application's file calls on those connections
	// (WatchApplication names its processes, or Comm its command), each
	// joined to the FUSE requests its thread sent during it (tp_btf only).
	Calls bool
	// Coarse keeps the log2 buckets alone, without the sub-buckets that
	// make quantiles precise: for a view that uses no quantiles (the
	// exporter's histograms have log2 buckets), which then reads and
	// holds 2 MB less per CPU, 8 MB with Stages.
	Coarse bool
}

// Tracer holds the loaded programs, their links and maps.
type Tracer struct {
	maps      bpf.FuseReqMaps
	send, end *ebpf.Program
	attach    string // AttachBTF or AttachTracepoint
	byAddress bool   // requests found by their address (kernel.bpf.h's key_by_address)
	fallback  error  // why AttachAuto fell back to the classic tracepoints
	links     []link.Link
	inflight  *ebpf.Memory
	// inflightBuf is the copy of the in-flight table a snapshot reads.
	inflightBuf []byte
	epochVar    *ebpf.Variable // interval_epoch: the interval being measured
	epoch       uint32         // its value
	// closed holds each half of the statistics as read when its last
	// interval ended (halves.go): no CPU writes a half between then and
	// the start of its next interval.
	closed [2]*halfStats
	slow   *ringbuf.Reader
	clock  kernel.Clock // for SlowRequest.End

	coarse bool // no sub-buckets (Options.Coarse)

	// The features the options turned on (feature.go), in the order
	// they load and attach; each also has its own field, nil when off.
	features  []feature
	stages    *stageFeature      // --stages
	names     *nameFeature       // --slower's names, --files
	pageCache *pageCachePrograms // --page-cache
	calls     *callPrograms      // --calls

	funcs *funcMech // on kernel functions (funcs.go), not the tracepoints
}

// btfObjects and tracepointObjects select one pair of programs of the
// object, so that only that pair is loaded (and relocated).
type btfObjects struct {
	bpf.FuseReqMaps
	Send  *ebpf.Program  `ebpf:"fuse_send_btf"`
	End   *ebpf.Program  `ebpf:"fuse_end_btf"`
	Epoch *ebpf.Variable `ebpf:"interval_epoch"`
}

type tracepointObjects struct {
	bpf.FuseReqMaps
	Send  *ebpf.Program  `ebpf:"fuse_send"`
	End   *ebpf.Program  `ebpf:"fuse_end"`
	Epoch *ebpf.Variable `ebpf:"interval_epoch"`
}

// loadPrograms loads the maps and the pair of programs for attach.
func (t *Tracer) loadPrograms(spec *ebpf.CollectionSpec, consts map[string]any, attach string) error {
	switch attach {
	case AttachBTF:
		var o btfObjects
		if err := load(spec, consts, &o, "FUSE tracer (tp_btf)"); err != nil {
			return option.Errorf("%w: {attach} tracepoint uses the classic tracepoints instead", err)
		}
		t.maps, t.send, t.end, t.epochVar = o.FuseReqMaps, o.Send, o.End, o.Epoch
	case AttachTracepoint:
		var o tracepointObjects
		if err := load(spec, consts, &o, "FUSE tracer"); err != nil {
			return err
		}
		t.maps, t.send, t.end, t.epochVar = o.FuseReqMaps, o.Send, o.End, o.Epoch
	}
	t.attach, t.epoch = attach, 1 // the program's initial interval_epoch
	return nil
}

// Attach says how the programs attach: AttachBTF or AttachTracepoint.
func (t *Tracer) Attach() string { return t.attach }

// Fallback is why AttachAuto used the classic tracepoints, or nil.
func (t *Tracer) Fallback() error { return t.fallback }

// Probes says how the programs attached and found requests, with the
// reason where it is not the default (tp_btf, requests by their id), in a
// few words each: what the record's meta.probes and the trace's note say.
func (t *Tracer) Probes() (how string, notes []string) {
	if t.fallback != nil && t.attach == AttachTracepoint {
		notes = append(notes, "the classic tracepoints, as tp_btf did not load ("+t.fallback.Error()+")")
	}
	if t.byAddress {
		notes = append(notes, "requests found by their address: this kernel's fuse_request_send fires before the request has its id (Linux 6.12 to 6.17)")
	}
	if t.funcs != nil {
		notes = append(notes, t.funcs.note())
	}
	if t.stages != nil && t.stages.sentP != nil {
		notes = append(notes, "the queue stage ends at fuse:fuse_request_sent, with no program on the daemons' reads")
	}
	return t.attach, notes
}

// Start checks the kernel, loads the BPF programs with the filters compiled
// in, and attaches them. Close detaches everything.
func Start(opts Options) (*Tracer, error) {
	switch opts.Attach {
	case "", AttachAuto, AttachBTF, AttachTracepoint, AttachFentry, AttachKprobe:
	default:
		return nil, option.Errorf("{attach} %q: give %s, %s, %s, %s or %s", opts.Attach, AttachAuto, AttachBTF, AttachTracepoint, AttachFentry, AttachKprobe)
	}
	if err := CheckPrivileges(); err != nil {
		return nil, err
	}
	tracefs, err := EnsureTracefs()
	if err != nil {
		return nil, err
	}
	// The tracepoints, or before 6.12 (or asked for) the kernel's functions.
	funcs, tps, err := requestEvents(opts, tracefs)
	if err != nil {
		return nil, err
	}
	if !tps.SendHasID && opts.Attach == AttachTracepoint {
		return nil, option.Errorf("kernel %s fires fuse:fuse_request_send before the request has its id (Linux 6.12 to 6.17), so the classic tracepoints cannot match a reply to its request: leave out {attach} tracepoint (the raw tracepoints find a request by its address)", kernel.Release())
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raising RLIMIT_MEMLOCK: %w", err)
	}
	loadSpec := bpf.LoadFuseReq
	if funcs != nil {
		loadSpec = funcs.loadSpec
	}
	spec, err := loadSpec()
	if err != nil {
		return nil, fmt.Errorf("reading the embedded BPF object: %w", err)
	}
	consts := map[string]any{}
	if !tps.SendHasID {
		consts["key_by_address"] = uint8(1)
	}
	if opts.PID > 0 {
		consts["filter_tgid"] = uint32(opts.PID)
	}
	if opts.Comm != "" {
		if len(opts.Comm) > 15 {
			return nil, option.Errorf("{comm} %q is longer than the kernel's 15-character command names: give its first 15 characters", opts.Comm)
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
				return nil, option.Errorf("{op} %s cannot be filtered in the kernel: leave it out of {op}", op)
			}
			mask |= 1 << uint(op)
		}
		consts["filter_op_mask"] = mask
	}
	reapAge := opts.ReapAge
	if reapAge <= 0 {
		reapAge = DefaultReapAge
	}
	consts["reap_age_ns"] = uint64(reapAge.Nanoseconds())
	if opts.Slower < 0 {
		return nil, option.Errorf("{slower} %v: give a positive duration, e.g. 10ms", opts.Slower)
	}
	// The programs compiled with --slower's or --stages' code stand in for
	// those without it (no cost when they are off).
	plan := &loadPlan{spec: spec, consts: consts, opts: opts, tps: tps, tracefs: tracefs}
	if opts.Slower > 0 {
		consts["slower_ns"] = uint64(opts.Slower.Nanoseconds())
		plan.twin += "_slow"
	} else {
		plan.unused("inflight_comm", "slow_reqs")
	}
	if opts.Coarse {
		plan.unused("fine_fast0", "fine_fast1", "stage_fine0", "stage_fine1")
	}
	t := &Tracer{clock: kernel.NewClock(), coarse: opts.Coarse, byAddress: !tps.SendHasID,
		stages: &stageFeature{}, names: &nameFeature{known: nodeNames{}}, pageCache: &pageCachePrograms{}, calls: &callPrograms{}}
	for _, f := range []feature{t.stages, t.names, t.pageCache, t.calls} {
		on, err := f.configure(plan)
		if err != nil {
			return nil, err
		}
		if on {
			t.features = append(t.features, f)
		}
	}
	if !slices.Contains(t.features, feature(t.stages)) {
		t.stages = nil
	}
	if !slices.Contains(t.features, feature(t.names)) {
		t.names = nil
	}
	if !slices.Contains(t.features, feature(t.pageCache)) {
		t.pageCache = nil
	}
	if !slices.Contains(t.features, feature(t.calls)) {
		t.calls = nil
	}
	if plan.twin != "" {
		for _, name := range []string{"fuse_send", "fuse_end", "fuse_send_btf", "fuse_end_btf"} {
			spec.Programs[name] = spec.Programs[name+plan.twin]
		}
	}
	if plan.files {
		spec.Programs["fuse_end_btf"] = spec.Programs["fuse_end_btf"+plan.twin+"_files"]
	}
	switch {
	case funcs != nil:
		err = funcs.loadRequests(t, spec, consts, plan.twin, plan.files)
	case opts.Attach == "" || opts.Attach == AttachAuto:
		if t.fallback = t.loadPrograms(spec, consts, AttachBTF); t.fallback != nil && tps.SendHasID {
			err = t.loadPrograms(spec, consts, AttachTracepoint)
		} else if t.fallback != nil {
			err = t.fallback // the classic tracepoints need the id at send
		}
	default:
		err = t.loadPrograms(spec, consts, opts.Attach)
	}
	if err != nil {
		return nil, err
	}
	for i, f := range t.features {
		if err := f.load(t, spec); err != nil {
			f.close()                   // what it loaded before it failed
			t.features = t.features[:i] // the later ones loaded nothing
			t.Close()
			return nil, err
		}
	}
	if t.inflight, err = t.maps.Inflight.Memory(); err != nil {
		t.Close()
		return nil, fmt.Errorf("mapping the in-flight table: %w", err)
	}
	if opts.Slower > 0 {
		if t.slow, err = ringbuf.NewReader(t.maps.SlowReqs); err != nil {
			t.Close()
			return nil, fmt.Errorf("reading the slow requests: %w", err)
		}
	}
	words := map[uint32]uint64{}
	for _, c := range opts.Conns {
		if c >= connBitmapWords*64 {
			t.Close()
			return nil, fmt.Errorf("FUSE connection %d is beyond the %d the filter can hold", c, connBitmapWords*64)
		}
		words[c/64] |= 1 << (c % 64)
	}
	for w, bits := range words {
		if err := t.maps.FilterConns.Put(w, bits); err != nil {
			t.Close()
			return nil, fmt.Errorf("filtering connections: %w", err)
		}
	}
	if err := t.Resume(); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// Pause detaches the programs and keeps the maps: requests made while paused
// are not counted, and those in flight across a pause end unmatched.
func (t *Tracer) Pause() {
	for _, l := range t.links {
		l.Close()
	}
	t.links = nil
}

// Resume attaches the programs (again).
func (t *Tracer) Resume() error {
	if t.links != nil {
		return nil
	}
	for _, p := range []struct {
		event string
		prog  *ebpf.Program
	}{{"fuse_request_send", t.send}, {"fuse_request_end", t.end}} {
		var l link.Link
		var err error
		if t.funcs != nil {
			l, err = t.funcs.attachEvent(p.event, p.prog)
		} else if t.attach == AttachBTF {
			l, err = link.AttachTracing(link.TracingOptions{Program: p.prog})
		} else {
			l, err = link.Tracepoint("fuse", p.event, p.prog, nil)
		}
		if err != nil {
			t.Pause()
			return fmt.Errorf("attaching to fuse:%s: %w", p.event, err)
		}
		t.links = append(t.links, l)
	}
	for _, f := range t.features {
		links, err := f.attach()
		if err != nil {
			t.Pause()
			return err
		}
		t.links = append(t.links, links...)
	}
	return nil
}

// Close detaches the programs and frees the maps. It is safe to call twice.
func (t *Tracer) Close() error {
	t.Pause()
	var err error
	if t.slow != nil {
		err = t.slow.Close()
	}
	errs := []error{err, t.send.Close(), t.end.Close()}
	for _, f := range t.features {
		errs = append(errs, f.close())
	}
	t.features = nil // Close twice closes once
	return errors.Join(append(errs, t.maps.Close())...)
}

// Slow says whether the tracer sends slow requests (Options.Slower).
func (t *Tracer) Slow() bool { return t.slow != nil }

// ReadSlow calls fn with each slow request sent since the last call, and
// returns without waiting for more.
func (t *Tracer) ReadSlow(fn func(profile.SlowRequest)) error {
	if t.slow == nil {
		return nil
	}
	return drain(t.slow, "the slow requests", func(e *bpf.FuseReqSlowReq) {
		errno := ""
		if e.Error < 0 {
			errno = kernel.ErrnoName(int64(e.Error))
		}
		fn(profile.SlowRequest{
			End:     t.clock.Wall(e.EndNs),
			Latency: time.Duration(e.LatNs), Conn: e.Conn, Op: fuseproto.Opcode(e.Opcode).String(), Opcode: e.Opcode,
			NodeID: e.Nodeid, PID: e.Pid, Comm: cString(e.Comm[:]), ReqBytes: e.ReqLen, ReplyBytes: e.ReplyLen, Errno: errno,
			Stages: stageDurations(e.StageNs), Interval: e.Epoch,
		})
	})
}

// drain calls fn with each record in a ring buffer now, as a T, and returns
// without waiting for more: the programs submit without wakeups, and user
// space reads on a timer.
func drain[T any](r *ringbuf.Reader, what string, fn func(*T)) error {
	var rec ringbuf.Record
	for {
		r.SetDeadline(time.Now())
		if err := r.ReadInto(&rec); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil
			}
			return fmt.Errorf("reading %s: %w", what, err)
		}
		var e T
		if len(rec.RawSample) < int(unsafe.Sizeof(e)) {
			continue
		}
		e = *(*T)(unsafe.Pointer(&rec.RawSample[0]))
		fn(&e)
	}
}

// SlowLost is how many slow requests found the ring buffer full.
func (t *Tracer) SlowLost() (uint64, error) {
	var per []uint64
	if err := t.maps.SlowLost.Lookup(uint32(0), &per); err != nil {
		return 0, fmt.Errorf("reading the slow requests lost: %w", err)
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n, nil
}

// ProgramStat is what the kernel accounted to one of the tracer's programs.
type ProgramStat struct {
	Program string // fuse_send or fuse_end (whichever attach), stage:EVENT (--stages), floor:EVENT
	Runtime time.Duration
	Runs    uint64
}

// ProgramStats returns the run time and run count the kernel accounted to
// each of the tracer's programs; both stay 0 unless
// kernel.bpf_stats_enabled is 1.
func (t *Tracer) ProgramStats() ([]ProgramStat, error) {
	var out []ProgramStat
	type named struct {
		name string
		prog *ebpf.Program
	}
	progs := []named{{"fuse_send", t.send}, {"fuse_end", t.end}}
	for _, f := range t.features {
		fp := f.programs()
		for _, name := range slices.Sorted(maps.Keys(fp)) {
			progs = append(progs, named{name, fp[name]})
		}
	}
	for _, p := range progs {
		st, err := p.prog.Stats()
		if err != nil {
			return nil, err
		}
		out = append(out, ProgramStat{Program: p.name, Runtime: st.Runtime, Runs: st.RunCount})
	}
	return out, nil
}

// abandoned counts requests still in flight on connections that no longer
// exist: they will never end. Their slots are taken over after the reap age.
func (t *Tracer) abandoned() (uint64, error) {
	slots, err := t.inflightSlots()
	if err != nil {
		return 0, err
	}
	live, err := fuseconn.Live()
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, s := range slots {
		if !live[s.Conn] {
			n++
		}
	}
	return n, nil
}

// inflightSlots returns the occupied in-flight slots, read through mmap.
func (t *Tracer) inflightSlots() ([]bpf.FuseReqInflightSlot, error) {
	size := int(unsafe.Sizeof(bpf.FuseReqInflightSlot{}))
	if len(t.inflightBuf) != int(t.inflight.Size()) {
		t.inflightBuf = make([]byte, t.inflight.Size()) // 2.6 MB: kept, not allocated at each snapshot
	}
	buf := t.inflightBuf
	if _, err := t.inflight.ReadAt(buf, 0); err != nil {
		return nil, fmt.Errorf("reading the in-flight table: %w", err)
	}
	var out []bpf.FuseReqInflightSlot
	for off := 0; off+size <= len(buf); off += size {
		if binary.LittleEndian.Uint64(buf[off:]) == 0 {
			continue
		}
		var s bpf.FuseReqInflightSlot
		if _, err := binary.Decode(buf[off:off+size], binary.LittleEndian, &s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
