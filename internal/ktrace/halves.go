package ktrace

import (
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/fusescope/fusescope/internal/bpf"
	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/profile"
)

// The programs keep the statistics in two halves, by the parity of the
// interval a request ended in (fusereq.h, stats_key). NextInterval moves
// the interval on and reads the half the ended interval wrote, which no
// CPU writes any more: the figures of an interval (its requests, their
// stages, sub-buckets and errnos) are all cut at the epoch's move, so an
// interval's stages never count a request its totals do not, and the
// intervals add up to the run. The whole run is the two halves together:
// the one just read and the other as read at the end of its own last
// interval.

// Extremes are the exact fastest and slowest request of one interval, in
// ns, and of each of its stages.
type Extremes struct {
	Min, Max uint64
	Total    bool // the interval ended requests of this (connection, opcode)
	// Stage holds each stage's, in profile order (queue, daemon, reply),
	// where the interval split a request.
	Stage [3]StageExtremes
}

// StageExtremes are one stage's extremes in an interval.
type StageExtremes struct {
	Min, Max uint64
	Staged   bool
}

// Snapshot reads the cumulative statistics since Start.
func (t *Tracer) Snapshot() (profile.Profile, error) {
	half := t.epoch & 1
	live, err := t.readHalf(half, 0)
	if err != nil {
		return profile.Profile{}, err
	}
	return t.profileOf(live.merged(t.closed[half^1]))
}

// NextInterval ends the interval being measured and starts the next: it
// returns the cumulative statistics at the interval's end, as Snapshot
// does, and the exact extremes of each (connection, opcode) in it, which
// differences of cumulative snapshots cannot give.
func (t *Tracer) NextInterval() (profile.Profile, map[profile.Key]Extremes, error) {
	ended := t.epoch
	if err := t.epochVar.Set(ended + 1); err != nil {
		return profile.Profile{}, nil, fmt.Errorf("starting the next interval: %w", err)
	}
	t.epoch = ended + 1
	// An end program that read the old epoch just before the change still
	// writes into the ended interval's half: programs on a tracepoint run
	// with preemption off, in microseconds, so a short wait lets them
	// finish before that half is read. One that runs later still counts,
	// in the next interval of that parity.
	time.Sleep(epochGrace)
	half := ended & 1
	h, err := t.readHalf(half, ended)
	if err != nil {
		return profile.Profile{}, nil, err
	}
	t.closed[half] = h
	p, err := t.profileOf(h.merged(t.closed[half^1]))
	if err != nil {
		return profile.Profile{}, nil, err
	}
	return p, h.extremes(), nil
}

// epochGrace is how long NextInterval waits for end programs still
// running on the interval that ended.
const epochGrace = time.Millisecond

// halfStats is one half of the statistics, summed over the CPUs.
type halfStats struct {
	ops    map[profile.Key]*opAccum
	fine   map[profile.Key][]uint64
	stages map[profile.Key]*stageAccum
	errnos map[errnoKey]uint64
}

type errnoKey struct {
	op  profile.Key
	err int32
}

// readHalf reads one half of the maps; epoch names the interval whose
// extremes to keep (0: none).
func (t *Tracer) readHalf(half, epoch uint32) (*halfStats, error) {
	h := &halfStats{ops: map[profile.Key]*opAccum{}, stages: map[profile.Key]*stageAccum{}, errnos: map[errnoKey]uint64{}}
	// The stages and sub-buckets before the totals: the end program
	// counts them after a request's total, so that in a half still being
	// written (a live snapshot) they never count one the totals do not.
	if t.stages != nil {
		if err := t.readStages(h, half, epoch); err != nil {
			return nil, err
		}
	}
	if !t.coarse {
		var err error
		if h.fine, err = readFine(pick(half, t.maps.FineFast0, t.maps.FineFast1), 1); err != nil {
			return nil, err
		}
	}
	add := func(conn, opcode uint32, c *bpf.FuseReqOpStats) {
		if c.Count == 0 {
			return
		}
		k := profile.Key{Conn: conn, Opcode: opcode}
		a := h.ops[k]
		if a == nil {
			a = &opAccum{}
			h.ops[k] = a
		}
		a.add(c, epoch)
	}
	err := eachPerCPU(pick(half, t.maps.StatsFast0, t.maps.StatsFast1), func(idx uint32, perCPU []bpf.FuseReqOpStats) {
		for i := range perCPU {
			add(perCPU[i].Conn, idx%fastOps, &perCPU[i])
		}
	})
	if err != nil {
		return nil, fmt.Errorf("reading FUSE statistics: %w", err)
	}
	err = eachKeyPerCPU(t.maps.Stats, func(key bpf.FuseReqStatsKey, perCPU []bpf.FuseReqOpStats) {
		if key.Half == half {
			for i := range perCPU {
				add(key.Conn, key.Opcode, &perCPU[i])
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("reading FUSE statistics: %w", err)
	}
	var ek bpf.FuseReqErrnoKey
	var n uint64
	eit := t.maps.Errnos.Iterate()
	for eit.Next(&ek, &n) {
		if ek.Half == half {
			h.errnos[errnoKey{profile.Key{Conn: ek.Conn, Opcode: ek.Opcode}, ek.Error}] += n
		}
	}
	if err := eit.Err(); err != nil {
		return nil, fmt.Errorf("reading FUSE errors: %w", err)
	}
	return h, nil
}

// readStages reads one half of the stage table and the stages' sub-buckets.
func (t *Tracer) readStages(h *halfStats, half, epoch uint32) error {
	add := func(conn, opcode uint32, c *bpf.FuseReqStageStats) {
		if c.Staged == 0 && c.NotTaken == 0 && c.NotReplied == 0 {
			return
		}
		k := profile.Key{Conn: conn, Opcode: opcode}
		a := h.stages[k]
		if a == nil {
			a = &stageAccum{}
			h.stages[k] = a
		}
		a.add(c, epoch)
	}
	// A (connection, opcode) is in the fast array on the CPUs where it
	// holds its index, in the table on the others.
	err := eachPerCPU(pick(half, t.maps.StageFast0, t.maps.StageFast1), func(idx uint32, perCPU []bpf.FuseReqStageStats) {
		for c := range perCPU {
			add(perCPU[c].Conn, idx%fastOps, &perCPU[c])
		}
	})
	if err != nil {
		return fmt.Errorf("reading the stage statistics: %w", err)
	}
	err = eachKeyPerCPU(t.maps.StageTable, func(key bpf.FuseReqStatsKey, perCPU []bpf.FuseReqStageStats) {
		if key.Half != half {
			return
		}
		for c := range perCPU {
			add(key.Conn, key.Opcode, &perCPU[c])
		}
	})
	if err != nil {
		return fmt.Errorf("reading the stage statistics: %w", err)
	}
	if t.coarse {
		return nil
	}
	fine, err := readFine(pick(half, t.maps.StageFine0, t.maps.StageFine1), len(stageOrder))
	if err != nil {
		return err
	}
	for k, f := range fine {
		op := profile.Key{Conn: k.Conn, Opcode: k.Opcode / uint32(len(stageOrder))}
		if a := h.stages[op]; a != nil {
			a.fine[k.Opcode%uint32(len(stageOrder))] = f
		}
	}
	return nil
}

func pick(half uint32, zero, one *ebpf.Map) *ebpf.Map {
	if half == 0 {
		return zero
	}
	return one
}

// readFine sums the sub-buckets of each (connection, index) over the CPUs
// whose copy of the index it holds; the index is opcode*per+i for arrays
// of per sub-histograms an opcode (the stages': per stage).
func readFine(m *ebpf.Map, per int) (map[profile.Key][]uint64, error) {
	out := map[profile.Key][]uint64{}
	err := eachPerCPU(m, func(idx uint32, perCPU []bpf.FuseReqFineStats) {
		for i := range perCPU {
			f := &perCPU[i]
			if f.Used == 0 {
				continue
			}
			k := profile.Key{Conn: f.Conn, Opcode: idx % (fastOps * uint32(per))}
			sum := out[k]
			if sum == nil {
				sum = make([]uint64, hist.FineLen)
				out[k] = sum
			}
			for j, c := range f.Slots {
				sum[j] += c
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("reading the sub-buckets: %w", err)
	}
	return out, nil
}

// merged is h and o summed, o's interval extremes left out (nil o: h). It
// shares nothing it may change with either.
func (h *halfStats) merged(o *halfStats) *halfStats {
	m := &halfStats{ops: map[profile.Key]*opAccum{}, fine: map[profile.Key][]uint64{},
		stages: map[profile.Key]*stageAccum{}, errnos: map[errnoKey]uint64{}}
	for _, src := range []*halfStats{h, o} {
		if src == nil {
			continue
		}
		for k, a := range src.ops {
			if m.ops[k] == nil {
				m.ops[k] = &opAccum{}
			}
			m.ops[k].merge(a, src == h)
		}
		for k, f := range src.fine {
			m.fine[k] = addFine(m.fine[k], f)
		}
		for k, a := range src.stages {
			if m.stages[k] == nil {
				m.stages[k] = &stageAccum{}
			}
			m.stages[k].merge(a, src == h)
		}
		for k, n := range src.errnos {
			m.errnos[k] += n
		}
	}
	return m
}

func addFine(dst, src []uint64) []uint64 {
	if dst == nil {
		dst = make([]uint64, hist.FineLen)
	}
	for i, c := range src {
		dst[i] += c
	}
	return dst
}

// extremes are the interval extremes h holds.
func (h *halfStats) extremes() map[profile.Key]Extremes {
	out := map[profile.Key]Extremes{}
	for k, a := range h.ops {
		e := Extremes{Min: a.intervalLo, Max: a.intervalHi, Total: a.inInterval}
		if s := h.stages[k]; s != nil {
			for i := range e.Stage {
				e.Stage[i] = StageExtremes{Min: s.intervalLo[i], Max: s.intervalHi[i], Staged: s.inInterval}
			}
		}
		if e.Total || e.Stage[0].Staged {
			out[k] = e
		}
	}
	return out
}

// profileOf turns the statistics of h into a profile, with the drops the
// tracer counted so far.
func (t *Tracer) profileOf(h *halfStats) (profile.Profile, error) {
	var p profile.Profile
	byKey := map[profile.Key]int{}
	for k, a := range h.ops {
		s := profile.OpStats{Conn: k.Conn, Opcode: k.Opcode, Op: fuseproto.Opcode(k.Opcode).String()}
		s.Latency = hist.FromBuckets(a.slots[:], a.sum, a.lo, a.hi)
		// The count is the histogram's: a CPU may be mid-update while we read.
		s.Count = s.Latency.Count
		s.Errors = min(a.errors, s.Count)
		s.ReqBytes, s.ReplyBytes = a.reqBytes, a.replyBytes
		s.URing = min(a.uring, s.Count)
		s.Latency.Fine = h.fine[k]
		if a := h.stages[k]; a != nil {
			a.fill(&s)
		}
		byKey[k] = len(p.Ops)
		p.Ops = append(p.Ops, s)
	}
	for k, n := range h.errnos {
		i, ok := byKey[k.op]
		if !ok {
			continue
		}
		if p.Ops[i].Errnos == nil {
			p.Ops[i].Errnos = map[string]uint64{}
		}
		p.Ops[i].Errnos[kernel.ErrnoName(int64(k.err))] += n
	}
	var drops [dropReasons]uint64
	for i := range drops {
		var vals []uint64
		if err := t.maps.Drops.Lookup(uint32(i), &vals); err != nil {
			return p, fmt.Errorf("reading drop counters: %w", err)
		}
		for _, v := range vals {
			drops[i] += v
		}
	}
	abandoned, err := t.abandoned()
	if err != nil {
		return p, err
	}
	p.Drops = profile.Drops{
		InflightFull: drops[dropInflightFull], UnmatchedEnd: drops[dropUnmatchedEnd],
		StatsFull: drops[dropStatsFull], UniqueZero: drops[dropUniqueZero], ErrnoFull: drops[dropErrnoFull],
		ReapedStale: drops[dropReapedStale], ReapedConnGone: abandoned, StagesFull: drops[dropStagesFull],
		NodesFull: drops[dropNodesFull],
	}
	return p, nil
}

// Sizes from fusereq.h.
const (
	fastOps         = 64    // FAST_OPS: the stats_fast index is conn*64 + opcode
	connBitmapWords = 16384 // CONN_BITMAP_WORDS
)

// opAccum sums one (connection, opcode) over CPUs and maps.
type opAccum struct {
	slots                        [hist.NumBuckets]uint64
	sum, lo, hi, n               uint64
	errors, reqBytes, replyBytes uint64
	uring                        uint64
	// The extremes of one interval, where a CPU's copy has them.
	intervalLo, intervalHi uint64
	inInterval             bool
}

func (a *opAccum) add(c *bpf.FuseReqOpStats, epoch uint32) {
	if epoch != 0 && c.Epoch == epoch {
		a.interval(c.IntervalMinNs, c.IntervalMaxNs)
	}
	a.merge(&opAccum{slots: c.Slots, sum: c.SumNs, lo: c.MinNs, hi: c.MaxNs, n: c.Count,
		errors: c.Errors, reqBytes: c.ReqBytes, replyBytes: c.ReplyBytes, uring: c.Uring}, false)
}

func (a *opAccum) interval(lo, hi uint64) {
	if !a.inInterval || lo < a.intervalLo {
		a.intervalLo = lo
	}
	a.intervalHi = max(a.intervalHi, hi)
	a.inInterval = true
}

// merge adds o to a, with o's interval extremes if withInterval.
func (a *opAccum) merge(o *opAccum, withInterval bool) {
	if o.n == 0 {
		return
	}
	if withInterval && o.inInterval {
		a.interval(o.intervalLo, o.intervalHi)
	}
	if a.n == 0 || o.lo < a.lo {
		a.lo = o.lo
	}
	a.hi = max(a.hi, o.hi)
	a.n += o.n
	a.sum += o.sum
	a.errors += o.errors
	a.reqBytes += o.reqBytes
	a.replyBytes += o.replyBytes
	a.uring += o.uring
	for i, v := range o.slots {
		a.slots[i] += v
	}
}

// stageAccum sums one (connection, opcode)'s stages over CPUs.
type stageAccum struct {
	staged, notTaken, notReplied uint64
	sum, lo, hi                  [3]uint64
	slots                        [3][hist.NumBuckets]uint64
	fine                         [3][]uint64
	// The extremes of one interval, where a CPU's copy has them.
	intervalLo, intervalHi [3]uint64
	inInterval             bool
}

func (a *stageAccum) add(c *bpf.FuseReqStageStats, epoch uint32) {
	o := &stageAccum{staged: c.Staged, notTaken: c.NotTaken, notReplied: c.NotReplied,
		sum: c.SumNs, lo: c.MinNs, hi: c.MaxNs, slots: c.Slots}
	if epoch != 0 && c.Epoch == epoch && c.Staged > 0 {
		o.intervalLo, o.intervalHi, o.inInterval = c.IntervalMinNs, c.IntervalMaxNs, true
	}
	a.merge(o, true)
}

// merge adds o to a, with o's interval extremes if withInterval.
func (a *stageAccum) merge(o *stageAccum, withInterval bool) {
	for i := range 3 {
		if o.staged > 0 {
			if a.staged == 0 || o.lo[i] < a.lo[i] {
				a.lo[i] = o.lo[i]
			}
			a.hi[i] = max(a.hi[i], o.hi[i])
		}
		if withInterval && o.inInterval {
			if !a.inInterval || o.intervalLo[i] < a.intervalLo[i] {
				a.intervalLo[i] = o.intervalLo[i]
			}
			a.intervalHi[i] = max(a.intervalHi[i], o.intervalHi[i])
		}
		a.sum[i] += o.sum[i]
		for j, v := range o.slots[i] {
			a.slots[i][j] += v
		}
		if o.fine[i] != nil {
			a.fine[i] = addFine(a.fine[i], o.fine[i])
		}
	}
	a.inInterval = a.inInterval || (withInterval && o.inInterval)
	a.staged += o.staged
	a.notTaken += o.notTaken
	a.notReplied += o.notReplied
}

// stageOrder is the order of the stages in the maps.
var stageOrder = [3]profile.Stage{profile.StageQueue, profile.StageDaemon, profile.StageReply}

// fill gives an operation its stages.
func (a *stageAccum) fill(op *profile.OpStats) {
	for s, name := range stageOrder {
		h := hist.FromBuckets(a.slots[s][:], a.sum[s], a.lo[s], a.hi[s])
		h.Fine = a.fine[s]
		op.Stages = append(op.Stages, profile.StageLatency{Stage: name, Latency: h})
	}
	op.StageGaps = profile.StageGaps{NotTaken: a.notTaken, NotReplied: a.notReplied}
}
