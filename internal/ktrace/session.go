package ktrace

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fusescope/fusescope/internal/fusectl"
	"github.com/fusescope/fusescope/internal/profile"
)

// Source names what the kernel tracer measures, in records.
const Source = "kernel:fuse_request (fuse_request_send -> fuse_request_end)"

// SessionConfig is one run of the tracer.
type SessionConfig struct {
	Options
	Mounts   []MountInfo   // resolved --mount paths; their connections are traced
	Interval time.Duration // 0: one report at the end
	Count    int           // reports to print in interval mode; 0: until stopped
	Command  []string      // recorded in the metadata
	Tool     string        // fusescope version
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

// ErrMountGone reports a traced mount that went away while being traced,
// or whose connection was aborted (Aborted: its daemon died).
type ErrMountGone struct {
	What    string
	Aborted bool
}

func (e *ErrMountGone) Error() string {
	if e.Aborted {
		return fmt.Sprintf("%s: the daemon died while traced (the connection was aborted; umount -l it); the statistics above cover the time until then", e.What)
	}
	return fmt.Sprintf("%s disappeared while traced (unmounted, or its daemon died); the statistics above cover the time until then", e.What)
}

// RunSession traces until ctx ends, Count intervals have been reported, or a
// traced mount disappears, and returns the record of the whole run. Probes
// are detached before it returns, whatever happens.
func RunSession(ctx context.Context, cfg SessionConfig) (*profile.Record, error) {
	if err := fusectl.Ensure(); err != nil {
		return nil, err
	}
	conns := append([]uint32(nil), cfg.Conns...)
	for _, m := range cfg.Mounts {
		conns = append(conns, m.Minor)
	}
	conns = dedup(conns)
	if len(cfg.Conns) > 0 {
		live, err := fusectl.Live()
		if err != nil {
			return nil, err
		}
		for _, c := range cfg.Conns {
			if !live[c] {
				return nil, fmt.Errorf("FUSE connection %d does not exist (%s lists the live ones)", c, fusectl.Dir)
			}
		}
	}
	for _, c := range conns {
		if ci := fusectl.Read(c); ci != nil && ci.Aborted {
			err := &ErrConnAborted{Conn: c}
			for _, m := range cfg.Mounts {
				if m.Minor == c {
					err.MountPoint = m.MountPoint
				}
			}
			return nil, err
		}
	}
	opts := cfg.Options
	opts.Conns = conns
	t, err := Start(opts)
	if err != nil {
		return nil, err
	}
	defer t.Close()

	labels := newMountBook(conns)
	for _, m := range cfg.Mounts {
		labels.named[m.Minor] = m.MountPoint
	}
	labels.refresh()
	start := time.Now()
	if cfg.Ready != nil {
		cfg.Ready(conns, t.Attach(), t.Fallback())
	}

	// The slow requests of the interval being measured, and of the run.
	var slowInterval, slowRun slowList
	record := func(p profile.Profile, from, to time.Time, slow *slowList) *profile.Record {
		r := &profile.Record{Schema: profile.Schema, Profile: p, Slow: slow.reqs, SlowLost: slow.lost}
		r.Meta = profile.Meta{
			Tool: cfg.Tool, Source: Source, Kernel: KernelRelease(), Host: Hostname(),
			Start: from, End: to, Command: cfg.Command, Mounts: labels.mounts(p),
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
			if m, ok := labels.known[r.Conn]; ok {
				r.Mount = m.MountPoint
			}
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
			labels.refresh()
			if gone, aborted := labels.gone(); gone != "" {
				stopErr = &ErrMountGone{What: gone, Aborted: aborted}
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

// mountBook remembers every FUSE mount seen during a run, so a connection
// keeps its label after it is unmounted, and notices traced ones that go.
type mountBook struct {
	traced  []uint32
	named   map[uint32]string // the mount point the user named, by connection
	known   map[uint32]profile.Mount
	present map[uint32]bool
}

func newMountBook(traced []uint32) *mountBook {
	return &mountBook{traced: traced, named: map[uint32]string{}, known: map[uint32]profile.Mount{}}
}

func (b *mountBook) refresh() {
	infos, err := ReadMountInfo()
	if err != nil {
		return
	}
	live, _ := fusectl.Live()
	b.present = map[uint32]bool{}
	for _, m := range DescribeMounts(infos, b.named) {
		if live[m.Conn] {
			b.present[m.Conn] = true
			b.known[m.Conn] = m
		}
	}
	for c := range live {
		if m := b.known[c]; m.MountPoint == "" {
			// Not in mountinfo (another namespace's): fusectl still counts.
			b.known[c] = profile.Mount{Conn: c, Connection: fusectl.Read(c)}
			b.present[c] = true
		}
	}
	// A connection is aborted for good: its mount stays until unmounted,
	// but nothing more will happen on it.
	for _, c := range b.traced {
		if b.present[c] && b.aborted(c) {
			b.present[c] = false
		}
	}
}

func (b *mountBook) aborted(c uint32) bool {
	ci := b.known[c].Connection
	return ci != nil && ci.Aborted
}

// gone names the traced connections that are no longer there, and whether
// all of those are still mounted, with their connection aborted.
func (b *mountBook) gone() (names string, aborted bool) {
	var out []string
	aborted = true
	for _, c := range b.traced {
		if !b.present[c] {
			aborted = aborted && b.aborted(c)
			if m, ok := b.known[c]; ok && m.MountPoint != "" {
				out = append(out, fmt.Sprintf("%s (conn %d)", m.MountPoint, c))
			} else {
				out = append(out, fmt.Sprintf("FUSE connection %d", c))
			}
		}
	}
	return strings.Join(out, ", "), aborted && len(out) > 0
}

// mounts describes the traced connections, or every connection that appears
// in the profile when all are traced.
func (b *mountBook) mounts(p profile.Profile) []profile.Mount {
	want := map[uint32]bool{}
	for _, c := range b.traced {
		want[c] = true
	}
	if len(want) == 0 {
		for _, s := range p.Ops {
			want[s.Conn] = true
		}
	}
	out := []profile.Mount{}
	for c := range want {
		m, ok := b.known[c]
		if !ok {
			m = profile.Mount{Conn: c}
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Conn < out[j].Conn })
	return out
}
