package e2e

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf ends only the goroutine calling
// it, as the real one does, and keeps the message.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.failed = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

// run calls f with the recorder in a goroutine of its own and returns the
// message it failed with, "" if it did not.
func (r *recorder) run(f func(testing.TB)) string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.failed
}

func TestEventuallyWaitsForTheCondition(t *testing.T) {
	start := time.Now()
	calls := 0
	msg := (&recorder{TB: t}).run(func(tb testing.TB) {
		Eventually(tb, 5*time.Second, "the third call", func() (bool, string) {
			calls++
			return calls == 3, ""
		})
	})
	if msg != "" || calls != 3 {
		t.Errorf("failed %q after %d calls, want it to return at the third", msg, calls)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("three checks took %v: the first waits must be short", took)
	}
}

func TestEventuallyFailsWithTheLastState(t *testing.T) {
	n := 0
	msg := (&recorder{TB: t}).run(func(tb testing.TB) {
		Eventually(tb, 100*time.Millisecond, "n to reach 1000", func() (bool, string) {
			n++
			return false, fmt.Sprintf("n=%d", n)
		})
	})
	if !strings.HasPrefix(msg, "n to reach 1000: not within 100ms; last: n=") || !strings.HasSuffix(msg, fmt.Sprintf("n=%d", n)) {
		t.Errorf("failed with %q, want what it waited for and the last state (n=%d)", msg, n)
	}
}
