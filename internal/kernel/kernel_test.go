package kernel

import (
	"testing"
	"time"
)

func TestErrnoName(t *testing.T) {
	for e, want := range map[int64]string{2: "ENOENT", -2: "ENOENT", -61: "ENODATA", 111: "ECONNREFUSED",
		512: "ERESTARTSYS", 516: "ERESTART_RESTARTBLOCK", 517: "E517", -4000: "E4000", 143: "E143"} {
		if got := ErrnoName(e); got != want {
			t.Errorf("ErrnoName(%d) = %s, want %s", e, got, want)
		}
	}
}

// A timestamp taken now is now on the wall clock, and one a second later a
// second later, in both forms.
func TestClock(t *testing.T) {
	c := NewClock()
	before := time.Now()
	ns := Monotonic()
	after := time.Now()
	w := c.Wall(ns)
	if w.Before(before.Add(-time.Millisecond)) || w.After(after.Add(time.Millisecond)) {
		t.Errorf("Wall(now) = %v, not between %v and %v", w, before, after)
	}
	if d := c.Wall(ns + 1e9).Sub(w); d != time.Second {
		t.Errorf("a second later is %v later", d)
	}
	if d := c.Seconds(ns) - float64(w.UnixNano())/1e9; d > 1e-6 || d < -1e-6 {
		t.Errorf("Seconds and Wall differ by %g s", d)
	}
}
