package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/golden"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
)

// trace --slower's lines: fixed columns, the unit of -m/-u/--ns, errno
// names, and names from the trace quoted where they would split a column
// or reach the terminal raw.
func TestWriteSlowGolden(t *testing.T) {
	at := time.Date(2026, 11, 22, 22, 35, 27, 223_400_000, time.Local)
	reqs := []profile.SlowRequest{
		{End: at, Latency: 41 * time.Microsecond, Conn: 39, Op: "GETATTR", Opcode: 3, NodeID: 1, PID: 8671, Comm: "stat",
			ReqBytes: 56, ReplyBytes: 120, Mount: "/tmp/bmnt"},
		{End: at.Add(time.Second), Latency: 2200 * time.Millisecond, Conn: 39, Op: "LOOKUP", Opcode: 1, NodeID: 1, PID: 12,
			Comm: "evil\x1b[31m", ReqBytes: 43, ReplyBytes: 16, Errno: "ENOENT", Mount: "/mnt/a b"},
		{End: at.Add(2 * time.Second), Latency: 3 * time.Millisecond, Conn: 7, Op: "READ", Opcode: 15, ReqBytes: 80, ReplyBytes: 131088},
	}
	var b bytes.Buffer
	for _, u := range []hist.Unit{hist.Usecs, hist.Msecs} {
		if err := WriteSlowHeader(&b, u); err != nil {
			t.Fatal(err)
		}
		for _, r := range reqs {
			if err := WriteSlow(&b, r, u); err != nil {
				t.Fatal(err)
			}
		}
	}
	golden.Check(t, "slow.golden", b.Bytes())
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if strings.ContainsRune(line, '\x1b') || (!strings.Contains(line, `"`) && len(strings.Fields(line)) != 10) {
			t.Errorf("line %q: a raw control character, or not 10 columns", line)
		}
	}
}
