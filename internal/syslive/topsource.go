package syslive

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/session"
	"github.com/fusescope/fusescope/internal/strace"
	"github.com/fusescope/fusescope/internal/sysevent"
)

// TopSource is the live system-call source for fusescope top: the
// kernel's counters read at each interval, per system call and per
// process, with no analysis of the events (which only keep the counters
// whole as threads exit and fds close).
type TopSource struct {
	tr    *ktrace.SyscallTracer
	start time.Time
	prev  map[[2]string]ktrace.SyscallCount // by pid and name, at the last interval
	prevT time.Time
	comms map[int]string
	tool  string

	stop     chan struct{}
	stopOnce sync.Once
	done     chan error
}

// OpenTop starts the kernel side for opts (opts.PID: the process to
// follow with the processes it starts).
func OpenTop(opts ktrace.SyscallOptions, tool string, _ session.Target) (*TopSource, error) {
	opts.Category = strace.Category
	tr, err := ktrace.StartSyscalls(opts)
	if err != nil {
		return nil, err
	}
	tr.CountLive()
	now := time.Now()
	s := &TopSource{tr: tr, start: now, prevT: now, prev: map[[2]string]ktrace.SyscallCount{}, comms: map[int]string{},
		tool: tool, stop: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		var info profile.LiveInfo
		s.done <- tr.Run(s.stop, func(*sysevent.Event) {}, &info)
	}()
	return s, nil
}

// Snapshot is the calls so far.
func (s *TopSource) Snapshot() (*profile.Record, error) {
	counts, err := s.tr.Counts()
	if err != nil {
		return nil, err
	}
	return s.record(counts, nil, s.start, time.Now()), nil
}

// Interval is the calls since the previous interval, and so far.
func (s *TopSource) Interval(bool) (interval, whole *profile.Record, err error) {
	counts, err := s.tr.Counts()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	cur := map[[2]string]ktrace.SyscallCount{}
	for _, c := range counts {
		cur[[2]string{fmt.Sprint(c.TGID), c.Name}] = c
	}
	interval = s.record(counts, s.prev, s.prevT, now)
	whole = s.record(counts, nil, s.start, now)
	s.prev, s.prevT = cur, now
	return interval, whole, nil
}

// record sums counts less prev per system call and per process.
func (s *TopSource) record(counts []ktrace.SyscallCount, prev map[[2]string]ktrace.SyscallCount, from, to time.Time) *profile.Record {
	bySys := map[string]*profile.SyscallStat{}
	byProc := map[int]*profile.Process{}
	r := &profile.SyscallReport{}
	for _, c := range counts {
		p := prev[[2]string{fmt.Sprint(c.TGID), c.Name}]
		calls, errs, ns := c.Calls-min(p.Calls, c.Calls), c.Errors-min(p.Errors, c.Errors), c.Ns-min(p.Ns, c.Ns)
		if calls == 0 {
			continue
		}
		st := bySys[c.Name]
		if st == nil {
			st = &profile.SyscallStat{Name: c.Name, Category: strace.Category(c.Name)}
			bySys[c.Name] = st
		}
		st.Calls += int(calls)
		st.Errors += int(errs)
		st.TimeS += float64(ns) / 1e9
		pr := byProc[c.TGID]
		if pr == nil {
			pr = &profile.Process{PID: c.TGID, Exec: s.comm(c.TGID)}
			byProc[c.TGID] = pr
		}
		pr.Calls += int(calls)
		pr.SyscallS += float64(ns) / 1e9
		r.TotalTime += float64(ns) / 1e9
	}
	for _, st := range bySys {
		r.Syscalls = append(r.Syscalls, *st)
	}
	sort.Slice(r.Syscalls, func(i, j int) bool { return r.Syscalls[i].TimeS > r.Syscalls[j].TimeS })
	for _, p := range byProc {
		r.Processes = append(r.Processes, *p)
	}
	sort.Slice(r.Processes, func(i, j int) bool { return r.Processes[i].SyscallS > r.Processes[j].SyscallS })
	r.HasDuration = true
	r.Span = to.Sub(from).Seconds()
	r.Live = &profile.LiveInfo{PID: s.tr.Root(), WallS: r.Span}
	return &profile.Record{Schema: profile.Schema, Syscalls: r, Meta: profile.Meta{Tool: s.tool, Source: SourceLive,
		Kernel: kernel.Release(), Host: kernel.Hostname(), Start: from, End: to}}
}

// comm names a process by its command, remembered past its exit.
func (s *TopSource) comm(pid int) string {
	if c, ok := s.comms[pid]; ok {
		return c
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return "?"
	}
	c := strings.TrimSpace(string(b))
	s.comms[pid] = c
	return c
}

// Close stops tracing and frees the programs and maps.
func (s *TopSource) Close() error {
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.done
	return s.tr.Close()
}
