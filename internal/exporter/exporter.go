// Package exporter serves records as Prometheus metrics: a collector that
// takes a snapshot (a cumulative record) at each scrape and turns it into
// counters, gauges and histograms, following Prometheus's naming (base
// units, _total counters) and node_exporter's and ebpf_exporter's habits.
package exporter

import (
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
)

// Namespace starts every metric's name.
const Namespace = "fusescope"

// OtherMount labels the series of the mounts beyond Collector.MaxSeries
// or MaxMounts, summed: the number of series stays bounded whatever is
// mounted.
const OtherMount = "other"

// DefaultMaxSeries is the series the mounts may make by default: a scrape
// of that many takes ~50 ms on a 2-vCPU VM, half Prometheus's usual
// interval (docs/performance.md).
const DefaultMaxSeries = 20000

// The series an opcode of a mount makes: its four counters, and 27 per
// histogram (classicBuckets buckets, +Inf, _sum and _count), one for the
// total and one per stage; and the gauges of a mount (mount_info, the
// four of fusectl, in flight and hung).
const (
	classicBuckets  = lastClassic - firstClassic + 1
	histogramSeries = classicBuckets + 3
	opCounters      = 4
	mountGauges     = 7
)

// Classic buckets: the log2 histogram's own edges, 2^10 ns (~1 us) to 2^33
// ns (~8.6 s); a request above the last counts in +Inf alone.
const (
	firstClassic = 9  // bucket 9 holds 512-1023 ns: le 1.024e-06
	lastClassic  = 32 // bucket 32 holds up to 2^33-1 ns: le 8.59
)

// NativeSchema is the native histograms' resolution: 2^3 buckets per
// octave, so a log2 bucket's upper edge falls within 9% of a native one.
const NativeSchema = 3

// Collector is a prometheus.Collector of a source's records.
type Collector struct {
	// Snapshot returns the cumulative record of the run so far.
	Snapshot func() (*profile.Record, error)
	// InFlight: the records' Hung lists every request in flight (the
	// source's Hung threshold at its smallest), which the in-flight and
	// hung gauges count; without it they are left out.
	InFlight bool
	// HungAfter: in-flight requests at least this old count as hung.
	HungAfter time.Duration
	// MaxSeries bounds the series the mounts make: a mount has a label of
	// its own while its series, those of the mounts labelled before it (in
	// connection order) and those of the others summed under "other" fit
	// (series formula: opSeries, mountGauges). A mount once labelled keeps
	// its label while they fit, so that "other"'s counters do not move
	// back. 0: no bound.
	MaxSeries int
	// MaxMounts bounds the mount label the same way by the number of
	// mounts. 0: no bound.
	MaxMounts int

	mu       sync.Mutex
	labelled map[uint32]bool // the mounts with a label of their own
	// Side names what measured the series ("kernel": the tracepoints,
	// "daemon": the lab file system's own timers), a constant label.
	Side string

	descs
}

type descs struct {
	requests, errors, reqBytes, replyBytes, latency, stage *prometheus.Desc
	mountInfo, waiting, maxBackground, congestion, aborted *prometheus.Desc
	inFlight, hung, drops, slowLost                        *prometheus.Desc
	progRuntime, progRuns, snapshotSeconds                 *prometheus.Desc
}

// New returns a collector of snapshot's records.
func New(snapshot func() (*profile.Record, error), side string) *Collector {
	c := &Collector{Snapshot: snapshot, Side: side, HungAfter: 10 * time.Second, MaxSeries: DefaultMaxSeries}
	constLabels := prometheus.Labels{"side": side}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", name), help, labels, constLabels)
	}
	c.descs = descs{
		requests:        d("fuse_requests_total", "FUSE requests that ended, by mount, opcode and the transport that carried them (dev_fuse, io_uring: FUSE over io_uring's ring).", "mount", "op", "transport"),
		errors:          d("fuse_request_errors_total", "FUSE requests answered with an error.", "mount", "op"),
		reqBytes:        d("fuse_request_bytes_total", "Bytes of the requests sent to the daemon, headers included.", "mount", "op"),
		replyBytes:      d("fuse_reply_bytes_total", "Bytes of the daemon's replies, headers included.", "mount", "op"),
		latency:         d("fuse_request_duration_seconds", "FUSE request latency, from the kernel's send to the reply's end.", "mount", "op"),
		stage:           d("fuse_request_stage_duration_seconds", "FUSE request latency by stage: queue (until the daemon read it), daemon (until it wrote the reply), reply.", "mount", "op", "stage"),
		mountInfo:       d("fuse_mount_info", "A traced FUSE mount: its connection, file system type and source.", "mount", "conn", "fstype", "source"),
		waiting:         d("fuse_connection_waiting", "Requests the connection is waiting on (fusectl's waiting).", "mount"),
		maxBackground:   d("fuse_connection_max_background", "The connection's limit of background requests (fusectl).", "mount"),
		congestion:      d("fuse_connection_congestion_threshold", "Background requests at which the kernel sees the connection congested (fusectl).", "mount"),
		aborted:         d("fuse_connection_aborted", "1 when the connection was aborted: its daemon died.", "mount"),
		inFlight:        d("fuse_requests_in_flight", "FUSE requests sent and not yet ended.", "mount"),
		hung:            d("fuse_requests_hung", "FUSE requests in flight for at least the exporter's --hung.", "mount"),
		drops:           d("trace_drops_total", "Requests or events the tracer saw but could not account for, by reason.", "reason"),
		slowLost:        d("trace_slow_requests_lost_total", "Slow requests (--slower) lost: the ring buffer was full."),
		progRuntime:     d("bpf_program_run_seconds_total", "Time the kernel spent in the tracer's BPF programs.", "program"),
		progRuns:        d("bpf_program_runs_total", "Runs of the tracer's BPF programs.", "program"),
		snapshotSeconds: d("scrape_snapshot_duration_seconds", "Time taken to read the tracer's maps for this scrape."),
	}
	return c
}

// Describe sends the fixed descriptors.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.requests, c.errors, c.reqBytes, c.replyBytes, c.latency, c.stage, c.mountInfo,
		c.waiting, c.maxBackground, c.congestion, c.aborted, c.inFlight, c.hung, c.drops, c.slowLost, c.progRuntime, c.progRuns, c.snapshotSeconds} {
		ch <- d
	}
}

// Collect takes a snapshot and sends its metrics. A snapshot that fails
// is an invalid metric, which the handler reports as the scrape's error.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	began := time.Now()
	rec, err := c.Snapshot()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.requests, err)
		return
	}
	took := time.Since(began).Seconds()
	labels := c.mountLabels(rec)
	type opKey struct {
		mount, op string
	}
	// The ops of each (mount label, opcode): one, unless mounts past
	// MaxMounts are summed under "other".
	groups := map[opKey][]*profile.OpStats{}
	var order []opKey
	for i := range rec.Profile.Ops {
		s := &rec.Profile.Ops[i]
		mount, ok := labels[s.Conn]
		if !ok {
			continue // gone: its series leave the output
		}
		k := opKey{mount, s.Op}
		if _, seen := groups[k]; !seen {
			order = append(order, k)
		}
		groups[k] = append(groups[k], s)
	}
	created := rec.Meta.Start
	for _, k := range order {
		s := groups[k][0]
		if len(groups[k]) > 1 {
			s = sumOps(groups[k])
		}
		ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(c.requests, prometheus.CounterValue, float64(s.Count-s.URing), created, k.mount, k.op, "dev_fuse")
		if s.URing > 0 { // a series for the ring where it carried requests
			ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(c.requests, prometheus.CounterValue, float64(s.URing), created, k.mount, k.op, "io_uring")
		}
		ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(c.errors, prometheus.CounterValue, float64(s.Errors), created, k.mount, k.op)
		ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(c.reqBytes, prometheus.CounterValue, float64(s.ReqBytes), created, k.mount, k.op)
		ch <- prometheus.MustNewConstMetricWithCreatedTimestamp(c.replyBytes, prometheus.CounterValue, float64(s.ReplyBytes), created, k.mount, k.op)
		ch <- newHistogram(c.latency, &s.Latency, created, k.mount, k.op)
		for _, st := range []profile.Stage{profile.StageQueue, profile.StageDaemon, profile.StageReply} {
			if h := s.Stage(st); h != nil {
				ch <- newHistogram(c.stage, h, created, k.mount, k.op, string(st))
			}
		}
	}
	c.collectConnections(ch, rec, labels)
	d := rec.Profile.Drops
	for _, r := range []struct {
		reason string
		n      uint64
	}{{"inflight_full", d.InflightFull}, {"unmatched_end", d.UnmatchedEnd}, {"stats_full", d.StatsFull}, {"errno_full", d.ErrnoFull},
		{"unique_zero", d.UniqueZero}, {"reaped_conn_gone", d.ReapedConnGone}, {"reaped_stale", d.ReapedStale},
		{"stages_full", d.StagesFull}, {"nodes_full", d.NodesFull}} {
		ch <- prometheus.MustNewConstMetric(c.drops, prometheus.CounterValue, float64(r.n), r.reason)
	}
	ch <- prometheus.MustNewConstMetric(c.slowLost, prometheus.CounterValue, float64(rec.SlowLost))
	for _, p := range rec.Programs {
		ch <- prometheus.MustNewConstMetric(c.progRuntime, prometheus.CounterValue, p.Runtime.Seconds(), p.Program)
		ch <- prometheus.MustNewConstMetric(c.progRuns, prometheus.CounterValue, float64(p.Runs), p.Program)
	}
	ch <- prometheus.MustNewConstMetric(c.snapshotSeconds, prometheus.GaugeValue, took)
}

// mountLabels labels each present connection with its mount point (conn N
// when it has none this namespace shows), or "other" past MaxSeries or
// MaxMounts.
func (c *Collector) mountLabels(rec *profile.Record) map[uint32]string {
	var conns []uint32
	for _, m := range rec.Meta.Mounts {
		if !m.Gone {
			conns = append(conns, m.Conn)
		}
	}
	if len(rec.Meta.Mounts) == 0 { // a record of a source that names no mounts (the lab daemon's own)
		for _, s := range rec.Profile.Ops {
			if !slices.Contains(conns, s.Conn) {
				conns = append(conns, s.Conn)
			}
		}
	}
	slices.Sort(conns)
	own := c.ownLabels(rec, conns)
	out := map[uint32]string{}
	for _, conn := range conns {
		out[conn] = OtherMount
		if own[conn] {
			out[conn] = rec.Label(conn)
		}
	}
	return out
}

// ownLabels picks the mounts that keep a label of their own: those that
// had one, while they fit (the last labelled go first), then the others
// in connection order, while they fit.
func (c *Collector) ownLabels(rec *profile.Record, conns []uint32) map[uint32]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	perOp := map[uint32]map[string]int{} // conn -> opcode -> its series
	for i := range rec.Profile.Ops {
		s := &rec.Profile.Ops[i]
		if perOp[s.Conn] == nil {
			perOp[s.Conn] = map[string]int{}
		}
		perOp[s.Conn][s.Op] = opSeries(s)
	}
	// fits says whether the mounts of own, each with its series, and the
	// rest summed under "other" stay within the bounds.
	fits := func(own map[uint32]bool) bool {
		if c.MaxMounts > 0 && len(own) > c.MaxMounts {
			return false
		}
		if c.MaxSeries <= 0 {
			return true
		}
		total, other, rest := 0, map[string]int{}, false
		for _, conn := range conns {
			if own[conn] {
				total += mountGauges
				for _, n := range perOp[conn] {
					total += n
				}
				continue
			}
			rest = true
			for op, n := range perOp[conn] {
				other[op] = max(other[op], n)
			}
		}
		if rest { // "other" has no gauges: they are each mount's own
			for _, n := range other {
				total += n
			}
		}
		return total <= c.MaxSeries
	}
	present := map[uint32]bool{}
	for _, conn := range conns {
		present[conn] = true
	}
	own := map[uint32]bool{}
	var kept []uint32
	for conn := range c.labelled {
		if present[conn] {
			own[conn] = true
			kept = append(kept, conn)
		}
	}
	slices.Sort(kept)
	for i := len(kept) - 1; i >= 0 && !fits(own); i-- {
		delete(own, kept[i])
	}
	for _, conn := range conns {
		if own[conn] {
			continue
		}
		own[conn] = true
		if !fits(own) {
			delete(own, conn)
			break // in connection order: a later mount never takes a label an earlier one could not
		}
	}
	c.labelled = own
	return own
}

// opSeries is the series one opcode of a mount makes.
func opSeries(s *profile.OpStats) int {
	return opCounters + histogramSeries*(1+len(s.Stages))
}

func (c *Collector) collectConnections(ch chan<- prometheus.Metric, rec *profile.Record, labels map[uint32]string) {
	inFlight, hung := map[string]int{}, map[string]int{}
	for _, h := range rec.Hung {
		mount, ok := labels[h.Conn]
		if !ok {
			continue
		}
		inFlight[mount]++
		if h.Age >= c.HungAfter {
			hung[mount]++
		}
	}
	seen := map[string]bool{}
	for _, m := range rec.Meta.Mounts {
		mount, ok := labels[m.Conn]
		if !ok || seen[mount] || mount == OtherMount {
			continue
		}
		seen[mount] = true
		ch <- prometheus.MustNewConstMetric(c.mountInfo, prometheus.GaugeValue, 1, mount, strconv.FormatUint(uint64(m.Conn), 10), m.FSType, m.Source)
		if ci := m.Connection; ci != nil {
			ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(ci.Waiting), mount)
			ch <- prometheus.MustNewConstMetric(c.maxBackground, prometheus.GaugeValue, float64(ci.MaxBackground), mount)
			ch <- prometheus.MustNewConstMetric(c.congestion, prometheus.GaugeValue, float64(ci.CongestionThreshold), mount)
			aborted := 0.0
			if ci.Aborted {
				aborted = 1
			}
			ch <- prometheus.MustNewConstMetric(c.aborted, prometheus.GaugeValue, aborted, mount)
		}
		if c.InFlight {
			ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(inFlight[mount]), mount)
			ch <- prometheus.MustNewConstMetric(c.hung, prometheus.GaugeValue, float64(hung[mount]), mount)
		}
	}
}

// histogram is a histogram metric with both kinds of buckets: classic
// (the text format, and scrapers that do not ask for native ones) and
// native (schema NativeSchema, in the protobuf format a scraper asks for).
type histogram struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	h      dto.Histogram
}

func (m *histogram) Desc() *prometheus.Desc { return m.desc }

func (m *histogram) Write(out *dto.Metric) error {
	out.Label = m.labels
	out.Histogram = &m.h
	return nil
}

// newHistogram converts a log2 histogram of nanoseconds.
func newHistogram(desc *prometheus.Desc, h *hist.Hist, created time.Time, labelValues ...string) prometheus.Metric {
	count, sum := h.Count, float64(h.Sum)/1e9
	m := &histogram{desc: desc, labels: prometheus.MakeLabelPairs(desc, labelValues)}
	m.h.SampleCount, m.h.SampleSum = &count, &sum
	cum := uint64(0)
	for i := 0; i < firstClassic; i++ {
		cum += h.Buckets[i]
	}
	for i := firstClassic; i <= lastClassic; i++ {
		cum += h.Buckets[i]
		le := float64(hist.BucketHigh(i)+1) / 1e9
		c := cum
		m.h.Bucket = append(m.h.Bucket, &dto.Bucket{UpperBound: &le, CumulativeCount: &c})
	}
	// Native: each log2 bucket's count goes to the native bucket that
	// holds its upper edge; bucket 0 (0 and 1 ns) to the zero bucket.
	schema, zeroThreshold, zero := int32(NativeSchema), 1e-9, h.Buckets[0]
	m.h.Schema, m.h.ZeroThreshold, m.h.ZeroCount = &schema, &zeroThreshold, &zero
	type nb struct {
		index int32
		count int64
	}
	var native []nb
	for i := 1; i < len(h.Buckets); i++ {
		if h.Buckets[i] == 0 {
			continue
		}
		upper := float64(hist.BucketHigh(i)) / 1e9
		idx := int32(math.Ceil(math.Log2(upper) * (1 << NativeSchema)))
		if n := len(native); n > 0 && native[n-1].index == idx {
			native[n-1].count += int64(h.Buckets[i])
		} else {
			native = append(native, nb{idx, int64(h.Buckets[i])})
		}
	}
	// Spans of consecutive indices, counts as deltas from the previous.
	prev := int64(0)
	for i, b := range native {
		offset := b.index
		if i > 0 {
			offset = b.index - native[i-1].index - 1
		}
		if i == 0 || offset != 0 {
			m.h.PositiveSpan = append(m.h.PositiveSpan, &dto.BucketSpan{Offset: &offset, Length: new(uint32)})
		}
		*m.h.PositiveSpan[len(m.h.PositiveSpan)-1].Length++
		m.h.PositiveDelta = append(m.h.PositiveDelta, b.count-prev)
		prev = b.count
	}
	if len(m.h.PositiveSpan) == 0 && zero == 0 {
		// A histogram with no observations is still a native one.
		offset, length := int32(0), uint32(0)
		m.h.PositiveSpan = []*dto.BucketSpan{{Offset: &offset, Length: &length}}
	}
	if !created.IsZero() {
		m.h.CreatedTimestamp = timestamppb.New(created)
	}
	return m
}

// sumOps sums the statistics of one opcode on several mounts.
func sumOps(ops []*profile.OpStats) *profile.OpStats {
	out := &profile.OpStats{Op: ops[0].Op, Opcode: ops[0].Opcode}
	for _, s := range ops {
		out.Add(s)
	}
	return out
}
