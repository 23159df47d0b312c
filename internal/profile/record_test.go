package profile

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/hist"
)

func TestParseRejects(t *testing.T) {
	cases := map[string]string{
		`not json`:                               "not a fusescope record",
		`{"schema":"other/v1"}`:                  "not a fusescope record",
		`{"schema":"fusescope.syscalls/v2"}`:     "not a fusescope record",
		`{"schema":"fusescope.record/v9"}`:       "is newer than this fusescope reads",
		`{"schema":"fusescope.record/v1","x":1}`: "unknown field", // v1 is closed: nothing was added to it
		`{"schema":"fusescope.record/v2","profile":{"ops":[{"conn":1,"op":"LOOKUP","opcode":1,"count":1,"latency":{"unit":"ns","count":1,"sum":5,"min":5,"max":5,"buckets":[0,0,1]},"stages":[{"stage":"queue","latency":{"unit":"ns","count":2,"sum":5,"min":1,"max":4,"buckets":[0,1,1]}}]}]}}`: "stage queue counts 2 requests of 1",
		`{"schema":"fusescope.record/v2","profile":{"ops":[{"conn":1,"op":"LOOKUP","opcode":1,"count":1,"latency":{"unit":"ns","count":1,"sum":5,"min":5,"max":5,"buckets":[0,0,1]},"stages":[{"stage":"total","latency":{"unit":"ns","count":1,"sum":5,"min":5,"max":5,"buckets":[0,0,1]}}]}]}}`: "stage \"total\" appears twice",
		`{"schema":"fusescope.record/v1","profile":{"ops":[{"conn":1,"op":"LOOKUP","opcode":1,"count":2,"latency":{"unit":"ns","count":1,"sum":5,"min":5,"max":5,"buckets":[0,0,1]}}]}}`:                                                                                                          "histogram 1",
		`{"schema":"fusescope.record/v1","profile":{"ops":[{"conn":1,"op":"READ","opcode":1,"count":0,"latency":{"unit":"ns","count":0,"sum":0,"min":0,"max":0,"buckets":[]}}]}}`:                                                                                                                 "want \"LOOKUP\"",
		`{"schema":"fusescope.record/v1","profile":{"ops":[{"conn":1,"op":"LOOKUP","opcode":1,"count":1,"latency":{"unit":"us","count":1,"sum":5,"min":5,"max":5,"buckets":[0,0,1]}}]}}`:                                                                                                          "unit",
	}
	for in, want := range cases {
		_, err := Parse([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%s) = %v, want error containing %q", in, err, want)
		}
	}
}

func TestProfileSub(t *testing.T) {
	var a, b Profile
	var h1, h2 hist.Hist
	h1.Add(100)
	h2 = h1
	h2.Add(5000)
	a.Ops = []OpStats{{Conn: 1, Op: "LOOKUP", Opcode: 1, Count: 1, Latency: h1}}
	b.Ops = []OpStats{{Conn: 1, Op: "LOOKUP", Opcode: 1, Count: 2, Errors: 1, Errnos: map[string]uint64{"ENOENT": 1}, Latency: h2},
		{Conn: 2, Op: "READ", Opcode: 15, Count: 1, Latency: h1}}
	d, err := b.Sub(&a)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Ops) != 2 || d.Ops[0].Count != 1 || d.Ops[0].Latency.Max != 5000 || d.Ops[0].Errnos["ENOENT"] != 1 {
		t.Fatalf("%+v", d)
	}
}

// FuzzParse: the loader never panics, and whatever it accepts survives a
// save and a second load unchanged.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("../report/testdata/record.json.golden"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"schema":"fusescope.record/v1","meta":{},"profile":{"ops":[],"drops":{}}}`))
	f.Add([]byte(`{"schema":"fusescope.record/v1","profile":{"ops":[{"conn":1,"op":"LOOKUP","opcode":1,"count":1,"latency":{"unit":"ns","count":1,"sum":5,"min":5,"max":5,"buckets":[0,0,1]}}]}}`))
	f.Add([]byte(`{"schema":"fusescope.record/v1","profile":{"ops":[]},"slow":[{"end":"2026-11-22T22:35:27.2234Z","latency_ns":2200000,"conn":39,"op":"GETATTR","opcode":3,"node_id":1,"pid":8671,"comm":"stat","req_bytes":56,"reply_bytes":120,"errno":"ENOENT","mount_point":"/tmp/b"}],"slow_lost":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b)
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := r.Write(&buf); err != nil {
			t.Fatal(err)
		}
		r2, err := Parse(buf.Bytes())
		if err != nil {
			t.Fatalf("a written record does not load: %v\n%s", err, buf.Bytes())
		}
		var buf2 bytes.Buffer
		r2.Write(&buf2)
		if !bytes.Equal(buf.Bytes(), buf2.Bytes()) {
			t.Fatalf("record changed on a second round trip")
		}
		// Any record is a stream of one, and twice over a stream of two.
		all, err := ParseAll(append(append(buf.Bytes(), '\n'), buf.Bytes()...))
		if err != nil || len(all) != 2 {
			t.Fatalf("two records in a stream: %d, %v", len(all), err)
		}
	})
}

// FuzzParseAll: a stream of records loads whole, or not at all, without a
// crash; each record it yields loads alone too.
func FuzzParseAll(f *testing.F) {
	one := `{"schema":"fusescope.record/v1","profile":{"ops":[]}}`
	f.Add([]byte(one + "\n" + one + "\n"))
	f.Add([]byte(one + one))
	f.Add([]byte(one + "\n{"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := ParseAll(b)
		if err != nil {
			return
		}
		for _, r := range recs {
			var buf bytes.Buffer
			if err := r.Write(&buf); err != nil {
				t.Fatal(err)
			}
			if _, err := Parse(buf.Bytes()); err != nil {
				t.Fatalf("a record of a stream does not load alone: %v", err)
			}
		}
	})
}

// A quiet interval's record lists no ops as an empty array, not null, and
// reads back.
func TestEmptyProfileJSON(t *testing.T) {
	var b bytes.Buffer
	if err := (&Record{Schema: Schema}).Write(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"ops": []`) {
		t.Errorf("empty profile written as:\n%s", b.String())
	}
	if _, err := Parse(b.Bytes()); err != nil {
		t.Errorf("the empty record does not read back: %v", err)
	}
}

func TestParseAll(t *testing.T) {
	one := `{"schema":"fusescope.record/v1","meta":{"end":"2026-11-22T10:00:01Z"},"profile":{"ops":[]}}`
	two := strings.Replace(one, "10:00:01", "10:00:02", 1)
	recs, err := ParseAll([]byte(one + "\n" + two + "\n"))
	if err != nil || len(recs) != 2 || recs[0].Meta.End.Second() != 1 || recs[1].Meta.End.Second() != 2 {
		t.Fatalf("two lines: %v, %v", recs, err)
	}
	for in, want := range map[string]string{
		"":                       "not a fusescope record: it is empty",
		"  \n":                   "not a fusescope record: it is empty",
		one + "\n{":              "record 2: not a fusescope record: unexpected EOF",
		one + "\n" + `{"a":1}`:   `record 2 of 2: not a fusescope record (schema "", want "fusescope.record/v2")`,
		`{"schema":"fusescope.x`: "not a fusescope record: unexpected EOF",
	} {
		if _, err := ParseAll([]byte(in)); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}

// Records written by fusescope before v2 (testdata/v1: trace -o, trace
// --slower -o, an interval trace's --json lines, fs stats --json, and a
// syscalls --json report) still read, as v2 records that hold what they
// held.
func TestParseReadsV1Records(t *testing.T) {
	for name, want := range map[string]struct {
		records, ops, slow int
		syscalls, fs       bool
	}{
		"trace.json":      {records: 1, ops: 3},
		"trace-slow.json": {records: 1, ops: 5, slow: 12},
		"intervals.jsonl": {records: 2, ops: 1},
		"fs-stats.json":   {records: 1, ops: 14, fs: true},
		"syscalls.json":   {records: 1, syscalls: true},
	} {
		b, err := os.ReadFile("testdata/v1/" + name)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := ParseAll(b)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		ops, slow := 0, 0
		for _, r := range recs {
			if r.Schema != Schema {
				t.Errorf("%s: read as %q, want %q", name, r.Schema, Schema)
			}
			ops += len(r.Profile.Ops)
			slow += len(r.Slow)
		}
		r := recs[0]
		if len(recs) != want.records || ops < want.ops || slow < want.slow || (r.Syscalls != nil) != want.syscalls || (r.Meta.FS != nil) != want.fs {
			t.Errorf("%s: %d records, %d ops, %d slow requests, syscalls %v, fs %v; want %+v", name, len(recs), ops, slow, r.Syscalls != nil, r.Meta.FS != nil, want)
		}
		if want.syscalls && (r.HasRequests() || len(r.Syscalls.Syscalls) == 0 || r.Syscalls.Lines == 0) {
			t.Errorf("%s: the report did not come through: %+v", name, r.Syscalls)
		}
		// Written again, it is a v2 record that reads back the same.
		var buf bytes.Buffer
		if err := r.Write(&buf); err != nil {
			t.Fatal(err)
		}
		again, err := Parse(buf.Bytes())
		if err != nil || !strings.Contains(buf.String(), `"schema": "fusescope.record/v2"`) {
			t.Fatalf("%s rewritten: %v\n%s", name, err, buf.String())
		}
		var buf2 bytes.Buffer
		again.Write(&buf2)
		if buf.String() != buf2.String() {
			t.Errorf("%s: rewritten record changed on reading back", name)
		}
	}
}

// Within v2, a reader ignores fields and sections it does not know: a
// later fusescope's v2 record reads here, with what this version knows.
func TestParseIgnoresUnknownFieldsWithinV2(t *testing.T) {
	in := `{"schema":"fusescope.record/v2","added_later":{"x":1},"findings":{"hits":3},
	"meta":{"tool":"later","source":"s","new_meta":true,"command":["fusescope"]},
	"profile":{"ops":[{"conn":1,"op":"LOOKUP","opcode":1,"count":1,"new_op_field":5,
	  "latency":{"unit":"ns","count":1,"sum":5,"min":5,"max":5,"buckets":[0,0,1]},
	  "stages":[{"stage":"queue","latency":{"unit":"ns","count":1,"sum":2,"min":2,"max":2,"buckets":[0,1]}},{"stage":"a later stage","latency":{"unit":"ns","count":0,"sum":0,"min":0,"max":0,"buckets":[]}}]}],
	  "drops":{"inflight_full":0,"a_later_drop":4}}}`
	r, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	op := r.Profile.Find(1, 1)
	if op == nil || op.Count != 1 || op.Stage(StageQueue) == nil || op.Stage(StageQueue).Sum != 2 || op.Stage(StageDaemon) != nil || op.Stage(StageTotal).Sum != 5 {
		t.Errorf("read %+v", r.Profile)
	}
}

// An interval's stages are the differences of the cumulative ones.
func TestProfileSubStages(t *testing.T) {
	var q1, q2, t1, t2 hist.Hist
	q1.Add(10)
	t1.Add(100)
	q2, t2 = q1, t1
	q2.Add(20)
	t2.Add(300)
	a := Profile{Ops: []OpStats{{Conn: 1, Op: "LOOKUP", Opcode: 1, Count: 1, Latency: t1, Stages: []StageLatency{{StageQueue, q1}}}}}
	b := Profile{Ops: []OpStats{{Conn: 1, Op: "LOOKUP", Opcode: 1, Count: 2, Latency: t2, Stages: []StageLatency{{StageQueue, q2}}}}}
	d, err := b.Sub(&a)
	if err != nil {
		t.Fatal(err)
	}
	if q := d.Ops[0].Stage(StageQueue); q == nil || q.Count != 1 || q.Sum != 20 {
		t.Errorf("the interval's queue stage: %+v", q)
	}
	if b.Ops[0].Stage(StageQueue).Sum != 30 {
		t.Error("Sub changed the later profile's stages")
	}
}

// The page cache's read hit ratio: pages asked of the cache less those added
// are hits, pages FUSE READs fetched (their replies' data) are misses.
func TestPageCacheHitRatio(t *testing.T) {
	r := &Record{}
	r.Profile.Ops = []OpStats{{Conn: 5, Op: "READ", Opcode: 15, Count: 4, ReplyBytes: 4*16 + 4*4096*8}}
	for _, c := range []struct {
		pc   PageCache
		want float64
		ok   bool
	}{
		{PageCache{Conn: 5, ReadPages: 32, Added: 32}, 0, true}, // all fetched, all added: a first read
		{PageCache{Conn: 5, ReadPages: 0, Added: 0}, 0, true},   // direct_io: every page a READ
		{PageCache{Conn: 5, ReadPages: 96, Added: 32}, 64.0 / 96, true},
		{PageCache{Conn: 6, ReadPages: 10}, 1, true},             // nothing fetched
		{PageCache{Conn: 6}, 0, false},                           // nothing read
		{PageCache{Conn: 6, ReadPages: 10, Added: 40}, 0, false}, // written, not read
	} {
		got, ok := r.PageCacheHitRatio(c.pc)
		if got != c.want || ok != c.ok {
			t.Errorf("%+v: %.3f %v, want %.3f %v", c.pc, got, ok, c.want, c.ok)
		}
	}
}

// reaped_conn_gone counts the requests stranded at the window's end: an
// interval's is the later snapshot's, not a difference, which wrapped
// around when requests stranded earlier had been reaped since.
func TestProfileSubStrandedIsAtTheEnd(t *testing.T) {
	earlier := Profile{Drops: Drops{ReapedConnGone: 3, ReapedStale: 1}}
	later := Profile{Drops: Drops{ReapedConnGone: 1, ReapedStale: 4}}
	d, err := later.Sub(&earlier)
	if err != nil {
		t.Fatal(err)
	}
	if d.Drops.ReapedConnGone != 1 || d.Drops.ReapedStale != 3 {
		t.Errorf("interval drops %+v, want 1 stranded at its end and 3 reaped in it", d.Drops)
	}
	// Intervals summed into a run: the stranded are the last one's.
	whole := earlier.Drops
	whole.Add(d.Drops)
	if whole != later.Drops {
		t.Errorf("the intervals' drops summed: %+v, want the run's %+v", whole, later.Drops)
	}
}
