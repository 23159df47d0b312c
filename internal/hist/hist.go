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
	// Fine splits the octaves FineFirst to FineFirst+FineOctaves-1 into
	// FineSubs linear sub-buckets each (index (octave-FineFirst)*FineSubs
	// + sub), for quantiles within 6.25% where a log2 bucket alone allows
	// 25%; nil when none were measured. An octave whose sub-buckets do not
	// add up to its bucket, within 1% (the kernel had no room for them on
	// some CPU), is estimated from its bucket alone.
	Fine []uint64
}

// The sub-buckets of Hist.Fine.
const (
	FineFirst   = 10 // octave 2^10 ns, about 1 us
	FineOctaves = 32 // to 2^42 ns, about 73 minutes
	FineSubs    = 16 // each 1/16 of its octave: at most 6.25% of its values wide
	FineLen     = FineOctaves * FineSubs
)

// FineIndex is the sub-bucket of v in Hist.Fine, or -1 outside its octaves.
func FineIndex(v uint64) int {
	b := Bucket(v)
	if b < FineFirst || b >= FineFirst+FineOctaves {
		return -1
	}
	return (b-FineFirst)*FineSubs + int(v>>uint(b-4))&(FineSubs-1)
}

// fineRange is the values sub-bucket i holds, inclusive.
func fineRange(i int) (lo, hi uint64) {
	b := FineFirst + i/FineSubs
	width := uint64(1) << uint(b-4)
	lo = 1<<uint(b) + uint64(i%FineSubs)*width
	return lo, lo + width - 1
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

// Clone is a copy of h that shares nothing with it (Fine is a slice): what
// a reader takes of a histogram another goroutine goes on adding to.
func (h *Hist) Clone() Hist {
	c := *h
	if h.Fine != nil {
		c.Fine = append([]uint64(nil), h.Fine...)
	}
	return c
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
	if i := FineIndex(v); i >= 0 {
		if h.Fine == nil {
			h.Fine = make([]uint64, FineLen)
		}
		h.Fine[i]++
	}
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
	if o.Fine != nil {
		fine := make([]uint64, FineLen) // never shared with another histogram
		copy(fine, h.Fine)
		for i, c := range o.Fine {
			fine[i] += c
		}
		h.Fine = fine
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
	if h.Fine != nil {
		d.Fine = make([]uint64, FineLen)
		for i, c := range h.Fine {
			var e uint64
			if earlier.Fine != nil {
				e = earlier.Fine[i]
			}
			if e > c {
				d.Fine = nil // not snapshots of one histogram: the buckets stand alone
				break
			}
			d.Fine[i] = c - e
		}
	}
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
// those fall inside it: the sub-bucket, where Fine holds the whole octave
// (within its width of the exact value: at most 6.25%), else the log2 bucket.
// Quantile(0) is Min and Quantile(1) is Max.
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
			if v, ok := h.fineQuantile(i, target-before); ok {
				return v
			}
			return h.within(float64(BucketLow(i)), float64(BucketHigh(i)), (target-before)/n)
		}
		before += n
	}
	return float64(h.Max)
}

// within interpolates at frac of [lo, hi], narrowed to [Min, Max].
func (h *Hist) within(lo, hi, frac float64) float64 {
	if float64(h.Min) >= lo && float64(h.Min) <= hi {
		lo = float64(h.Min)
	}
	if float64(h.Max) >= lo && float64(h.Max) <= hi {
		hi = float64(h.Max)
	}
	return lo + frac*(hi-lo)
}

// fineQuantile finds the rank-th value of octave b in its sub-buckets, if
// they hold the whole octave.
func (h *Hist) fineQuantile(b int, rank float64) (float64, bool) {
	if h.Fine == nil || b < FineFirst || b >= FineFirst+FineOctaves {
		return 0, false
	}
	subs := h.Fine[(b-FineFirst)*FineSubs : (b-FineFirst+1)*FineSubs]
	var total uint64
	for _, c := range subs {
		total += c
	}
	// A live snapshot reads the sub-buckets just before the buckets, so
	// requests that ended in between are in the bucket only: a shortfall
	// of 1% is allowed for, the ranks scaled to the sub-buckets' count.
	if total > h.Buckets[b] || total < h.Buckets[b]-h.Buckets[b]/100 || total == 0 {
		return 0, false
	}
	rank *= float64(total) / float64(h.Buckets[b])
	var before float64
	for s, c := range subs {
		if c == 0 {
			continue
		}
		n := float64(c)
		if before+n >= rank {
			lo, hi := fineRange((b-FineFirst)*FineSubs + s)
			return h.within(float64(lo), float64(hi), (rank-before)/n), true
		}
		before += n
	}
	return 0, false
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

// CPUHist is one CPU's copy of a log2 histogram as the BPF programs keep
// it (internal/bpf's kfunc.h, struct func_hist, which kfunc's and ufunc's
// programs share): a per-CPU map's values read into []CPUHist.
type CPUHist struct {
	Slots                      [NumBuckets]uint64
	Count, SumNs, MinNs, MaxNs uint64
}

// MergeCPUs sums the CPUs' copies of one histogram.
func MergeCPUs(perCPU []CPUHist) Hist {
	var buckets [NumBuckets]uint64
	var total, sumNs, lo, hi uint64
	for _, c := range perCPU {
		if c.Count == 0 {
			continue
		}
		for i, n := range c.Slots {
			buckets[i] += n
		}
		if total == 0 || c.MinNs < lo {
			lo = c.MinNs
		}
		hi = max(hi, c.MaxNs)
		total += c.Count
		sumNs += c.SumNs
	}
	return FromBuckets(buckets[:], sumNs, lo, hi)
}
