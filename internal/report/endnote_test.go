package report

import (
	"testing"
	"time"
)

func TestEndNote(t *testing.T) {
	for _, c := range []struct {
		interval time.Duration
		count    int
		want     string
	}{
		{time.Second, 0, "Hit Ctrl-C to end."},
		{time.Second, 3, "3 reports, ending in 3s."},
		{300 * time.Millisecond, 1, "1 report, ending in 300ms."},
		{time.Minute, 60, "60 reports, ending in 1h0m0s."},
	} {
		if got := EndNote(c.interval, c.count); got != c.want {
			t.Errorf("EndNote(%v, %d) = %q, want %q", c.interval, c.count, got, c.want)
		}
	}
}
