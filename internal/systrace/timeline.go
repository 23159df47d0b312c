package systrace

import (
	"math"
	"sort"

	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/strace"
)

// timeline bins system calls by when they started.
type timeline struct {
	width   float64
	first   float64
	seen    bool
	bins    map[int]*profile.TimelineBin
	maxBins int
	dropped int // calls in bins past maxBins
}

func (a *timeline) Observe(e *strace.Event) {
	if e.Time <= 0 || a.width <= 0 {
		return
	}
	// Bins start at the first timestamp of any kind: the live source sends
	// a sample at the start of tracing first, so its bins line up.
	if !a.seen {
		a.first, a.seen = e.Time, true
	}
	// The live source's empty sample at the start only anchors the bins:
	// loading and attaching before the command's first call are not idle
	// time of the command.
	if (e.Kind != strace.Syscall && e.Kind != strace.Sample) || (e.Kind == strace.Sample && e.Calls == 0) {
		return
	}
	i := int((e.Time - a.first) / a.width)
	if i < 0 {
		i = 0
	}
	b := a.bins[i]
	if b == nil {
		if len(a.bins) >= a.maxBins {
			if e.Kind == strace.Syscall || e.Calls > 0 {
				a.dropped += e.N()
			}
			return
		}
		b = a.newBin(i)
		a.bins[i] = b
	}
	c := e.Category()
	if e.Kind == strace.Sample {
		c = e.Name
	}
	b.Calls[c] += e.N()
	if e.Dur > 0 {
		b.TimeS[c] += e.Dur
	}
}

func (a *timeline) Finish(r *profile.SyscallReport) {
	// Bins without calls between the first and the last are shown empty:
	// an idle stretch is what a timeline is read for.
	lo, hi := math.MaxInt, -1
	for i := range a.bins {
		lo, hi = min(lo, i), max(hi, i)
	}
	if hi >= 0 && hi-lo < a.maxBins {
		for i := lo; i <= hi; i++ {
			if a.bins[i] == nil {
				a.bins[i] = a.newBin(i)
			}
		}
	}
	for _, b := range a.bins {
		r.Timeline = append(r.Timeline, *b)
	}
	sort.Slice(r.Timeline, func(i, j int) bool { return r.Timeline[i].Start < r.Timeline[j].Start })
	r.TimelineBinS = a.width
	r.TimelineDropped = a.dropped
}

func (a *timeline) newBin(i int) *profile.TimelineBin {
	return &profile.TimelineBin{Start: float64(i) * a.width, Calls: map[string]int{}, TimeS: map[string]float64{}}
}
