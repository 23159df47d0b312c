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
	if c := Compare(base, fast[:4], false); c.Paired || !near(c.Ratio, 812.0/4/100, 1e-9) {
		t.Errorf("unpaired: %+v, want the ratio of the means", c)
	}
	if c := Compare([]float64{0, 0, 0, 0, 0}, []float64{401, 401, 401, 401, 401}, true); c.Ratio != 0 || c.Delta() != "from 0" || c.Note == "" {
		t.Errorf("a baseline of 0: %+v, delta %q: want no ratio, and why", c, c.Delta())
	}
}

// The p-values and "~" agree with benchstat's own on the same numbers,
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
		ours := Compare(c[0], c[1], true)
		// X/clear-2   100.0n ± 10%   200.0n ± 11%  +100.00% (p=0.008 n=5)
		m := regexp.MustCompile(`X/` + n + `\S*\s.*?(~|[+-][0-9.]+%) \((p=([0-9.]+) )?n=`).FindStringSubmatch(string(out))
		if m == nil {
			t.Fatalf("no line for %s in benchstat's output:\n%s", n, out)
		}
		if (m[1] == "~") != (ours.Delta() == "~") {
			t.Errorf("%s: benchstat %s, ours %s (p=%.3f)", n, m[1], ours.Delta(), ours.P)
		}
		if m[3] != "" && fmt.Sprintf("%.3f", ours.P) != m[3] {
			t.Errorf("%s: benchstat p=%s, ours p=%.3f", n, m[3], ours.P)
		}
	}
}
