package fuseconn

import (
	"context"
	"sync"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
)

// Waiting samples fusectl's waiting count of connections at a fixed
// period, for fusescope doctor: a connection with more requests waiting
// than its max_background had background requests held back in the
// kernel's queue, which no FUSE request statistic shows (they are sent
// only when let through).
type Waiting struct {
	mu      sync.Mutex
	samples map[uint32]*profile.ConnInfo
	stop    context.CancelFunc
	done    chan struct{}
}

// SampleWaiting samples the connections conns() names (all live ones when
// it returns none) every period until Stop.
func SampleWaiting(period time.Duration, conns func() []uint32) *Waiting {
	ctx, stop := context.WithCancel(context.Background())
	w := &Waiting{samples: map[uint32]*profile.ConnInfo{}, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			w.sample(conns())
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *Waiting) sample(conns []uint32) {
	if len(conns) == 0 {
		live, _ := Live()
		for c := range live {
			conns = append(conns, c)
		}
	}
	for _, c := range conns {
		info := Read(c)
		if info == nil || info.Aborted {
			continue
		}
		w.mu.Lock()
		s := w.samples[c]
		if s == nil {
			s = &profile.ConnInfo{}
			w.samples[c] = s
		}
		s.Samples++
		s.WaitingPeak = max(s.WaitingPeak, info.Waiting)
		if info.Waiting > info.MaxBackground {
			s.AboveBackground++
		}
		w.mu.Unlock()
	}
}

// Stop ends the sampling and adds what it found to the mounts' fusectl
// figures; it may be called more than once.
func (w *Waiting) Stop(mounts []profile.Mount) {
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range mounts {
		s := w.samples[mounts[i].Conn]
		if s == nil {
			continue
		}
		if mounts[i].Connection == nil {
			mounts[i].Connection = Read(mounts[i].Conn)
			if mounts[i].Connection == nil {
				mounts[i].Connection = &profile.ConnInfo{}
			}
		}
		ci := mounts[i].Connection
		ci.Samples, ci.WaitingPeak, ci.AboveBackground = s.Samples, s.WaitingPeak, s.AboveBackground
	}
}
