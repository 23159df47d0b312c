package e2e

import (
	"testing"
	"time"
)

// Eventually checks at once, then after 10 ms, doubling the wait up to a
// quarter of a second: quick for the conditions that hold soon, cheap for
// the checks that take seconds to hold and cost something (a query to
// Prometheus, a bpftool run).
const (
	firstPoll = 10 * time.Millisecond
	lastPoll  = 250 * time.Millisecond
)

// Eventually checks cond until it holds, and fails t with what was awaited
// and the state cond last described if it does not hold within d. Tests
// wait for conditions this way, never by sleeping for a time that a loaded
// machine may exceed.
func Eventually(t testing.TB, d time.Duration, what string, cond func() (ok bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for wait := firstPoll; ; wait = min(2*wait, lastPoll) {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if state == "" {
				t.Fatalf("%s: not within %v", what, d)
			}
			t.Fatalf("%s: not within %v; last: %s", what, d, state)
		}
		time.Sleep(wait)
	}
}

// WaitFor is Eventually for a condition with no state to describe, within
// 10 s.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Eventually(t, 10*time.Second, what, func() (bool, string) { return cond(), "" })
}
