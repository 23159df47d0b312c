package exporter

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/fusescope/fusescope/internal/profile"
)

func opWith(conn uint32, op string, lat ...time.Duration) profile.OpStats {
	s := profile.OpStats{Conn: conn, Op: op}
	for _, l := range lat {
		s.Latency.Add(uint64(l))
	}
	s.Count = s.Latency.Count
	return s
}

func gather(t *testing.T, c *Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func TestCollector(t *testing.T) {
	lookup := opWith(40, "LOOKUP", 3*time.Microsecond, 300*time.Microsecond, 300*time.Microsecond, 20*time.Second)
	lookup.Errors = 1
	rec := &profile.Record{Schema: profile.Schema,
		Meta: profile.Meta{Start: time.Unix(1e9, 0), Mounts: []profile.Mount{
			{Conn: 40, MountPoint: "/mnt/a", FSType: "fuse.sshfs", Connection: &profile.ConnInfo{Waiting: 2, MaxBackground: 12, CongestionThreshold: 9}},
			{Conn: 41, MountPoint: "/mnt/gone", Gone: true},
			{Conn: 42, MountPoint: "/mnt/b"}, {Conn: 43, MountPoint: "/mnt/c"}}},
		Profile: profile.Profile{Ops: []profile.OpStats{lookup, opWith(41, "READ", time.Millisecond),
			opWith(42, "READ", time.Millisecond), opWith(43, "READ", time.Millisecond, time.Millisecond)}},
		Hung:     []profile.HungRequest{{Conn: 40, Age: time.Millisecond}, {Conn: 40, Age: time.Minute}},
		Programs: []profile.ProgramCost{{Program: "fuse_end", Runtime: 1500 * time.Millisecond, Runs: 10}},
	}
	c := New(func() (*profile.Record, error) { return rec, nil }, "kernel")
	c.MaxMounts, c.InFlight = 2, true
	fams := gather(t, c)

	// Counters: the gone mount has no series; the third present mount is
	// summed under "other".
	reqs := map[string]float64{}
	for _, m := range fams["fusescope_fuse_requests_total"].GetMetric() {
		reqs[label(m, "mount")+" "+label(m, "op")] = m.GetCounter().GetValue()
		if label(m, "side") != "kernel" {
			t.Errorf("side label %q", label(m, "side"))
		}
	}
	if len(reqs) != 3 || reqs["/mnt/a LOOKUP"] != 4 || reqs["/mnt/b READ"] != 1 || reqs["other READ"] != 2 {
		t.Errorf("requests: %v", reqs)
	}
	if got := fams["fusescope_fuse_request_errors_total"].GetMetric()[0].GetCounter().GetValue(); got != 1 {
		t.Errorf("errors %v", got)
	}

	// The LOOKUP histogram: classic buckets at the log2 edges, cumulative;
	// 20 s is past the last (8.6 s) and counts in +Inf alone.
	var h *dto.Histogram
	for _, m := range fams["fusescope_fuse_request_duration_seconds"].GetMetric() {
		if label(m, "op") == "LOOKUP" {
			h = m.GetHistogram()
		}
	}
	if h == nil || h.GetSampleCount() != 4 || math.Abs(h.GetSampleSum()-(20+0.0006+3e-6)) > 1e-9 {
		t.Fatalf("histogram: %v", h)
	}
	b := h.GetBucket()
	if len(b) != lastClassic-firstClassic+1 || b[0].GetUpperBound() != 1.024e-6 || math.Abs(b[len(b)-1].GetUpperBound()-8.589934592) > 1e-12 {
		t.Errorf("classic bounds %v .. %v (%d)", b[0].GetUpperBound(), b[len(b)-1].GetUpperBound(), len(b))
	}
	cum := map[float64]uint64{}
	for _, x := range b {
		cum[x.GetUpperBound()] = x.GetCumulativeCount()
	}
	if cum[2.048e-6] != 0 || cum[4.096e-6] != 1 || cum[0.000262144] != 1 || cum[0.000524288] != 3 || b[len(b)-1].GetCumulativeCount() != 3 {
		t.Errorf("cumulative counts %v", cum)
	}
	// Native: schema 3, every observation in a bucket whose upper bound
	// is within 9% above its log2 bucket's edge.
	if h.GetSchema() != NativeSchema {
		t.Errorf("schema %d", h.GetSchema())
	}
	var total int64
	count, idx := int64(0), int32(0)
	for _, span := range h.GetPositiveSpan() {
		idx += span.GetOffset()
		for i := uint32(0); i < span.GetLength(); i++ {
			count += h.GetPositiveDelta()[total]
			upper := math.Pow(2, float64(idx)/8)
			if count > 0 && !(upper >= 3e-6 && (upper < 4.5e-6 || (upper >= 5.1e-4 && upper < 5.8e-4) || (upper >= 3.4e1 && upper < 3.8e1))) {
				t.Errorf("native bucket %d (upper %g s) holds %d", idx, upper, count)
			}
			total++
			idx++
		}
	}
	var sum int64
	prev := int64(0)
	for _, d := range h.GetPositiveDelta() {
		prev += d
		sum += prev
	}
	if sum+int64(h.GetZeroCount()) != 4 {
		t.Errorf("native buckets hold %d observations, want 4: %v", sum, h)
	}

	// Gauges.
	gauge := func(name, mount string) float64 {
		for _, m := range fams[name].GetMetric() {
			if label(m, "mount") == mount {
				return m.GetGauge().GetValue()
			}
		}
		return -1
	}
	if gauge("fusescope_fuse_connection_waiting", "/mnt/a") != 2 || gauge("fusescope_fuse_connection_max_background", "/mnt/a") != 12 {
		t.Error("fusectl gauges")
	}
	if gauge("fusescope_fuse_requests_in_flight", "/mnt/a") != 2 || gauge("fusescope_fuse_requests_hung", "/mnt/a") != 1 {
		t.Errorf("in flight %v, hung %v", gauge("fusescope_fuse_requests_in_flight", "/mnt/a"), gauge("fusescope_fuse_requests_hung", "/mnt/a"))
	}
	if gauge("fusescope_fuse_requests_in_flight", "/mnt/gone") != -1 {
		t.Error("a gone mount's gauges are still exported")
	}
	if v := fams["fusescope_bpf_program_run_seconds_total"].GetMetric()[0].GetCounter().GetValue(); v != 1.5 {
		t.Errorf("program run time %v s", v)
	}

	// A failed snapshot fails the scrape, with its reason.
	bad := New(func() (*profile.Record, error) { return nil, errors.New("the maps are gone") }, "kernel")
	reg := prometheus.NewRegistry()
	reg.MustRegister(bad)
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "the maps are gone") {
		t.Errorf("failed snapshot: %v", err)
	}
}

// The exposition passes the client library's own lint (promtool's rules).
func TestLint(t *testing.T) {
	rec := &profile.Record{Schema: profile.Schema, Meta: profile.Meta{Mounts: []profile.Mount{{Conn: 40, MountPoint: "/m"}}},
		Profile: profile.Profile{Ops: []profile.OpStats{opWith(40, "READ", time.Millisecond)}}}
	problems, err := testutil.CollectAndLint(New(func() (*profile.Record, error) { return rec, nil }, "kernel"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// BenchmarkScrape is a scrape (collect, encode as Prometheus's text, gzip
// as a scraper asks) of 50 mounts x 40 opcodes, with and without three
// stages each.
func BenchmarkScrape(b *testing.B) {
	for _, stages := range []bool{false, true} {
		b.Run(fmt.Sprintf("stages=%v", stages), func(b *testing.B) {
			rec := &profile.Record{Schema: profile.Schema}
			for conn := uint32(1); conn <= 50; conn++ {
				rec.Meta.Mounts = append(rec.Meta.Mounts, profile.Mount{Conn: conn, MountPoint: fmt.Sprintf("/mnt/m%02d", conn)})
				for op := uint32(1); op <= 40; op++ {
					s := opWith(conn, fmt.Sprintf("OP%02d", op), time.Microsecond, 10*time.Microsecond, time.Millisecond, 100*time.Millisecond)
					for _, st := range []profile.Stage{profile.StageQueue, profile.StageDaemon, profile.StageReply} {
						if stages {
							s.Stages = append(s.Stages, profile.StageLatency{Stage: st, Latency: s.Latency.Clone()})
						}
					}
					rec.Profile.Ops = append(rec.Profile.Ops, s)
				}
			}
			h := Handler(New(func() (*profile.Record, error) { return rec, nil }, "kernel"))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req := httptest.NewRequest("GET", "/metrics", nil)
				req.Header.Set("Accept-Encoding", "gzip")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatal(w.Code)
				}
			}
		})
	}
}

// The series are bounded by default (unbounded, 100 mounts with --stages
// made ~400,000, and a scrape outlasted Prometheus's interval):
// 50 mounts x 40 opcodes with three stages each would make 216,350; the
// default budget labels the first mounts that fit, in connection order,
// sums the others under "other", and the exposition holds as many series
// as the formula says, at most DefaultMaxSeries. No request is lost.
func TestSeriesBudget(t *testing.T) {
	rec := manyMounts(50, 40, true)
	c := New(func() (*profile.Record, error) { return rec, nil }, "kernel")
	c.InFlight = true
	series, reqs := exposition(t, c)
	perOp := opSeries(&rec.Profile.Ops[0])
	perMount := mountGauges + 40*perOp
	labelled := (DefaultMaxSeries - 40*perOp) / perMount // and "other", which has no gauges
	if want := labelled*perMount + 40*perOp; series != want || series > DefaultMaxSeries {
		t.Errorf("%d series of the mounts, want %d: %d mounts labelled and other, %d each, at most %d", series, want, labelled, perMount, DefaultMaxSeries)
	}
	var total float64
	for k, n := range reqs {
		total += n
		mount := strings.Fields(k)[0]
		if mount != OtherMount && mount > fmt.Sprintf("/mnt/m%02d", labelled) {
			t.Errorf("%s has a label of its own, past the first %d mounts", mount, labelled)
		}
	}
	if total != 50*40 {
		t.Errorf("the series count %v requests, want %d", total, 50*40)
	}
	if c.MaxSeries = 0; true {
		if series, _ := exposition(t, c); series != 50*perMount {
			t.Errorf("no bound: %d series, want %d", series, 50*perMount)
		}
	}
}

// A mount keeps its label from scrape to scrape while the series fit, so
// that "other"'s counters do not move back when a mount comes; when they
// no longer fit, the mount labelled last goes back to "other" first.
func TestSeriesBudgetKeepsLabels(t *testing.T) {
	rec := manyMounts(3, 10, false)
	perMount := mountGauges + 10*opSeries(&rec.Profile.Ops[0])
	c := New(func() (*profile.Record, error) { return rec, nil }, "kernel")
	c.InFlight = true
	c.MaxSeries = 2 * perMount // one mount and other, not two
	if _, reqs := exposition(t, c); len(reqs) != 20 || reqs["/mnt/m01 OP01"] != 1 || reqs["other OP01"] != 2 {
		t.Fatalf("first scrape: %v", reqs)
	}
	// A mount with a lower connection number comes: the first keeps its
	// label, and the newcomer is summed.
	rec.Meta.Mounts = append([]profile.Mount{{Conn: 0, MountPoint: "/mnt/m00", Connection: &profile.ConnInfo{}}}, rec.Meta.Mounts...)
	for op := 1; op <= 10; op++ {
		rec.Profile.Ops = append(rec.Profile.Ops, opWith(0, fmt.Sprintf("OP%02d", op), time.Millisecond))
	}
	if _, reqs := exposition(t, c); reqs["/mnt/m01 OP01"] != 1 || reqs["other OP01"] != 3 || reqs["/mnt/m00 OP01"] != 0 {
		t.Errorf("after a new mount: %v", reqs)
	}
	// The labelled mount makes ten more opcodes: it no longer fits beside
	// "other", and goes back to it; the bound holds.
	for op := 11; op <= 20; op++ {
		rec.Profile.Ops = append(rec.Profile.Ops, opWith(1, fmt.Sprintf("OP%02d", op), time.Millisecond))
	}
	if series, reqs := exposition(t, c); reqs["/mnt/m01 OP01"] != 0 || reqs["other OP01"] != 4 || reqs["other OP20"] != 1 || series > c.MaxSeries {
		t.Errorf("after the labelled mount grew: %d series (at most %d) %v", series, c.MaxSeries, reqs)
	}
}

func manyMounts(mounts, ops int, stages bool) *profile.Record {
	rec := &profile.Record{Schema: profile.Schema}
	for conn := uint32(1); conn <= uint32(mounts); conn++ {
		rec.Meta.Mounts = append(rec.Meta.Mounts, profile.Mount{Conn: conn, MountPoint: fmt.Sprintf("/mnt/m%02d", conn), Connection: &profile.ConnInfo{}})
		for op := 1; op <= ops; op++ {
			s := opWith(conn, fmt.Sprintf("OP%02d", op), time.Millisecond)
			if stages {
				for _, st := range []profile.Stage{profile.StageQueue, profile.StageDaemon, profile.StageReply} {
					s.Stages = append(s.Stages, profile.StageLatency{Stage: st, Latency: s.Latency.Clone()})
				}
			}
			rec.Profile.Ops = append(rec.Profile.Ops, s)
		}
	}
	return rec
}

// exposition scrapes c as Prometheus does (the text format) and counts the
// series the mounts make, and each (mount, op)'s requests.
func exposition(t *testing.T, c *Collector) (series int, reqs map[string]float64) {
	t.Helper()
	w := httptest.NewRecorder()
	Handler(c).ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	reqs = map[string]float64{}
	for _, line := range strings.Split(w.Body.String(), "\n") {
		if !strings.HasPrefix(line, "fusescope_fuse_") {
			continue
		}
		series++
		if name, rest, ok := strings.Cut(line, "{"); ok && name == "fusescope_fuse_requests_total" {
			var mount, op string
			for _, kv := range strings.Split(strings.SplitN(rest, "}", 2)[0], ",") {
				k, v, _ := strings.Cut(kv, "=")
				v = strings.Trim(v, `"`)
				switch k {
				case "mount":
					mount = v
				case "op":
					op = v
				}
			}
			var n float64
			fmt.Sscan(strings.Fields(line)[len(strings.Fields(line))-1], &n)
			reqs[mount+" "+op] += n
		}
	}
	return series, reqs
}

// The requests counter splits each (mount, opcode) by the transport that
// carried it: /dev/fuse always, FUSE over io_uring's ring where it carried
// some; the two add up to the requests.
func TestCollectorTransport(t *testing.T) {
	ring := opWith(40, "GETATTR", time.Microsecond, time.Microsecond, time.Microsecond, time.Microsecond)
	ring.URing = 3 // of 4
	dev := opWith(41, "GETATTR", time.Microsecond, time.Microsecond)
	rec := &profile.Record{Schema: profile.Schema,
		Meta: profile.Meta{Start: time.Unix(1e9, 0), Mounts: []profile.Mount{
			{Conn: 40, MountPoint: "/mnt/ring", FSType: "fuse"}, {Conn: 41, MountPoint: "/mnt/dev", FSType: "fuse"},
		}},
		Profile: profile.Profile{Ops: []profile.OpStats{ring, dev}},
	}
	fams := gather(t, New(func() (*profile.Record, error) { return rec, nil }, "kernel"))
	got := map[string]float64{}
	for _, m := range fams["fusescope_fuse_requests_total"].GetMetric() {
		got[label(m, "mount")+" "+label(m, "transport")] = m.GetCounter().GetValue()
	}
	want := map[string]float64{"/mnt/ring dev_fuse": 1, "/mnt/ring io_uring": 3, "/mnt/dev dev_fuse": 2}
	if !maps.Equal(got, want) {
		t.Errorf("requests by mount and transport: %v, want %v", got, want)
	}
}
