package e2e

import "testing"

// Timed measures again while the figures were stretched, stops at the
// first try within bounds, and fails after the last try past them.
func TestTimedTries(t *testing.T) {
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
