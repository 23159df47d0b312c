package stats

import (
	"math"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
}

// The t quantiles of a printed table (two-sided 95%).
func TestTQuantile975(t *testing.T) {
	for df, want := range map[int]float64{1: 12.706, 4: 2.776, 7: 2.365, 29: 2.045, 1000: 1.962} {
		if got := TQuantile975(df); math.Abs(got-want) > 0.001 {
			t.Errorf("t(0.975, %d) = %.4f, want %.3f", df, got, want)
		}
	}
}

func TestSummariseRatios(t *testing.T) {
	// Log ratios ln2, -ln2, ln2, -ln2: geometric mean 1, sd ln2·√(4/3).
	s, err := SummariseRatios([]float64{2, 0.5, 2, 0.5})
	if err != nil {
		t.Fatal(err)
	}
	half := 3.182446 * math.Ln2 * math.Sqrt(4.0/3) / 2
	if math.Abs(s.GeoMean-1) > 1e-12 || math.Abs(s.CIHigh-math.Exp(half)) > 1e-4 || math.Abs(s.CILow-math.Exp(-half)) > 1e-4 {
		t.Errorf("got %+v, want geomean 1 in [%.4f, %.4f]", s, math.Exp(-half), math.Exp(half))
	}
	if s.Median != 1.25 || s.Min != 0.5 || s.Max != 2 || s.AtLeastOne != 2 || s.N != 4 {
		t.Errorf("got %+v", s)
	}
	// Identical ratios: a zero-width interval at that ratio.
	s, _ = SummariseRatios([]float64{1.1, 1.1, 1.1})
	if math.Abs(s.CILow-1.1) > 1e-12 || math.Abs(s.CIHigh-1.1) > 1e-12 {
		t.Errorf("constant ratios: %+v", s)
	}
	for _, bad := range [][]float64{nil, {1}, {1, 0}, {1, -2}, {1, math.NaN()}, {1, math.Inf(1)}} {
		if _, err := SummariseRatios(bad); err == nil {
			t.Errorf("SummariseRatios(%v) gave no error", bad)
		}
	}
}
