package ktrace

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/profile"
)

// Source names what the kernel tracer measures, in records.
const Source = "kernel:fuse_request (fuse_request_send -> fuse_request_end)"

// SessionConfig is one run of the tracer.
type SessionConfig struct {
	Options
	Mounts   []fuseconn.MountInfo // resolved --mount paths; their connections are traced
	Interval time.Duration        // 0: one report at the end
	Count    int                  // reports to print in interval mode; 0: until stopped
	Command  []string             // recorded in the metadata
	Tool     string               // fusescope version
	// Ready is called once the probes are attached, before any workload
	// should start, with how they attached (AttachBTF or AttachTracepoint)
	// and, if AttachAuto fell back to the classic tracepoints, why.
	Ready func(conns []uint32, attach string, fallback error)
	// Emit receives each interval's record (interval mode) or the whole
	// run's record (at the end); final is true for the last call.
	Emit func(r *profile.Record, final bool) error
	// Slow receives each request that took at least Options.Slower, a
	// few times a second, as it is read; the records hold them too.
	Slow func(profile.SlowRequest)
}

// slowPoll is how often the slow requests are read.
const slowPoll = 100 * time.Millisecond

// RunSession traces until ctx ends, Count intervals have been reported, or a
// traced mount disappears, and returns the record of the whole run. Probes
// are detached before it returns, whatever happens.
func RunSession(ctx context.Context, cfg SessionConfig) (*profile.Record, error) {
	conns := append([]uint32(nil), cfg.Conns...)
	named := map[uint32]string{}
	for _, m := range cfg.Mounts {
		conns = append(conns, m.Minor)
		named[m.Minor] = m.MountPoint
	}
	conns = dedup(conns)
	if err := fuseconn.CheckTraced(conns, cfg.Mounts); err != nil {
		return nil, err
	}
	opts := cfg.Options
	opts.Conns = conns
	t, err := Start(opts)
	if err != nil {
		return nil, err
	}
	defer t.Close()

	labels := fuseconn.NewBook(conns, named)
	start := time.Now()
	if cfg.Ready != nil {
		cfg.Ready(conns, t.Attach(), t.Fallback())
	}

	// The slow requests of the interval being measured, and of the run.
	var slowInterval, slowRun slowList
	record := func(p profile.Profile, from, to time.Time, slow *slowList) *profile.Record {
		r := &profile.Record{Schema: profile.Schema, Profile: p, Slow: slow.reqs, SlowLost: slow.lost}
		r.Meta = profile.Meta{
			Tool: cfg.Tool, Source: Source, Kernel: kernel.Release(), Host: kernel.Hostname(),
			Start: from, End: to, Command: cfg.Command, Mounts: labels.Mounts(p),
			Filters: profile.Filters{PID: cfg.PID, Comm: cfg.Comm, Conns: conns},
		}
		for _, op := range cfg.Ops {
			r.Meta.Filters.Ops = append(r.Meta.Filters.Ops, op.String())
		}
		return r
	}

	housekeeping := time.NewTicker(time.Second)
	defer housekeeping.Stop()
	var intervalC <-chan time.Time
	if cfg.Interval > 0 {
		it := time.NewTicker(cfg.Interval)
		defer it.Stop()
		intervalC = it.C
	}
	var prev profile.Profile
	prevTime := start
	emitted := 0
	// nextInterval returns the interval since the previous one, with its
	// exact extremes, and the cumulative profile at its end.
	nextInterval := func() (interval, cum profile.Profile, err error) {
		cum, extremes, err := t.NextInterval()
		if err != nil {
			return interval, cum, err
		}
		interval, err = cum.Sub(&prev)
		if err != nil {
			return interval, cum, fmt.Errorf("interval statistics: %w", err)
		}
		for i := range interval.Ops {
			if e, ok := extremes[interval.Ops[i].Key()]; ok {
				interval.Ops[i].Latency.SetExtremes(e.Min, e.Max)
			}
		}
		prev = cum
		return interval, cum, nil
	}
	var slowC <-chan time.Time
	var slowLostSeen uint64
	if t.Slow() {
		st := time.NewTicker(slowPoll)
		defer st.Stop()
		slowC = st.C
	}
	readSlow := func() error {
		err := t.ReadSlow(func(r profile.SlowRequest) {
			r.Mount = labels.MountPoint(r.Conn)
			if cfg.Slow != nil {
				cfg.Slow(r)
			}
			if cfg.Interval > 0 { // else the run's list is the only record's
				slowInterval.add(r)
			}
			slowRun.add(r)
		})
		if err != nil {
			return err
		}
		// The kernel's count of requests it could not send, as it grows.
		lost, err := t.SlowLost()
		if err != nil {
			return err
		}
		slowInterval.lost += lost - slowLostSeen
		slowRun.lost += lost - slowLostSeen
		slowLostSeen = lost
		return nil
	}
	emitInterval := func() error {
		now := time.Now()
		d, _, err := nextInterval()
		if err != nil {
			return err
		}
		var later slowList
		if t.Slow() {
			// The interval's slow requests, read now: those that ended
			// after its counts were read belong to the next.
			counted := time.Now()
			if err := readSlow(); err != nil {
				return err
			}
			later = slowInterval.splitAt(counted)
		}
		from := prevTime
		prevTime = now
		emitted++
		rec := record(d, from, now, &slowInterval)
		slowInterval = later
		return cfg.Emit(rec, false)
	}
	var stopErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-slowC:
			if err := readSlow(); err != nil {
				return nil, err
			}
		case <-housekeeping.C:
			labels.Refresh()
			if gone, aborted := labels.Gone(); gone != "" {
				stopErr = &fuseconn.ErrMountGone{What: gone, Aborted: aborted}
				break loop
			}
		case <-intervalC:
			if cfg.Count > 0 && emitted+1 >= cfg.Count {
				break loop
			}
			if err := emitInterval(); err != nil {
				return nil, err
			}
		}
	}
	end := time.Now()
	if t.Slow() {
		// The requests that ended before the stop.
		if err := readSlow(); err != nil {
			return nil, err
		}
	}
	if cfg.Interval > 0 {
		d, whole, err := nextInterval()
		if err != nil {
			return nil, err
		}
		if err := cfg.Emit(record(d, prevTime, end, &slowInterval), true); err != nil {
			return nil, err
		}
		return record(whole, start, end, &slowRun), stopErr
	}
	whole, err := t.Snapshot()
	if err != nil {
		return nil, err
	}
	if err := cfg.Emit(record(whole, start, end, &slowRun), true); err != nil {
		return nil, err
	}
	return record(whole, start, end, &slowRun), stopErr
}

// slowList is the slow requests a record holds: at most profile.MaxSlow,
// and the count of those it does not.
type slowList struct {
	reqs []profile.SlowRequest
	lost uint64
}

// splitAt keeps the requests that ended by at and returns the others.
func (l *slowList) splitAt(at time.Time) slowList {
	var later slowList
	kept := l.reqs[:0]
	for _, r := range l.reqs {
		if r.End.After(at) {
			later.reqs = append(later.reqs, r)
		} else {
			kept = append(kept, r)
		}
	}
	l.reqs = kept
	return later
}

func (l *slowList) add(r profile.SlowRequest) {
	if len(l.reqs) >= profile.MaxSlow {
		l.lost++
		return
	}
	l.reqs = append(l.reqs, r)
}

func dedup(v []uint32) []uint32 {
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	out := v[:0]
	for i, c := range v {
		if i == 0 || c != v[i-1] {
			out = append(out, c)
		}
	}
	return out
}
