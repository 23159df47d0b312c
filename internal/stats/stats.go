// Package stats summarises repeated measurements the way fusescope's
// benchmarks report them: paired ratios, their median, and the geometric
// mean with a Student's t confidence interval (a handful of pairs is all a
// noisy machine affords, and the normal 1.96 would overstate what they show).
package stats

import (
	"errors"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// Median is the middle of v, the mean of the two middles for an even count.
// It is NaN for no values.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 0 {
		return (s[m-1] + s[m]) / 2
	}
	return s[m]
}

// Ratios is a summary of positive ratios (A/B of the same pair).
type Ratios struct {
	N                int
	Median, Min, Max float64
	GeoMean          float64
	CILow, CIHigh    float64 // 95% interval of the geometric mean
	AtLeastOne       int     // pairs with a ratio >= 1
}

// ErrRatios says why ratios cannot be summarised.
var ErrRatios = errors.New("stats: need at least two ratios, all positive")

// SummariseRatios summarises ratios on the log scale, where a pair twice as
// slow and one twice as fast cancel out: the geometric mean is exp of the
// mean log ratio, and its interval is mean ± t(0.975, n-1)·sd/√n.
func SummariseRatios(r []float64) (Ratios, error) {
	if len(r) < 2 {
		return Ratios{}, ErrRatios
	}
	var sum float64
	for _, v := range r {
		if !(v > 0) || math.IsInf(v, 1) {
			return Ratios{}, ErrRatios
		}
		sum += math.Log(v)
	}
	n := float64(len(r))
	mean := sum / n
	var sq float64
	for _, v := range r {
		d := math.Log(v) - mean
		sq += d * d
	}
	half := TQuantile975(len(r)-1) * math.Sqrt(sq/(n-1)) / math.Sqrt(n)
	s := Ratios{N: len(r), Median: Median(r), Min: slices.Min(r), Max: slices.Max(r),
		GeoMean: math.Exp(mean), CILow: math.Exp(mean - half), CIHigh: math.Exp(mean + half)}
	for _, v := range r {
		if v >= 1 {
			s.AtLeastOne++
		}
	}
	return s, nil
}

// TQuantile975 is the 97.5th percentile of Student's t with df degrees of
// freedom: the multiplier of a two-sided 95% interval.
func TQuantile975(df int) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(df)}.Quantile(0.975)
}
