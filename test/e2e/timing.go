package e2e

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
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
		if idle, waited := settle(settleMax); waited > 0 {
			t.Logf("waited %v for the machine's load to ease (%.1f of %d cores idle)", waited.Round(time.Millisecond), idle, runtime.NumCPU())
		}
	}
}

// settleMax is the longest Timed waits between tries for the load to ease.
var settleMax = 20 * time.Second

// settle waits, at most max, for a half-second in which the machine left
// at least half a core idle, polling /proc/stat: measured again at once,
// a figure that load stretched finds the same load (under make test,
// another package's busiest minute). It returns the idle cores of the last
// half-second and how long it waited.
func settle(max time.Duration) (idle float64, waited time.Duration) {
	start := time.Now()
	for {
		idle0, all0 := cpuTicks()
		time.Sleep(500 * time.Millisecond) // the window measured
		idle1, all1 := cpuTicks()
		if all1 > all0 {
			idle = float64(idle1-idle0) / float64(all1-all0) * float64(runtime.NumCPU())
		}
		if idle >= 0.5 || time.Since(start) >= max || all1 <= all0 {
			return idle, time.Since(start) - 500*time.Millisecond
		}
	}
}

// cpuTicks are the machine's idle (idle and iowait) and all CPU ticks so
// far, from /proc/stat's first line.
func cpuTicks() (idle, all uint64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseUint(f, 10, 64)
		all += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return idle, all
}

// Stretched formats one way a figure was past a bound load can break.
func Stretched(format string, args ...any) string { return fmt.Sprintf(format, args...) }
