package stats

import (
	"math"
	"slices"

	"golang.org/x/perf/benchmath"
)

// Summary describes one configuration's repeated measurements.
type Summary struct {
	N                 int     `json:"n"`
	Mean              float64 `json:"mean"`
	SD                float64 `json:"sd"`
	Median            float64 `json:"median"`
	Min               float64 `json:"min"`
	Max               float64 `json:"max"`
	CV                float64 `json:"cv"`                           // SD / Mean
	CILow             float64 `json:"ci_low"`                       // 95% interval of the mean (Student's t)
	CIHigh            float64 `json:"ci_high"`                      //
	HalfWidthFraction float64 `json:"half_width_fraction,omitzero"` // (CIHigh - Mean) / Mean
}

// Describe summarises v. With one value the spread is zero and the
// interval is the value itself; with none the summary is empty.
func Describe(v []float64) Summary {
	if len(v) == 0 {
		return Summary{}
	}
	n := float64(len(v))
	var sum float64
	for _, x := range v {
		sum += x
	}
	mean := sum / n
	s := Summary{N: len(v), Mean: mean, Median: Median(v), Min: slices.Min(v), Max: slices.Max(v), CILow: mean, CIHigh: mean}
	if len(v) > 1 {
		var sq float64
		for _, x := range v {
			sq += (x - mean) * (x - mean)
		}
		s.SD = math.Sqrt(sq / (n - 1))
		half := TQuantile975(len(v)-1) * s.SD / math.Sqrt(n)
		s.CILow, s.CIHigh = mean-half, mean+half
		if mean != 0 {
			s.CV = s.SD / math.Abs(mean)
			s.HalfWidthFraction = half / math.Abs(mean)
		}
	}
	return s
}

// Comparison is a configuration against the baseline: the ratio of their
// measurements (x / base) and whether the spread supports a difference.
type Comparison struct {
	// Ratio is the geometric mean of the ratios of runs paired by round
	// (the same position in the interleaved order), with its 95%
	// interval on the log scale; unpaired (two runs of a bench, or
	// samples of different sizes), the ratio of the medians, as
	// benchstat's delta, and no interval.
	Ratio  float64 `json:"ratio"`
	CILow  float64 `json:"ci_low,omitzero"`
	CIHigh float64 `json:"ci_high,omitzero"`
	Paired bool    `json:"paired"`
	// P is the Mann-Whitney U test's p-value that the two samples come
	// from one distribution (benchstat's test: it assumes no normality).
	P float64 `json:"p"`
	// Significant is P < 0.05: otherwise the difference is shown as "~".
	Significant bool `json:"significant"`
	// Note says why no difference could be supported, if so (too few
	// runs for the test to reach 0.05 at all).
	Note string `json:"note,omitempty"`
}

// Alpha is the level below which a difference counts, as benchstat's.
const Alpha = 0.05

// Compare compares x with base; paired says base[i] and x[i] were
// measured in the same round. Values must be positive for the ratio.
func Compare(base, x []float64, paired bool) Comparison {
	var c Comparison
	if paired && len(base) == len(x) && len(x) >= 2 {
		ratios := make([]float64, len(x))
		for i := range x {
			ratios[i] = x[i] / base[i]
		}
		if r, err := SummariseRatios(ratios); err == nil {
			c.Ratio, c.CILow, c.CIHigh, c.Paired = r.GeoMean, r.CILow, r.CIHigh, true
		}
	}
	if !c.Paired {
		if b := Median(base); b != 0 && len(x) > 0 {
			c.Ratio = Median(x) / b
		} else {
			c.Note = "the baseline's figure is 0: no ratio"
		}
	}
	th := benchmath.DefaultThresholds
	// NewSample sorts its values: give it copies.
	cmp := benchmath.AssumeNothing.Compare(benchmath.NewSample(slices.Clone(base), &th), benchmath.NewSample(slices.Clone(x), &th))
	c.P = cmp.P
	c.Significant = cmp.P < cmp.Alpha
	for _, w := range cmp.Warnings {
		if c.Note == "" {
			c.Note = w.Error()
		}
	}
	return c
}

// Delta is the comparison as benchstat prints it: "~" where the spread
// cannot support a difference, else Ratio less 1 in per cent (paired:
// the geometric mean of the rounds' ratios; unpaired: the change of the
// medians, benchstat's own).
func (c Comparison) Delta() string {
	if c.Ratio == 0 && c.Significant {
		return "from 0" // a baseline of 0: no ratio to give
	}
	return benchmath.Comparison{P: c.P, Alpha: Alpha}.FormatDelta(1, c.Ratio)
}

// Disagreement says where the paired interval and the rank test disagree:
// IntervalOnly when the interval excludes 1 but the rank test cannot
// support a difference (p >= 0.05), RankOnly the reverse, "" when they
// agree or there is no interval. The interval pairs the runs by round, so
// drift between rounds, which the unpaired rank test counts as spread,
// cancels in it; the rank test needs at least 4 runs a side to reach 0.05
// at all and assumes nothing of the distribution, where the interval
// assumes the rounds' log ratios are roughly normal, so one round far off
// widens it.
func (c Comparison) Disagreement() string {
	if !c.Paired || c.Ratio == 0 {
		return ""
	}
	excludes := c.CILow > 1 || c.CIHigh < 1
	switch {
	case excludes && !c.Significant:
		return IntervalOnly
	case !excludes && c.Significant:
		return RankOnly
	}
	return ""
}

// The two ways the tests disagree (Comparison.Disagreement).
const (
	IntervalOnly = "interval"
	RankOnly     = "rank"
)
