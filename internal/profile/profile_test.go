package profile

import (
	"testing"

	"github.com/fusescope/fusescope/internal/hist"
)

func TestOpStatsAdd(t *testing.T) {
	one := func(lat uint64) OpStats {
		s := OpStats{Op: "READ", Count: 1, Errors: 1, ReqBytes: 10, ReplyBytes: 20, Errnos: map[string]uint64{"EIO": 1}}
		s.Latency.Add(lat)
		var q hist.Hist
		q.Add(lat / 2)
		s.Stages = []StageLatency{{Stage: StageQueue, Latency: q}}
		return s
	}
	a, b := one(1000), one(4000)
	sum := OpStats{Op: "READ"}
	sum.Add(&a)
	sum.Add(&b)
	if sum.Count != 2 || sum.Errors != 2 || sum.ReqBytes != 20 || sum.ReplyBytes != 40 || sum.Errnos["EIO"] != 2 ||
		sum.Latency.Count != 2 || sum.Latency.Sum != 5000 || sum.Stage(StageQueue).Count != 2 {
		t.Errorf("%+v", sum)
	}
	// Nothing shared: the first operand's histograms are as they were.
	if a.Latency.Count != 1 || a.Stages[0].Latency.Count != 1 || a.Errnos["EIO"] != 1 {
		t.Errorf("Add changed its operand: %+v", a)
	}
}
