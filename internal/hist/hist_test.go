package hist

import (
	"bytes"
	"github.com/fusescope/fusescope/internal/golden"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestBucketEdges(t *testing.T) {
	cases := []struct {
		v    uint64
		want int
	}{{0, 0}, {1, 0}, {2, 1}, {3, 1}, {4, 2}, {1023, 9}, {1024, 10}, {1 << 21, 21}, {1<<22 - 1, 21}, {^uint64(0), 63}}
	for _, c := range cases {
		if got := Bucket(c.v); got != c.want {
			t.Errorf("Bucket(%d) = %d, want %d", c.v, got, c.want)
		}
		if i := Bucket(c.v); c.v < BucketLow(i) || c.v > BucketHigh(i) {
			t.Errorf("%d outside its bucket [%d, %d]", c.v, BucketLow(i), BucketHigh(i))
		}
	}
}

func randomValues(r *rand.Rand, n int) []uint64 {
	vs := make([]uint64, n)
	for i := range vs {
		vs[i] = r.Uint64N(1 << r.UintN(40))
	}
	return vs
}

func TestMergeEqualsAddingEverything(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		a, b := randomValues(r, r.IntN(50)), randomValues(r, r.IntN(50))
		var ha, hb, all Hist
		for _, v := range a {
			ha.Add(v)
			all.Add(v)
		}
		for _, v := range b {
			hb.Add(v)
			all.Add(v)
		}
		ha.Merge(&hb)
		if !equal(ha, all) {
			t.Fatalf("trial %d: merge %+v != all %+v", trial, ha, all)
		}
	}
}

func TestSubUndoesMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 200; trial++ {
		var first, cum Hist
		for _, v := range randomValues(r, 1+r.IntN(30)) {
			first.Add(v)
			cum.Add(v)
		}
		var second Hist
		for _, v := range randomValues(r, r.IntN(30)) {
			second.Add(v)
			cum.Add(v)
		}
		d, err := cum.Sub(&first)
		if err != nil {
			t.Fatal(err)
		}
		if d.Buckets != second.Buckets || d.Count != second.Count || d.Sum != second.Sum {
			t.Fatalf("trial %d: interval %+v != second %+v", trial, d, second)
		}
		if d.Count > 0 && (d.Min > second.Min || d.Max < second.Max) {
			t.Fatalf("trial %d: interval bounds [%d,%d] do not cover [%d,%d]", trial, d.Min, d.Max, second.Min, second.Max)
		}
		// A new cumulative extreme is the interval's, exactly.
		if d.Count > 0 && second.Max > first.Max && d.Max != second.Max {
			t.Fatalf("trial %d: interval max %d, want the new maximum %d", trial, d.Max, second.Max)
		}
		if d.Count > 0 && second.Min < first.Min && d.Min != second.Min {
			t.Fatalf("trial %d: interval min %d, want the new minimum %d", trial, d.Min, second.Min)
		}
		// Otherwise the bounds stay within the interval's outer buckets.
		if d.Count > 0 && (Bucket(d.Min) != Bucket(second.Min) || Bucket(d.Max) != Bucket(second.Max)) {
			t.Fatalf("trial %d: interval bounds [%d,%d] outside the buckets of [%d,%d]", trial, d.Min, d.Max, second.Min, second.Max)
		}
		if d.Count > 0 && d.Min > d.Max {
			t.Fatalf("trial %d: interval bounds [%d,%d] crossed", trial, d.Min, d.Max)
		}
		// A lone value is the interval's sum: exact.
		if d.Count == 1 && (d.Min != second.Min || d.Max != second.Max) {
			t.Fatalf("trial %d: one value %d, interval bounds [%d,%d]", trial, second.Min, d.Min, d.Max)
		}
		// The measured extremes replace the bounds.
		if d.Count > 0 && (!d.SetExtremes(second.Min, second.Max) || d.Min != second.Min || d.Max != second.Max) {
			t.Fatalf("trial %d: SetExtremes(%d, %d) refused or ignored: %+v", trial, second.Min, second.Max, d)
		}
	}
	// The interval's values share a bucket with the earlier maximum: that
	// maximum only bounds the interval's (the tracer then measures it), and
	// the interval's sum narrows it: 79900 and 70000 sum to 149900, and the
	// other value is at least the bucket's 65536, so the largest is at most
	// 84364. The smallest, 70000, is a new minimum: exact.
	var before, after Hist
	before.Add(129500)
	after.Add(129500)
	after.Add(79900)
	after.Add(70000)
	d, _ := after.Sub(&before)
	if d.Max != 84364 || d.Min != 70000 {
		t.Errorf("interval of 79900 and 70000 after 129500 in one bucket: [%d, %d], want [70000, 84364]", d.Min, d.Max)
	}
	// One value alone in the interval is its sum.
	var one Hist
	one.Add(129500)
	one.Add(79900)
	if d, _ := one.Sub(&before); d.Min != 79900 || d.Max != 79900 {
		t.Errorf("interval of 79900 alone: [%d, %d]", d.Min, d.Max)
	}
	if d.SetExtremes(1000, 79900) || d.SetExtremes(79900, 200000) || d.SetExtremes(80000, 79900) {
		t.Error("SetExtremes took extremes outside the histogram's buckets")
	}
	var a, b Hist
	a.Add(5)
	b.Add(500)
	if _, err := a.Sub(&b); err == nil {
		t.Fatal("subtracting an unrelated histogram must fail")
	}
}

func TestQuantilesMonotoneAndInTheRightBucket(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	qs := []float64{0, 0.1, 0.5, 0.9, 0.99, 0.999, 1}
	for trial := 0; trial < 300; trial++ {
		var h Hist
		vs := randomValues(r, 1+r.IntN(100))
		for _, v := range vs {
			h.Add(v)
		}
		prev := -1.0
		for _, q := range qs {
			got := h.Quantile(q)
			if got < prev {
				t.Fatalf("trial %d: q%.3f = %f < previous %f", trial, q, got, prev)
			}
			prev = got
			// The bucket holding the rank-th value must hold the estimate.
			rank := uint64(math.Ceil(q * float64(h.Count))) // nearest rank
			if rank == 0 {
				rank = 1
			}
			var cum uint64
			want := -1
			for i, c := range h.Buckets {
				cum += c
				if cum >= rank {
					want = i
					break
				}
			}
			if b := Bucket(uint64(got)); b != want {
				t.Fatalf("trial %d: q%.3f = %f in bucket %d, want bucket %d", trial, q, got, b, want)
			}
		}
		if h.Quantile(0) != float64(h.Min) || h.Quantile(1) != float64(h.Max) {
			t.Fatalf("q0=%f q1=%f, want min %d max %d", h.Quantile(0), h.Quantile(1), h.Min, h.Max)
		}
	}
}

func TestQuantileSingleBucket(t *testing.T) {
	var h Hist
	for i := 0; i < 100; i++ {
		h.Add(2_100_000 + uint64(i)*1000) // 2.1 ms .. 2.199 ms, all in bucket 21
	}
	p50 := h.Quantile(0.5)
	if p50 < 2_100_000 || p50 > 2_199_000 {
		t.Fatalf("p50 = %f, want inside [min, max]", p50)
	}
	if Bucket(uint64(p50)) != 21 {
		t.Fatalf("p50 bucket %d", Bucket(uint64(p50)))
	}
}

func TestFromBuckets(t *testing.T) {
	b := make([]uint64, NumBuckets)
	b[3], b[10] = 2, 1
	h := FromBuckets(b, 8+9+1500, 8, 1500)
	if h.Count != 3 || h.Min != 8 || h.Max != 1500 || h.Buckets[10] != 1 {
		t.Fatalf("%+v", h)
	}
}

func TestRenderGolden(t *testing.T) {
	var h Hist
	// 2..3 us: 40 values, 16..31 us: 10, one 4 ms outlier.
	for i := 0; i < 40; i++ {
		h.Add(2500)
	}
	for i := 0; i < 10; i++ {
		h.Add(20_000)
	}
	h.Add(4_500_000)
	for _, u := range []Unit{Nsecs, Usecs, Msecs} {
		var buf bytes.Buffer
		if err := h.WriteLog2(&buf, u); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, "log2_"+u.Name+".golden", buf.Bytes())
	}
	var wide Hist
	wide.Add(1)
	wide.Add(1 << 40)
	var buf bytes.Buffer
	if err := wide.WriteLog2(&buf, Nsecs); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "log2_wide.golden", buf.Bytes())
	var empty Hist
	buf.Reset()
	_ = empty.WriteLog2(&buf, Usecs)
	if buf.Len() != 0 {
		t.Fatalf("empty histogram printed %q", buf.String())
	}
}

func TestStarBarMatchesLibbpfTools(t *testing.T) {
	if got := starBar(5, 10, 40); got != "********************                    " {
		t.Fatalf("%q", got)
	}
	if got := starBar(10, 10, 4); got != "****" {
		t.Fatalf("%q", got)
	}
}

// equal compares histograms, their sub-buckets included (nil and all zeros
// alike).
func equal(a, b Hist) bool {
	if a.Buckets != b.Buckets || a.Count != b.Count || a.Sum != b.Sum || a.Min != b.Min || a.Max != b.Max {
		return false
	}
	fa, fb := a.Fine, b.Fine
	for i := range FineLen {
		var x, y uint64
		if fa != nil {
			x = fa[i]
		}
		if fb != nil {
			y = fb[i]
		}
		if x != y {
			return false
		}
	}
	return true
}

// With the sub-buckets, quantiles are within a sub-bucket (6.25% at most,
// 5% checked on these distributions) of the exact value, where the log2 buckets alone were up to 25% off: the
// 5 ms WAN whose exact median was 11.25 ms and whose log2 estimate was 14.0.
func TestQuantileWithSubBuckets(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 200 {
		var h Hist
		vals := make([]uint64, 1+r.IntN(2000))
		center := uint64(2_000 + r.IntN(20_000_000))
		for i := range vals {
			vals[i] = center + uint64(r.NormFloat64()*float64(center)/20+float64(center)/10)
			h.Add(vals[i])
		}
		slices.Sort(vals)
		for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
			rank := int(math.Ceil(q*float64(len(vals)))) - 1
			exact := float64(vals[max(rank, 0)])
			got := h.Quantile(q)
			if math.Abs(got-exact)/exact > 0.05 {
				t.Fatalf("trial %d, p%g of %d values: %.0f, exact %.0f (%.1f%% off)", trial, q*100, len(vals), got, exact, 100*math.Abs(got-exact)/exact)
			}
		}
	}
	var wan Hist
	for range 1000 {
		wan.Add(11_250_000)
	}
	if got := wan.Quantile(0.5); math.Abs(got-11_250_000)/11_250_000 > 0.05 {
		t.Errorf("a 5 ms WAN's median: %.0f, exact 11250000", got)
	}
	// An octave whose sub-buckets miss more than 1% of its values (no
	// room on a CPU) is estimated from its log2 bucket alone.
	wan.Fine[FineIndex(11_250_000)] -= 20
	if got := wan.Quantile(0.5); got < float64(BucketLow(23)) || got > float64(BucketHigh(23)) {
		t.Errorf("with incomplete sub-buckets: %.0f", got)
	}
}

// The CPUs' copies add up: buckets, count and sum summed, the least
// minimum and the greatest maximum, empty copies left out.
func TestMergeCPUs(t *testing.T) {
	var a, b CPUHist
	a.Slots[Bucket(1000)], a.Count, a.SumNs, a.MinNs, a.MaxNs = 2, 2, 2100, 1000, 1100
	b.Slots[Bucket(5000)], b.Count, b.SumNs, b.MinNs, b.MaxNs = 1, 1, 5000, 5000, 5000
	h := MergeCPUs([]CPUHist{{}, a, b})
	if h.Count != 3 || h.Sum != 7100 || h.Min != 1000 || h.Max != 5000 || h.Buckets[Bucket(1000)] != 2 || h.Buckets[Bucket(5000)] != 1 {
		t.Errorf("merged: count %d sum %d min %d max %d", h.Count, h.Sum, h.Min, h.Max)
	}
}
