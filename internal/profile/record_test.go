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
		`{"schema":"fusescope.syscalls/v1"}`:     "a fusescope syscalls report",
		`{"schema":"fusescope.record/v9"}`:       "not supported",
		`{"schema":"fusescope.record/v1","x":1}`: "unknown field",
		`{"schema":"fusescope.record/v1","profile":{"ops":[{"conn":1,"op":"LOOKUP","opcode":1,"count":2,"latency":{"unit":"ns","count":1,"sum":5,"min":5,"max":5,"buckets":[0,0,1]}}]}}`: "histogram 1",
		`{"schema":"fusescope.record/v1","profile":{"ops":[{"conn":1,"op":"READ","opcode":1,"count":0,"latency":{"unit":"ns","count":0,"sum":0,"min":0,"max":0,"buckets":[]}}]}}`:        "want \"LOOKUP\"",
		`{"schema":"fusescope.record/v1","profile":{"ops":[{"conn":1,"op":"LOOKUP","opcode":1,"count":1,"latency":{"unit":"us","count":1,"sum":5,"min":5,"max":5,"buckets":[0,0,1]}}]}}`: "unit",
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
		var csv bytes.Buffer
		if err := r.WriteCSV(&csv, false, true); err != nil {
			t.Fatal(err)
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
		one + "\n" + `{"a":1}`:   `record 2 of 2: not a fusescope record (schema "", want "fusescope.record/v1")`,
		`{"schema":"fusescope.x`: "not a fusescope record: unexpected EOF",
	} {
		if _, err := ParseAll([]byte(in)); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}
