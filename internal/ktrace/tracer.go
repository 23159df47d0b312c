package ktrace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
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
	"github.com/fusescope/fusescope/internal/profile"
)

// Drop reasons: the indices of the drops map, as enum drop_reason in
// internal/bpf/fusereq.h defines them (TestDropReasonsMatchHeader checks).
const (
	dropInflightFull = 0
	dropUnmatchedEnd = 1
	dropStatsFull    = 2
	dropUniqueZero   = 3
	dropErrnoFull    = 4
	dropReapedStale  = 5
	dropStagesFull   = 6
	dropNodesFull    = 7
	dropReasons      = 8
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

	// --stages: the programs on the daemons' system calls (or, for the
	// benchmarks, the raw floor's) and the daemons watched.
	stages     bool
	stageProgs *stagePrograms
	stageSent  *sentProgram // fuse:fuse_request_sent ends the queue stage (7.3)
	rawFloor   *rawFloorPrograms
	daemons    map[int]bool

	// --slower, --files: the program that learns node names, its events.
	namesProg *ebpf.Program
	names     *ringbuf.Reader
	files     bool

	coarse    bool               // no sub-buckets (Options.Coarse)
	pageCache *pageCachePrograms // --page-cache
	calls     *callPrograms      // --calls
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
			return fmt.Errorf("%w: --attach tracepoint uses the classic tracepoints instead", err)
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
	if t.stageSent != nil {
		notes = append(notes, "the queue stage ends at fuse:fuse_request_sent, with no program on the daemons' reads")
	}
	return t.attach, notes
}

// Start checks the kernel, loads the BPF programs with the filters compiled
// in, and attaches them. Close detaches everything.
func Start(opts Options) (*Tracer, error) {
	switch opts.Attach {
	case "", AttachAuto, AttachBTF, AttachTracepoint:
	default:
		return nil, fmt.Errorf("--attach %q: give %s, %s or %s", opts.Attach, AttachAuto, AttachBTF, AttachTracepoint)
	}
	if err := CheckPrivileges(); err != nil {
		return nil, err
	}
	tracefs, err := EnsureTracefs()
	if err != nil {
		return nil, err
	}
	tps, err := CheckTracepoints(tracefs, kernel.Release())
	if err != nil {
		return nil, err
	}
	if !tps.SendHasID && opts.Attach == AttachTracepoint {
		return nil, fmt.Errorf("kernel %s fires fuse:fuse_request_send before the request has its id (Linux 6.12 to 6.17), so the classic tracepoints cannot match a reply to its request: leave out --attach tracepoint (the raw tracepoints find a request by its address)", kernel.Release())
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raising RLIMIT_MEMLOCK: %w", err)
	}
	spec, err := bpf.LoadFuseReq()
	if err != nil {
		return nil, fmt.Errorf("reading the embedded BPF object: %w", err)
	}
	consts := map[string]any{}
	if !tps.SendHasID {
		consts["key_by_address"] = uint8(1)
	}
	if !opts.Stages || tps.SendHasID {
		spec.Maps["stage_stamps"].MaxEntries = 1
	}
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
	reapAge := opts.ReapAge
	if reapAge <= 0 {
		reapAge = DefaultReapAge
	}
	consts["reap_age_ns"] = uint64(reapAge.Nanoseconds())
	if opts.Slower < 0 {
		return nil, fmt.Errorf("--slower %v: give a positive duration, e.g. 10ms", opts.Slower)
	}
	// The programs compiled with --slower's or --stages' code stand in for
	// those without it (no cost when they are off).
	twin := ""
	if opts.Slower > 0 {
		consts["slower_ns"] = uint64(opts.Slower.Nanoseconds())
		twin += "_slow"
	} else {
		// Unused: the smallest the kernel allows.
		spec.Maps["inflight_comm"].MaxEntries = 1
		spec.Maps["slow_reqs"].MaxEntries = uint32(os.Getpagesize())
	}
	if opts.Stages {
		twin += "_stages"
		if opts.StageCost == StagesEmpty {
			consts["stages_empty"] = uint8(1)
		}
	} else {
		for _, m := range []string{"daemon_tgids", "daemon_threads", "stage_table", "stage_fine0", "stage_fine1", "passthrough_opens"} {
			spec.Maps[m].MaxEntries = 1
		}
	}
	if twin != "" {
		for _, name := range []string{"fuse_send", "fuse_end", "fuse_send_btf", "fuse_end_btf"} {
			spec.Programs[name] = spec.Programs[name+twin]
		}
	}
	names := opts.Slower > 0 || opts.Files
	if names && opts.Stages {
		consts["stage_names"] = uint8(1) // READDIRPLUS replies name their entries
	}
	if opts.Files {
		if opts.Attach == AttachTracepoint {
			return nil, fmt.Errorf("--files needs the raw tracepoints with BTF (the classic tracepoints carry no node id): leave out --attach tracepoint")
		}
		spec.Programs["fuse_end_btf"] = spec.Programs["fuse_end_btf"+twin+"_files"]
	} else {
		spec.Maps["node_table"].MaxEntries = 1
	}
	if !names {
		spec.Maps["names_sent"].MaxEntries = 1
		spec.Maps["node_names"].MaxEntries = uint32(os.Getpagesize())
	}
	if !opts.PageCache {
		spec.Maps["page_cache"].MaxEntries = 1
		spec.Maps["pc_reads"].MaxEntries = 1
		if !opts.Calls {
			spec.Maps["pc_conns"].MaxEntries = 1
		}
	}
	if opts.Calls {
		if opts.Attach == AttachTracepoint {
			return nil, fmt.Errorf("--calls needs the raw tracepoints with BTF: leave out --attach tracepoint")
		}
		consts["call_kind"] = callKinds()
		if opts.Comm != "" {
			consts["app_comm_on"] = uint8(1)
		}
	} else {
		for _, m := range []string{"app_tgids", "app_threads", "app_mounts", "call_table", "app_scratch"} {
			spec.Maps[m].MaxEntries = 1
		}
	}
	if opts.Coarse {
		for _, m := range []string{"fine_fast0", "fine_fast1", "stage_fine0", "stage_fine1"} {
			spec.Maps[m].MaxEntries = 1
		}
	}
	t := &Tracer{clock: kernel.NewClock(), coarse: opts.Coarse, byAddress: !tps.SendHasID}
	switch opts.Attach {
	case "", AttachAuto:
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
	if opts.Files && t.attach != AttachBTF {
		t.Close()
		return nil, fmt.Errorf("--files needs the raw tracepoints with BTF (the classic tracepoints carry no node id), which did not load: %v", t.fallback)
	}
	if names && t.attach == AttachBTF {
		if err := t.loadNames(spec, opts.Files); err != nil {
			t.Close()
			return nil, err
		}
	}
	if opts.PageCache {
		if err := t.loadPageCache(spec); err != nil {
			t.Close()
			return nil, err
		}
	}
	if opts.Calls {
		if t.attach != AttachBTF {
			t.Close()
			return nil, fmt.Errorf("--calls needs the raw tracepoints with BTF, which did not load: %v", t.fallback)
		}
		if err := t.loadCalls(spec); err != nil {
			t.Close()
			return nil, err
		}
	}
	if opts.Stages {
		if err := t.loadStages(spec, opts.StageCost, tps.Sent); err != nil {
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
		if t.attach == AttachBTF {
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
	if t.namesProg != nil {
		l, err := link.AttachTracing(link.TracingOptions{Program: t.namesProg})
		if err != nil {
			t.Pause()
			return fmt.Errorf("attaching the names program to fuse:fuse_request_end: %w", err)
		}
		t.links = append(t.links, l)
	}
	if t.stages {
		if err := t.attachStages(); err != nil {
			t.Pause()
			return err
		}
	}
	if t.pageCache != nil {
		if err := t.attachPageCache(); err != nil {
			t.Pause()
			return err
		}
	}
	if t.calls != nil {
		if err := t.attachCalls(); err != nil {
			t.Pause()
			return err
		}
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
	return errors.Join(err, t.send.Close(), t.end.Close(), t.closeStages(), t.closeNames(), t.closePageCache(), t.closeCalls(), t.maps.Close())
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
	if t.stageProgs != nil {
		for _, h := range t.stageProgs.hooks(t.stageSent != nil) {
			progs = append(progs, named{"stage:" + h.event, h.prog})
		}
	}
	if t.stageSent != nil {
		progs = append(progs, named{"stage:fuse_request_sent", t.stageSent.Sent})
	}
	if t.rawFloor != nil {
		progs = append(progs, named{"floor:sys_enter", t.rawFloor.Enter}, named{"floor:sys_exit", t.rawFloor.Exit})
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
