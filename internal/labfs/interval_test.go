package labfs

import (
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
)

func statsRecord(end time.Time, lookups []uint64, requests uint64, counters map[string]uint64) *profile.Record {
	var h hist.Hist
	for _, ns := range lookups {
		h.Add(ns)
	}
	return &profile.Record{
		Schema: profile.Schema,
		Meta:   profile.Meta{End: end, FS: &profile.FSInfo{Requests: requests, HeapBytes: requests, Counters: counters}},
		Profile: profile.Profile{Ops: []profile.OpStats{{Conn: 5, Op: "LOOKUP", Opcode: 1,
			Count: uint64(len(lookups)), Latency: h}}},
	}
}

// An interval holds the requests and counter increments between two
// records, gauges as they stand at its end.
func TestInterval(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 23, 0, 0, 0, time.UTC)
	prev := statsRecord(t0, []uint64{1000, 2000}, 10, map[string]uint64{"md_cache_hits": 7, "inodes": 40, "write_behind_max_depth": 3})
	cur := statsRecord(t0.Add(time.Second), []uint64{1000, 2000, 5000, 9000, 9000}, 16,
		map[string]uint64{"md_cache_hits": 9, "inodes": 35, "write_behind_max_depth": 4, "md_cache_misses": 2})
	in, err := Interval(prev, cur)
	if err != nil {
		t.Fatal(err)
	}
	if !in.Meta.Start.Equal(t0) || !in.Meta.End.Equal(t0.Add(time.Second)) {
		t.Errorf("window %v - %v", in.Meta.Start, in.Meta.End)
	}
	if len(in.Profile.Ops) != 1 || in.Profile.Ops[0].Count != 3 || in.Profile.Ops[0].Latency.Count != 3 || in.Profile.Ops[0].Latency.Sum != 23000 {
		t.Errorf("ops %+v, want 3 LOOKUPs of 23 us in all", in.Profile.Ops)
	}
	want := map[string]uint64{"md_cache_hits": 2, "md_cache_misses": 2, "inodes": 35, "write_behind_max_depth": 4}
	for k, v := range want {
		if in.Meta.FS.Counters[k] != v {
			t.Errorf("%s %d, want %d", k, in.Meta.FS.Counters[k], v)
		}
	}
	if in.Meta.FS.Requests != 6 || in.Meta.FS.HeapBytes != 16 {
		t.Errorf("requests %d (want 6), heap %d (want the end's, 16)", in.Meta.FS.Requests, in.Meta.FS.HeapBytes)
	}
	if cur.Meta.FS.Counters["md_cache_hits"] != 9 || cur.Profile.Ops[0].Count != 5 {
		t.Error("Interval changed its input")
	}
}
