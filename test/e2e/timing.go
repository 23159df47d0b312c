package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// Timed runs measure, a timing test's measurement, again until what it
// times was not stretched, at most tries times. Other packages' tests run
// beside a timing test (make test runs the packages side by side), and a
// busy machine stretches sleeps, wake-ups and queues: a figure past a
// bound that load can break is measured again rather than failed at once.
// measure fails t itself for what no load explains (a latency below the
// one injected, a count), and returns how load may have stretched the
// rest: nothing when every figure is as wanted.
func Timed(t testing.TB, tries int, measure func() (stretched []string)) {
	t.Helper()
	for try := 1; ; try++ {
		stretched := measure()
		if len(stretched) == 0 || t.Failed() {
			return
		}
		if try == tries {
			t.Errorf("in %d tries, what the test times was past its bounds each time; the last try: %s", tries, strings.Join(stretched, "; "))
			return
		}
		t.Logf("try %d of %d past its bounds (load?): %s", try, tries, strings.Join(stretched, "; "))
	}
}

// Stretched formats one way a figure was past a bound load can break.
func Stretched(format string, args ...any) string { return fmt.Sprintf(format, args...) }
