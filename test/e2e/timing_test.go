package e2e

import (
	"testing"
	"time"
)

// Timed measures again while the figures were stretched, stops at the
// first try within bounds, and fails after the last try past them.
func TestTimedTries(t *testing.T) {
	defer func(was time.Duration) { settleMax = was }(settleMax)
	settleMax = 0 // one half-second look at the load between tries
	tries := 0
	Timed(t, 5, func() []string {
		tries++
		if tries < 3 {
			return []string{Stretched("try %d slow", tries)}
		}
		return nil
	})
	if tries != 3 {
		t.Errorf("measured %d times, want 3 (within bounds at the third)", tries)
	}
	var ft fakeTB
	tries = 0
	Timed(&ft, 2, func() []string { tries++; return []string{"always slow"} })
	if !ft.failed || tries != 2 {
		t.Errorf("past its bounds on every try: measured %d times (want 2), failed %v (want true)", tries, ft.failed)
	}
}

// fakeTB records whether Timed failed it.
type fakeTB struct {
	testing.TB
	failed bool
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Failed() bool          { return f.failed }
func (f *fakeTB) Errorf(string, ...any) { f.failed = true }
func (f *fakeTB) Logf(string, ...any)   {}

// settle reads the machine's idle time, and waits no longer than asked.
func TestSettle(t *testing.T) {
	idle, all := cpuTicks()
	if all == 0 || idle > all {
		t.Fatalf("/proc/stat: idle %d of %d ticks", idle, all)
	}
	start := time.Now()
	settle(time.Second)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("settle(1s) took %v", d)
	}
}
