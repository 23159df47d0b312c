// Package hist is fusescope's one latency histogram: 64 log2 buckets of
// nanoseconds, the layout the BPF programs, the lab file system's timers, the
// records and the exporter all share. Bucket i holds [2^i, 2^(i+1)) ns and
// bucket 0 holds 0 and 1, as in libbpf-tools' log2l().
package hist

import (
	"errors"
	"math"
	"math/bits"
)

// NumBuckets is the number of log2 buckets; 2^64 ns covers every uint64.
const NumBuckets = 64

// Hist is a log2 histogram of nanosecond values with exact count, sum, min and
// max. The zero value is an empty histogram ready to use.
type Hist struct {
	Buckets [NumBuckets]uint64
	Count   uint64
	Sum     uint64 // ns
	Min     uint64 // ns; meaningful only when Count > 0
	Max     uint64 // ns
}

// Bucket returns the index of the bucket that holds v.
func Bucket(v uint64) int {
	if v < 2 {
		return 0
	}
	return bits.Len64(v) - 1
}

// BucketLow is the smallest value bucket i holds.
func BucketLow(i int) uint64 {
	if i == 0 {
		return 0
	}
	return 1 << uint(i)
}

// BucketHigh is the largest value bucket i holds (inclusive).
func BucketHigh(i int) uint64 {
	if i >= NumBuckets-1 {
		return math.MaxUint64
	}
	return 1<<uint(i+1) - 1
}

// Add records one value of v nanoseconds.
func (h *Hist) Add(v uint64) {
	if h.Count == 0 || v < h.Min {
		h.Min = v
	}
	if v > h.Max {
		h.Max = v
	}
	h.Buckets[Bucket(v)]++
	h.Count++
	h.Sum += v
}

// Merge adds every value of o to h.
func (h *Hist) Merge(o *Hist) {
	if o.Count == 0 {
		return
	}
	wasEmpty := h.Count == 0
	for i, c := range o.Buckets {
		h.Buckets[i] += c
	}
	h.Count += o.Count
	h.Sum += o.Sum
	if wasEmpty || o.Min < h.Min {
		h.Min = o.Min
	}
	if o.Max > h.Max {
		h.Max = o.Max
	}
}

// ErrNotSubset is returned by Sub when the histogram to subtract holds values
// the other does not (the two are not snapshots of one growing histogram).
var ErrNotSubset = errors.New("hist: subtrahend is not an earlier snapshot")

// Sub returns h - earlier, the values added between two snapshots of one
// cumulative histogram (interval views). Buckets, count and sum are exact.
// Min and max are exact when the cumulative extreme moved between the
// snapshots (the interval holds the new one); otherwise they are bounds:
// the edge of the difference's lowest or highest bucket, or the cumulative
// extreme where that is tighter. SetExtremes makes them exact where the
// interval's own extremes were measured.
func (h *Hist) Sub(earlier *Hist) (Hist, error) {
	var d Hist
	if earlier.Count > h.Count || earlier.Sum > h.Sum {
		return d, ErrNotSubset
	}
	lo, hi := -1, -1
	for i := range h.Buckets {
		if earlier.Buckets[i] > h.Buckets[i] {
			return Hist{}, ErrNotSubset
		}
		d.Buckets[i] = h.Buckets[i] - earlier.Buckets[i]
		if d.Buckets[i] > 0 {
			if lo < 0 {
				lo = i
			}
			hi = i
		}
	}
	d.Count = h.Count - earlier.Count
	d.Sum = h.Sum - earlier.Sum
	if d.Count == 0 {
		return d, nil
	}
	d.Min, d.Max = max(BucketLow(lo), h.Min), min(BucketHigh(hi), h.Max)
	// The sum narrows them too: the largest value is at most the sum less
	// the least the others can be, the smallest at least the sum less the
	// most they can be. A lone value is the sum.
	var lowSum, highSum uint64
	highOK := true
	for i, n := range d.Buckets {
		if n == 0 {
			continue
		}
		lowSum += n * BucketLow(i) // <= Sum in a consistent histogram
		hiHi, hiLo := bits.Mul64(n, BucketHigh(i))
		var carry uint64
		highSum, carry = bits.Add64(highSum, hiLo, 0)
		highOK = highOK && hiHi == 0 && carry == 0
	}
	if others := lowSum - BucketLow(hi); lowSum <= d.Sum && d.Sum-others < d.Max {
		d.Max = d.Sum - others
	}
	if others := highSum - BucketHigh(lo); highOK && others <= d.Sum && d.Sum-others > d.Min {
		d.Min = d.Sum - others
	}
	if earlier.Count == 0 || h.Min < earlier.Min {
		d.Min = h.Min
	}
	if earlier.Count == 0 || h.Max > earlier.Max {
		d.Max = h.Max
	}
	return d, nil
}

// SetExtremes sets h's min and max to values measured alongside it (the
// tracer's per-interval extremes) and reports whether it did: only when
// they lie in h's lowest and highest non-empty buckets, as h's own
// extremes must.
func (h *Hist) SetExtremes(lo, hi uint64) bool {
	if h.Count == 0 || lo > hi {
		return false
	}
	first, last := -1, -1
	for i, n := range h.Buckets {
		if n > 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if Bucket(lo) != first || Bucket(hi) != last {
		return false
	}
	h.Min, h.Max = lo, hi
	return true
}

// Mean is the average value in ns, or 0 for an empty histogram.
func (h *Hist) Mean() float64 {
	if h.Count == 0 {
		return 0
	}
	return float64(h.Sum) / float64(h.Count)
}

// Quantile returns the q-quantile (0 <= q <= 1) in ns, interpolated linearly
// inside the bucket that holds it, whose range is narrowed to [Min, Max] where
// those fall inside it. Quantile(0) is Min and Quantile(1) is Max.
func (h *Hist) Quantile(q float64) float64 {
	if h.Count == 0 {
		return 0
	}
	q = math.Max(0, math.Min(1, q))
	target := q * float64(h.Count)
	var before float64
	for i, c := range h.Buckets {
		if c == 0 {
			continue
		}
		n := float64(c)
		if before+n >= target {
			lo, hi := float64(BucketLow(i)), float64(BucketHigh(i))
			if Bucket(h.Min) == i {
				lo = math.Max(lo, float64(h.Min))
			}
			if Bucket(h.Max) == i {
				hi = math.Max(lo, math.Min(hi, float64(h.Max)))
			}
			frac := (target - before) / n
			return lo + frac*(hi-lo)
		}
		before += n
	}
	return float64(h.Max)
}

// FromBuckets builds a histogram from a kernel map's bucket counts and the
// exact sum, min and max the BPF program kept beside them.
func FromBuckets(buckets []uint64, sum, min, max uint64) Hist {
	var h Hist
	for i, c := range buckets {
		if i >= NumBuckets {
			break
		}
		h.Buckets[i] = c
		h.Count += c
	}
	h.Sum = sum
	if h.Count > 0 {
		h.Min, h.Max = min, max
	}
	return h
}
