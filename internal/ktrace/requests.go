package ktrace

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/option"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/session"
)

// Source names what the kernel tracer measures, in records.
const Source = "kernel:fuse_request (fuse_request_send -> fuse_request_end)"

// RequestConfig is what the FUSE request source traces.
type RequestConfig struct {
	Options
	Mounts  []fuseconn.MountInfo // resolved --mount paths; their connections are traced
	Command []string             // recorded in the metadata
	Tool    string               // fusescope version
	// Intervals keeps each interval's slow requests apart (interval mode).
	Intervals bool
	// Slow receives each request that took at least Options.Slower, a
	// few times a second, as it is read; the records hold them too.
	Slow func(profile.SlowRequest)
	// Hung: records list the requests in flight at least this long when
	// they are made (each interval's and the last); 0 lists none.
	Hung time.Duration
	// Files: records list the Files files with the most FUSE time
	// (Options.Files is set from it); 0 lists none.
	Files int
	// CommandPID is the application's process when it is not -p's nor
	// the run's -- CMD (session.CommandWatcher): with Options.Calls, a
	// benchmark that traces itself.
	CommandPID int
	// ProgramCost has the kernel account the programs' run time while the
	// source is open (BPF_ENABLE_STATS: two clock reads per run) and
	// records it (profile.Record.Programs).
	ProgramCost bool
}

// slowPoll is how often the slow requests are read; housekeeping (the
// mounts, whether a traced one went away) is done every second.
const (
	slowPoll     = 100 * time.Millisecond
	housekeeping = time.Second
)

// RequestSource is the FUSE request tracer as a session source: its
// probes attached at open, its maps read at each snapshot and interval.
type RequestSource struct {
	cfg    RequestConfig
	t      *Tracer
	conns  []uint32
	labels *fuseconn.Book
	start  time.Time

	prev     profile.Profile // the cumulative profile at the previous interval
	prevTime time.Time
	// The slow requests of the interval being measured, and of the run.
	slowInterval, slowRun slowList
	slowLostSeen          uint64
	lastHousekeeping      time.Time
	// ProgramCost: the kernel's accounting, on while this is open.
	costStats io.Closer
}

// OpenRequests checks the connections to trace, loads the programs and
// attaches them.
func OpenRequests(cfg RequestConfig) (*RequestSource, error) {
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
	opts.Files = cfg.Files > 0
	t, err := Start(opts)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	s := &RequestSource{cfg: cfg, t: t, conns: conns, labels: fuseconn.NewBook(conns, named),
		start: now, prevTime: now, lastHousekeeping: now}
	if err := s.watchDaemons(); err != nil {
		t.Close()
		return nil, err
	}
	if err := s.countPageCaches(); err != nil {
		t.Close()
		return nil, err
	}
	if cfg.ProgramCost {
		if s.costStats, err = ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err != nil {
			t.Close()
			return nil, fmt.Errorf("turning on the kernel's accounting of BPF run time: %w", err)
		}
	}
	for _, pid := range []int{cfg.PID, cfg.CommandPID} {
		if pid > 0 {
			if err := t.WatchApplication(pid); err != nil {
				t.Close()
				return nil, err
			}
		}
	}
	return s, nil
}

// CommandStarted watches the run's -- CMD, held before its first
// instruction, as the application (--calls).
func (s *RequestSource) CommandStarted(pid int, _ []int) error {
	return s.t.WatchApplication(pid)
}

// countPageCaches has --page-cache count the traced connections' pages,
// or every FUSE connection's when all are traced (again every second, for
// mounts made later).
func (s *RequestSource) countPageCaches() error {
	conns := s.conns
	if len(conns) == 0 {
		live, err := fuseconn.Live()
		if err != nil {
			return err
		}
		for c := range live {
			conns = append(conns, c)
		}
	}
	if err := s.t.SetCountedConns(conns); err != nil {
		return err
	}
	if !s.cfg.Calls {
		return nil
	}
	infos, err := fuseconn.ReadMountInfo()
	if err != nil {
		return err
	}
	counted := map[uint32]bool{}
	for _, c := range conns {
		counted[c] = true
	}
	points := map[uint32]string{}
	for _, m := range infos {
		if m.IsFUSE() && counted[m.Minor] && points[m.Minor] == "" {
			points[m.Minor] = m.MountPoint
		}
	}
	return s.t.SetApplicationMounts(points)
}

// watchDaemons finds the processes holding a traced connection's
// /dev/fuse (every connection's, when all are traced) and has the stage
// programs time their calls: at open, then every second, so that a daemon
// started after the trace is watched from then on.
func (s *RequestSource) watchDaemons() error {
	if !s.t.Stages() {
		return nil
	}
	holders, err := fuseconn.Holders()
	if err != nil {
		return option.Errorf("finding the daemons for {stages}: %w", err)
	}
	traced := map[uint32]bool{}
	for _, c := range s.conns {
		traced[c] = true
	}
	var pids []int
	for _, h := range holders {
		// Conn 0: a kernel that prints no fuse_connection in fdinfo
		// (before 6.13), or an fd not yet mounted with. Watched all the
		// same: the programs resolve each call's fd to its connection in
		// the kernel, so a daemon of another connection costs only calls.
		if h.Conn != 0 && len(traced) > 0 && !traced[h.Conn] {
			continue
		}
		pids = append(pids, h.PID) // WatchDaemons skips those it watches
	}
	return s.t.WatchDaemons(pids)
}

// WatchDaemons looks for daemons now rather than at the next second's
// housekeeping: a driver that has just mounted a file system (bench) has
// its requests split into stages from the first.
func (s *RequestSource) WatchDaemons() error { return s.watchDaemons() }

// Holds is the tracer's map of the requests the daemons hold
// (Options.Holds), which ufunc's programs share; nil without it.
func (s *RequestSource) Holds() *ebpf.Map { return s.t.Holds() }

// HoldByGoroutine has process pid's requests held by goroutine (a Go
// daemon): Tracer.HoldByGoroutine.
func (s *RequestSource) HoldByGoroutine(pid int) error { return s.t.HoldByGoroutine(pid) }

// Conns are the traced connections; none: every one.
func (s *RequestSource) Conns() []uint32 { return s.conns }

// Probes is how the probes attached (AttachBTF or AttachTracepoint) and
// found requests, and why where that is not the default.
func (s *RequestSource) Probes() (string, []string) { return s.t.Probes() }

// Close detaches the probes.
func (s *RequestSource) Close() error {
	if s.costStats != nil {
		s.costStats.Close()
	}
	return s.t.Close()
}

// PollEvery is how often Poll is wanted: as often as the slow requests
// are read, also for --files, whose names' ring a walk of thousands of
// files a second would fill in a second.
func (s *RequestSource) PollEvery() time.Duration {
	if s.t.Slow() || s.cfg.Files > 0 {
		return slowPoll
	}
	return housekeeping
}

// Poll reads the slow requests and, every second, looks for traced
// mounts that went away: an *fuseconn.ErrMountGone ends the run.
func (s *RequestSource) Poll() error {
	if err := s.t.drainNames(); err != nil {
		return err
	}
	if s.t.Slow() {
		if err := s.readSlow(); err != nil {
			return err
		}
	}
	if time.Since(s.lastHousekeeping) < housekeeping {
		return nil
	}
	s.lastHousekeeping = time.Now()
	if err := s.watchDaemons(); err != nil {
		return err
	}
	if err := s.countPageCaches(); err != nil {
		return err
	}
	s.labels.Refresh()
	if gone, aborted := s.labels.Gone(); gone != "" {
		return &fuseconn.ErrMountGone{What: gone, Aborted: aborted}
	}
	return nil
}

// Snapshot is the record of the run so far.
func (s *RequestSource) Snapshot() (*profile.Record, error) {
	whole, err := s.t.Snapshot()
	if err != nil {
		return nil, err
	}
	r := s.record(whole, s.start, time.Now(), &s.slowRun)
	return r, s.readFeatures(r, nil)
}

// Finish reads the requests that ended before the stop and returns the
// record of the whole run.
func (s *RequestSource) Finish(*session.Exit) (*profile.Record, error) {
	end := time.Now()
	if s.t.Slow() {
		if err := s.readSlow(); err != nil {
			return nil, err
		}
	}
	// Cut at one moment, as an interval is: a request that ended while
	// the maps were read one after another would be in its opcode's count
	// and not in its stages (a close's RELEASE, sent in the background,
	// often ends just then).
	whole, _, err := s.t.NextInterval()
	if err != nil {
		return nil, err
	}
	r := s.record(whole, s.start, end, &s.slowRun)
	return r, s.readFeatures(r, nil)
}

// Settle waits, at most max, for the requests in flight to end: the
// RELEASE of a command's last close is sent in the background and ends
// after the command has exited; it is the command's, and counted.
func (s *RequestSource) Settle(max time.Duration) error {
	return s.t.WaitInFlight(max)
}

// Interval returns the interval since the previous one, with its exact
// extremes and its slow requests, and the cumulative record at its end.
func (s *RequestSource) Interval(final bool) (interval, whole *profile.Record, err error) {
	now := time.Now()
	if final && s.t.Slow() {
		// The requests that ended before the stop.
		if err := s.readSlow(); err != nil {
			return nil, nil, err
		}
	}
	cum, extremes, err := s.t.NextInterval()
	if err != nil {
		return nil, nil, err
	}
	d, err := cum.Sub(&s.prev)
	if err != nil {
		return nil, nil, fmt.Errorf("interval statistics: %w", err)
	}
	for i := range d.Ops {
		op := &d.Ops[i]
		e, ok := extremes[op.Key()]
		if !ok {
			continue
		}
		if e.Total {
			op.Latency.SetExtremes(e.Min, e.Max)
		}
		for j, st := range stageOrder {
			if h := op.Stage(st); h != nil && e.Stage[j].Staged {
				h.SetExtremes(e.Stage[j].Min, e.Stage[j].Max)
			}
		}
	}
	s.prev = cum
	var later slowList
	if s.t.Slow() && !final {
		// The interval's slow requests, read now: those that ended after
		// the switch to the next interval, as the kernel numbered them,
		// belong to the next, as their counts do.
		if err := s.readSlow(); err != nil {
			return nil, nil, err
		}
		later = s.slowInterval.splitAfter(s.t.epoch - 1)
	}
	from := s.prevTime
	s.prevTime = now
	interval = s.record(d, from, now, &s.slowInterval)
	s.slowInterval = later
	whole = s.record(cum, s.start, now, &s.slowRun)
	if err := s.readFeatures(whole, interval); err != nil {
		return nil, nil, err
	}
	return interval, whole, nil
}

// measured names the optional sections the source fills, so a reader can
// tell a section left empty by the run from one not measured.
func (s *RequestSource) measured() []string {
	var m []string
	for _, x := range []struct {
		on   bool
		name string
	}{{s.t.Stages(), profile.MeasuredStages}, {s.cfg.Calls, profile.MeasuredCalls}, {s.cfg.PageCache, profile.MeasuredPageCache},
		{s.cfg.Hung > 0, profile.MeasuredHung}, {s.t.CountsForgets(), profile.MeasuredForgets}, {s.cfg.Files > 0, profile.MeasuredFiles}, {s.cfg.Slower > 0, profile.MeasuredSlow}} {
		if x.on {
			m = append(m, x.name)
		}
	}
	return m
}

func (s *RequestSource) record(p profile.Profile, from, to time.Time, slow *slowList) *profile.Record {
	r := &profile.Record{Schema: profile.Schema, Profile: p, Slow: slow.reqs, SlowLost: slow.lost, Hung: s.hung()}
	mounts := s.labels.Mounts(p)
	fuseconn.AddDaemons(mounts)
	r.Meta = profile.Meta{
		Tool: s.cfg.Tool, Source: Source, Kernel: kernel.Release(), Host: kernel.Hostname(),
		Start: from, End: to, Command: s.cfg.Command, Mounts: mounts,
		Filters:   profile.Filters{PID: s.cfg.PID, Comm: s.cfg.Comm, Conns: s.conns},
		FuseURing: s.t.Stages() && kernel.FuseURingEnabled(),
		Measured:  s.measured(),
	}
	how, notes := s.t.Probes()
	r.Meta.Probes = strings.Join(append([]string{how}, notes...), "; ")
	for _, op := range s.cfg.Ops {
		r.Meta.Filters.Ops = append(r.Meta.Filters.Ops, op.String())
	}
	// Also when the user turned the accounting on (sysctl
	// kernel.bpf_stats_enabled=1): what fusescope's own programs cost.
	if s.costStats != nil || kernel.BPFStatsEnabled() {
		if progs, err := s.t.ProgramStats(); err == nil {
			for _, p := range progs {
				r.Programs = append(r.Programs, profile.ProgramCost{Program: p.Program, Runtime: p.Runtime, Runs: p.Runs})
			}
		}
	}
	return r
}

func (s *RequestSource) readSlow() error {
	// The names first: those of the requests' nodes came before them.
	if err := s.t.drainNames(); err != nil {
		return err
	}
	err := s.t.ReadSlow(func(r profile.SlowRequest) {
		r.Mount = s.labels.MountPoint(r.Conn)
		if r.NodeID != 0 {
			r.File, _ = s.t.nodePath(r.Conn, r.NodeID)
		}
		if s.cfg.Slow != nil {
			s.cfg.Slow(r)
		}
		if s.cfg.Intervals { // else the run's list is the only record's
			s.slowInterval.add(r)
		}
		s.slowRun.add(r)
	})
	if err != nil {
		return err
	}
	// The kernel's count of requests it could not send, as it grows.
	lost, err := s.t.SlowLost()
	if err != nil {
		return err
	}
	s.slowInterval.lost += lost - s.slowLostSeen
	s.slowRun.lost += lost - s.slowLostSeen
	s.slowLostSeen = lost
	return nil
}

// slowList is the slow requests a record holds: at most profile.MaxSlow,
// and the count of those it does not.
type slowList struct {
	reqs []profile.SlowRequest
	lost uint64
}

// splitAfter keeps the requests that ended in interval number ended or
// before, and returns the others.
func (l *slowList) splitAfter(ended uint32) slowList {
	var later slowList
	kept := l.reqs[:0]
	for _, r := range l.reqs {
		if r.Interval > ended {
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

// hung lists the requests in flight at least cfg.Hung, oldest first. A
// request the tracer cannot read is left out: the record is made anyway.
func (s *RequestSource) hung() []profile.HungRequest {
	if s.cfg.Hung <= 0 {
		return nil
	}
	reqs, err := s.t.InFlight(s.cfg.Hung)
	if err != nil {
		return nil
	}
	out := make([]profile.HungRequest, 0, len(reqs))
	for _, r := range reqs {
		h := profile.HungRequest{Conn: r.Conn, Opcode: r.Opcode, Op: fuseproto.Opcode(r.Opcode).String(), Age: r.Age,
			PID: r.PID, Comm: kernel.Comm(int(r.PID)), Mount: s.labels.MountPoint(r.Conn)}
		if s.t.Stages() {
			switch {
			case r.Replied:
				h.Stage = "reply"
			case r.Taken:
				h.Stage = "daemon"
			default:
				h.Stage = "queued"
			}
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Age > out[j].Age })
	return out
}

// readFeatures has the tracer's features read into the records: whole
// and, at an interval, interval.
func (s *RequestSource) readFeatures(whole, interval *profile.Record) error {
	return s.t.readFeatures(&recordRead{whole: whole, interval: interval, labels: s.labels, conns: s.conns, files: s.cfg.Files})
}
