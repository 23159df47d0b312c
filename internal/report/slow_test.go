package report

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/golden"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
)

func slowSample() []profile.SlowRequest {
	at := time.Date(2026, 11, 22, 22, 35, 27, 223_400_000, time.Local)
	return []profile.SlowRequest{
		{End: at, Latency: 41 * time.Microsecond, Conn: 39, Op: "GETATTR", Opcode: 3, NodeID: 1, PID: 8671, Comm: "stat",
			ReqBytes: 56, ReplyBytes: 120, Mount: "/tmp/bmnt", File: "/"},
		{End: at.Add(time.Second), Latency: 2200 * time.Millisecond, Conn: 39, Op: "LOOKUP", Opcode: 1, NodeID: 1, PID: 12,
			Comm: "evil\x1b[31m", ReqBytes: 43, ReplyBytes: 16, Errno: "ENOENT", Mount: "/mnt/a b"},
		{End: at.Add(2 * time.Second), Latency: 3 * time.Millisecond, Conn: 7, Op: "READ", Opcode: 15, ReqBytes: 80, ReplyBytes: 131088},
	}
}

// trace --slower's lines: fixed columns, the unit of -m/-u/--ns, errno
// names, and names from the trace quoted where they would split a column
// or reach the terminal raw.
func TestWriteSlowGolden(t *testing.T) {
	var b bytes.Buffer
	for _, u := range []hist.Unit{hist.Usecs, hist.Msecs} {
		if err := WriteSlowHeader(&b, u, false); err != nil {
			t.Fatal(err)
		}
		for _, r := range slowSample() {
			if err := WriteSlow(&b, r, u, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	golden.Check(t, "slow.golden", b.Bytes())
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if strings.ContainsRune(line, '\x1b') || (!strings.Contains(line, `"`) && len(strings.Fields(line)) != 11) {
			t.Errorf("line %q: a raw control character, or not 11 columns", line)
		}
	}
}

// trace --slower --stages: three more columns, "-" where a request's
// stages were not seen.
func TestWriteSlowStagesGolden(t *testing.T) {
	var b bytes.Buffer
	reqs := slowSample()
	reqs[0].Stages = []time.Duration{5 * time.Microsecond, 33 * time.Microsecond, 3 * time.Microsecond}
	reqs[1].Stages = []time.Duration{2 * time.Second, 199 * time.Millisecond, time.Millisecond}
	if err := WriteSlowHeader(&b, hist.Usecs, true); err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if err := WriteSlow(&b, r, hist.Usecs, true); err != nil {
			t.Fatal(err)
		}
	}
	golden.Check(t, "slow-stages.golden", b.Bytes())
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if !strings.Contains(line, `"`) && len(strings.Fields(line)) != 14 {
			t.Errorf("line %q: not 14 columns", line)
		}
	}
}

// trace --slower --csv: rows written one at a time as the requests end
// (the live trace) equal the rows of one call (show --csv --table slow),
// and every row has the header's columns.
func TestWriteSlowCSVGolden(t *testing.T) {
	reqs := slowSample()
	var whole, oneByOne bytes.Buffer
	if err := WriteSlowCSV(&whole, true, reqs...); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "slow.csv.golden", whole.Bytes())
	if err := WriteSlowCSV(&oneByOne, true); err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if err := WriteSlowCSV(&oneByOne, false, r); err != nil {
			t.Fatal(err)
		}
	}
	if whole.String() != oneByOne.String() {
		t.Errorf("one by one:\n%s\nat once:\n%s", oneByOne.String(), whole.String())
	}
	rows, err := csv.NewReader(bytes.NewReader(whole.Bytes())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(reqs)+1 || strings.Join(rows[0], ",") != strings.Join(SlowCSVColumns, ",") {
		t.Fatalf("rows %q", rows)
	}
	// A name with a control character is Go-quoted, never written raw.
	if strings.ContainsRune(whole.String(), '\x1b') {
		t.Errorf("a raw control character:\n%s", whole.String())
	}
	comm := rows[2][slices.Index(SlowCSVColumns, "comm")]
	if got, err := strconv.Unquote(comm); err != nil || got != reqs[1].Comm {
		t.Errorf("comm %q does not unquote to %q", comm, reqs[1].Comm)
	}
}
