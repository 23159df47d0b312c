package hist

import (
	"fmt"
	"io"
	"strings"
)

// Unit is a display unit for histograms and tables.
type Unit struct {
	Name    string // as in libbpf-tools' headers: nsecs, usecs, msecs
	Divisor uint64 // ns per unit
}

// The units bcc's tools offer (their -m and -u flags, and nanoseconds).
var (
	Nsecs = Unit{"nsecs", 1}
	Usecs = Unit{"usecs", 1000}
	Msecs = Unit{"msecs", 1000000}
)

// Rebin maps the ns buckets onto log2 buckets of the unit, the way a BPF tool
// that divided each value by the unit before log2l() would have counted them.
// Each ns bucket goes to the unit bucket that holds its lower edge; for usecs
// and msecs the top ~5% of a bucket's width would belong one bucket higher, so
// counts near an edge may show one bucket low.
func (h *Hist) Rebin(u Unit) [NumBuckets]uint64 {
	if u.Divisor <= 1 {
		return h.Buckets
	}
	var out [NumBuckets]uint64
	for i, c := range h.Buckets {
		if c > 0 {
			out[Bucket(BucketLow(i)/u.Divisor)] += c
		}
	}
	return out
}

// WriteLog2 renders the histogram in the layout of libbpf-tools'
// print_log2_hist (trace_helpers.c), so output reads like biolatency's or
// fsdist's. An empty histogram prints nothing, as there.
func (h *Hist) WriteLog2(w io.Writer, u Unit) error {
	vals := h.Rebin(u)
	idxMax := -1
	var valMax uint64
	for i, v := range vals {
		if v > 0 {
			idxMax = i
		}
		if v > valMax {
			valMax = v
		}
	}
	if idxMax < 0 {
		return nil
	}
	pad, typeWidth, stars, width := 5, 19, 40, 10
	if idxMax > 32 {
		pad, typeWidth, stars, width = 15, 29, 20, 20
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%*s%-*s : count    distribution\n", pad, "", typeWidth, u.Name)
	for i := 0; i <= idxMax; i++ {
		low, high := log2Range(i)
		fmt.Fprintf(&b, "%*d -> %-*d : %-8d |%s|\n", width, low, width, high, vals[i], starBar(vals[i], valMax, stars))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// log2Range is the values a row of print_log2_hist shows for bucket i.
func log2Range(i int) (low, high uint64) {
	low = (uint64(1) << uint(i+1)) >> 1
	high = (uint64(1) << uint(i+1)) - 1
	if i == 63 {
		high = ^uint64(0)
	}
	if low == high {
		low--
	}
	return low, high
}

// starBar is libbpf-tools' print_stars.
func starBar(val, valMax uint64, width int) string {
	n := int(min(val, valMax) * uint64(width) / valMax)
	s := strings.Repeat("*", n) + strings.Repeat(" ", width-n)
	if val > valMax {
		s += "+"
	}
	return s
}

// WriteLog2Pair renders two histograms side by side in the layout of
// WriteLog2, over the buckets either holds, each bar scaled to its own
// largest count (two runs of different lengths keep their shapes).
func WriteLog2Pair(w io.Writer, a, b *Hist, u Unit) error {
	var none Hist
	if a == nil {
		a = &none
	}
	if b == nil {
		b = &none
	}
	va, vb := a.Rebin(u), b.Rebin(u)
	idxMax := -1
	var maxA, maxB uint64
	for i := range va {
		if va[i] > 0 || vb[i] > 0 {
			idxMax = i
		}
		maxA, maxB = max(maxA, va[i]), max(maxB, vb[i])
	}
	if idxMax < 0 {
		return nil
	}
	pad, typeWidth, stars, width := 5, 19, 30, 10
	if idxMax > 32 {
		pad, typeWidth, stars, width = 15, 29, 20, 20
	}
	bar := func(v, m uint64) string {
		if m == 0 {
			return strings.Repeat(" ", stars)
		}
		return starBar(v, m, stars)
	}
	var s strings.Builder
	fmt.Fprintf(&s, "%*s%-*s : %-8s %-*s   %-8s distribution B\n", pad, "", typeWidth, u.Name, "A", stars+2, "distribution A", "B")
	for i := 0; i <= idxMax; i++ {
		low, high := log2Range(i)
		fmt.Fprintf(&s, "%*d -> %-*d : %-8d |%s| : %-8d |%s|\n", width, low, width, high, va[i], bar(va[i], maxA), vb[i], bar(vb[i], maxB))
	}
	_, err := io.WriteString(w, s.String())
	return err
}
