package stats

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(math.Abs(b), 1e-12) }

// A sample worked by hand: mean 5, sd = sqrt(32/7), t(0.975, 7) = 2.3646.
func TestDescribeKnownSample(t *testing.T) {
	s := Describe([]float64{2, 4, 4, 4, 5, 5, 7, 9})
	sd := math.Sqrt(32.0 / 7)
	half := 2.364624 * sd / math.Sqrt(8)
	for name, c := range map[string][2]float64{
		"mean": {s.Mean, 5}, "sd": {s.SD, sd}, "median": {s.Median, 4.5}, "min": {s.Min, 2}, "max": {s.Max, 9},
		"cv": {s.CV, sd / 5}, "ci low": {s.CILow, 5 - half}, "ci high": {s.CIHigh, 5 + half},
	} {
		if !near(c[0], c[1], 1e-5) {
			t.Errorf("%s = %v, want %v", name, c[0], c[1])
		}
	}
	if one := Describe([]float64{3}); one.SD != 0 || one.CILow != 3 || one.CIHigh != 3 {
		t.Errorf("one value: %+v", one)
	}
	if (Describe(nil) != Summary{}) {
		t.Error("no values: want an empty summary")
	}
}

// Paired ratios are taken round by round; a clear difference is
// significant, one the spread cannot support is "~", and three runs a
// side are too few for the rank test to reach 0.05 at all.
func TestCompare(t *testing.T) {
	base := []float64{100, 110, 90, 105, 95}
	fast := []float64{200, 221, 179, 212, 188}
	c := Compare(base, fast, true)
	if !c.Paired || !near(c.Ratio, 2, 0.01) || c.CILow > c.Ratio || c.CIHigh < c.Ratio || !c.Significant || c.Delta() == "~" {
		t.Errorf("twice as fast: %+v, delta %s", c, c.Delta())
	}
	same := []float64{104, 96, 108, 93, 101}
	if c := Compare(base, same, true); c.Significant || c.Delta() != "~" {
		t.Errorf("the same: %+v, delta %s", c, c.Delta())
	}
	if c := Compare(base[:3], fast[:3], true); c.Significant || c.Note == "" {
		t.Errorf("three runs a side: %+v, want no difference and a note why", c)
	}
	if c := Compare(base, fast[:4], false); c.Paired || !near(c.Ratio, 206.0/100, 1e-9) {
		t.Errorf("unpaired: %+v, want the ratio of the medians (benchstat's)", c)
	}
	if c := Compare([]float64{0, 0, 0, 0, 0}, []float64{401, 401, 401, 401, 401}, true); c.Ratio != 0 || c.Delta() != "from 0" || c.Note == "" {
		t.Errorf("a baseline of 0: %+v, delta %q: want no ratio, and why", c, c.Delta())
	}
}

// The paired interval and the rank test disagree both ways, and say so:
// a baseline that drifts from round to round with a configuration 10%
// faster in every round (the interval excludes 1, the ranks overlap), and
// runs whose ranks separate fully while one round's ratio is far off the
// others (the rank test finds a difference, the interval includes 1).
func TestDisagreement(t *testing.T) {
	drift := []float64{100, 150, 200, 250, 300}
	faster := []float64{110, 165, 220, 275, 330}
	if c := Compare(drift, faster, true); c.Disagreement() != IntervalOnly || c.Significant || c.CILow <= 1 {
		t.Errorf("drift: %+v, disagreement %q, want %q", c, c.Disagreement(), IntervalOnly)
	}
	base := []float64{100, 104, 101, 103, 102}
	apart := []float64{200, 105, 106, 107, 108}
	if c := Compare(base, apart, true); c.Disagreement() != RankOnly || !c.Significant || c.CILow > 1 {
		t.Errorf("one round far off: %+v, disagreement %q, want %q", c, c.Disagreement(), RankOnly)
	}
	fast := []float64{200, 221, 179, 212, 188}
	if c := Compare([]float64{100, 110, 90, 105, 95}, fast, true); c.Disagreement() != "" {
		t.Errorf("twice as fast: the tests agree, got %q", c.Disagreement())
	}
	if c := Compare(drift, faster, false); c.Disagreement() != "" {
		t.Errorf("unpaired: no interval to disagree with, got %q", c.Disagreement())
	}
}

// The p-values, "~" and the deltas of two runs compared unpaired (as diff
// compares them) agree with benchstat's own on the same numbers,
// written as Go benchmark results (FUSESCOPE_BENCHSTAT names the binary;
// otherwise go run builds it from the module this one requires).
func TestCompareAgreesWithBenchstat(t *testing.T) {
	if testing.Short() {
		t.Skip("builds benchstat")
	}
	cases := map[string][2][]float64{
		"clear":   {{100, 110, 90, 105, 95}, {200, 221, 179, 212, 188}},
		"none":    {{100, 110, 90, 105, 95}, {104, 96, 108, 93, 101}},
		"overlap": {{100, 102, 98, 101, 99, 103}, {103, 105, 101, 104, 102, 106}},
		"few":     {{10, 11, 12}, {20, 21, 22}},
		// The medians move by +49.02%, the means by +195.29%: benchstat's
		// delta is the medians'.
		"skewed": {{100, 101, 102, 103, 104}, {150, 151, 152, 153, 900}},
	}
	dir := t.TempDir()
	write := func(name string, side int) string {
		var b strings.Builder
		for n, c := range cases {
			for _, v := range c[side] {
				fmt.Fprintf(&b, "BenchmarkX/%s 1 %g ns/op\n", n, v)
			}
		}
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(b.String()), 0o644)
		return p
	}
	a, b := write("a.txt", 0), write("b.txt", 1)
	cmd := exec.Command("go", "run", "golang.org/x/perf/cmd/benchstat", a, b)
	if bin := os.Getenv("FUSESCOPE_BENCHSTAT"); bin != "" {
		cmd = exec.Command(bin, a, b)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("benchstat: %v\n%s", err, out)
	}
	for n, c := range cases {
		// Two runs compared as diff compares them: unpaired.
		ours := Compare(c[0], c[1], false)
		// X/clear-2   100.0n ± 10%   200.0n ± 11%  +100.00% (p=0.008 n=5)
		m := regexp.MustCompile(`X/` + n + `\S*\s.*?(~|[+-][0-9.]+%) \((p=([0-9.]+) )?n=`).FindStringSubmatch(string(out))
		if m == nil {
			t.Fatalf("no line for %s in benchstat's output:\n%s", n, out)
		}
		if m[1] != ours.Delta() {
			t.Errorf("%s: benchstat %s, ours %s (p=%.3f)", n, m[1], ours.Delta(), ours.P)
		}
		if m[3] != "" && fmt.Sprintf("%.3f", ours.P) != m[3] {
			t.Errorf("%s: benchstat p=%s, ours p=%.3f", n, m[3], ours.P)
		}
	}
}
