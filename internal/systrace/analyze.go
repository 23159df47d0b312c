// Package systrace analyses system-call traces: analyzers that each
// answer one question (per-file I/O, time per category, hot spots, waits,
// the process tree, the critical path, the timeline) over strace.Events,
// from logs (AnalyzeLogs) or the live source (syslive), the filters, and
// the report they fill in (profile.SyscallReport), which the views render.
// It is built as seed 002's KARBON was: source -> tokenizer -> router ->
// analyzers -> presenter.
package systrace

import (
	"sort"
	"strings"

	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/strace"
)

// Analyzer is one question asked of the event stream.
type Analyzer interface {
	Observe(e *strace.Event)
	Finish(r *profile.SyscallReport)
}

// Options tune the analyzers.
type Options struct {
	MaxWaits  int            // longest waits kept; 0: all
	MinWaitS  float64        // shortest call the waits list keeps (the live source sees shorter ones only by chance)
	Running   map[int]string // programs of processes that ran before the trace began (-p), by PID
	TimelineS float64        // timeline bin width in seconds; 0: no timeline
	// WaitMinS is the shortest call the wait groups, the processes' long
	// calls and the critical path count; 0: DefaultWaitMinS. The live
	// source sees shorter ones only when they name an fd.
	WaitMinS float64
	// Window gives a live trace's start and end (wall-clock seconds), known
	// once its events have ended: a process still running at the end lived
	// until then, and one running at the start (Running) from then on, not
	// only between the calls that were seen whole.
	Window func() (start, end float64)
}

func (o Options) waitMin() float64 {
	if o.WaitMinS > 0 {
		return o.WaitMinS
	}
	return DefaultWaitMinS
}

// sortExecs orders a process's programs by when they ran.
func sortExecs(x []profile.ExecStep) {
	sort.SliceStable(x, func(i, j int) bool { return x[i].Start < x[j].Start })
}

// Analyze runs the analyzers over events and returns their report.
func Analyze(events func(emit func(*strace.Event)) error, p *strace.Parser, o Options) (*profile.SyscallReport, error) {
	r := &profile.SyscallReport{}
	as := []Analyzer{newSyscallCounter(), &fileIO{m: map[string]*profile.FileStat{}},
		&waits{max: o.MaxWaits, min: o.MinWaitS}, &procTree{min: o.waitMin(), m: map[int]*profile.Process{}, leader: map[int]int{}, running: o.Running, window: o.Window},
		&waitGroups{min: o.waitMin(), m: map[[2]string]*profile.WaitGroup{}}, &clock{r: r},
		&timeline{width: o.TimelineS, bins: map[int]*profile.TimelineBin{}, maxBins: profile.MaxTimelineBins}}
	err := events(func(e *strace.Event) {
		r.Events++
		for _, a := range as {
			a.Observe(e)
		}
	})
	for _, a := range as {
		a.Finish(r)
	}
	criticalPath(r, o.waitMin())
	if p != nil {
		r.Lines, r.Malformed, r.FirstBad = p.Lines, p.Bad, p.Malformed
		r.FollowedFDs = p.FollowedFDs
		r.Unfinished = p.Pending() + p.Lost
	}
	return r, err
}

// syscallCounter counts per call: the calls callInfos knows by their id,
// which the event's info already found, the others by name. Each call's
// calls and time are also counted by category, as the category table
// counts them (a read of a socket is network): its row is labelled with
// the category most of its time went to.
type syscallCounter struct {
	known  []*callCount
	other  map[string]*callCount
	errnos map[profile.ErrnoStat]int // keyed with Calls 0
	cats   []profile.CategoryStat    // by category index; Category set once seen
}

// callCount is a system call's row and its split by category.
type callCount struct {
	stat  profile.SyscallStat
	byCat []profile.CategoryStat // by category index
}

func newSyscallCounter() *syscallCounter {
	return &syscallCounter{known: make([]*callCount, strace.KnownCalls()+1), other: map[string]*callCount{}, errnos: map[profile.ErrnoStat]int{},
		cats: make([]profile.CategoryStat, len(profile.SyscallCategories))}
}

func (a *syscallCounter) Observe(e *strace.Event) {
	if e.Kind == strace.Failed {
		a.errnos[profile.ErrnoStat{Syscall: e.Name, Errno: e.Errno}] += e.Calls
		return
	}
	// Calls that never returned (exit_group, a call cut by a kill) are not
	// counted, as strace -c does not count them. A call a signal interrupted
	// (= ? ERESTARTSYS) did return, failed, and strace -c counts it.
	if e.Kind != strace.Syscall || e.Ret == "?" && e.Errno == "" {
		return
	}
	if e.Errno != "" && e.Calls == 0 {
		a.errnos[profile.ErrnoStat{Syscall: e.Name, Errno: e.Errno}]++
	}
	c := e.Info()
	var s *callCount
	if c.ID > 0 {
		if s = a.known[c.ID]; s == nil {
			s = newCallCount(e.Name, c)
			a.known[c.ID] = s
		}
	} else if s = a.other[e.Name]; s == nil {
		s = newCallCount(e.Name, c)
		a.other[e.Name] = s
	}
	n := e.N()
	s.stat.Calls += n
	s.stat.Errors += e.Failures()
	cat := e.CategoryIndex()
	a.cats[cat].Category = profile.SyscallCategories[cat]
	a.cats[cat].Calls += n
	s.byCat[cat].Calls += n
	if e.Dur > 0 {
		s.stat.TimeS += e.Dur
		a.cats[cat].TimeS += e.Dur
		s.byCat[cat].TimeS += e.Dur
	}
}

func newCallCount(name string, c *strace.Call) *callCount {
	return &callCount{stat: profile.SyscallStat{Name: name, Category: c.Category}, byCat: make([]profile.CategoryStat, len(profile.SyscallCategories))}
}

// row is the call's row, labelled with the category that took most of its
// time (most of its calls, in a log without -T); its own on a tie.
func (c *callCount) row() profile.SyscallStat {
	own, best := strace.CategoryIndex(c.stat.Category), -1
	for i, b := range c.byCat {
		if b.Calls == 0 {
			continue
		}
		if best < 0 || b.TimeS > c.byCat[best].TimeS || b.TimeS == c.byCat[best].TimeS && (b.Calls > c.byCat[best].Calls || b.Calls == c.byCat[best].Calls && i == own) {
			best = i
		}
	}
	r := c.stat
	if best >= 0 {
		r.Category = profile.SyscallCategories[best]
	}
	return r
}

func (a *syscallCounter) Finish(r *profile.SyscallReport) {
	for k, n := range a.errnos {
		k.Calls = n
		r.Errnos = append(r.Errnos, k)
	}
	sort.Slice(r.Errnos, func(i, j int) bool {
		a, b := r.Errnos[i], r.Errnos[j]
		if a.Calls != b.Calls {
			return a.Calls > b.Calls
		}
		if a.Syscall != b.Syscall {
			return a.Syscall < b.Syscall
		}
		return a.Errno < b.Errno
	})
	for _, s := range a.known {
		if s != nil {
			r.Syscalls = append(r.Syscalls, s.row())
		}
	}
	for _, s := range a.other {
		r.Syscalls = append(r.Syscalls, s.row())
	}
	sort.Slice(r.Syscalls, func(i, j int) bool {
		a, b := r.Syscalls[i], r.Syscalls[j]
		if a.TimeS != b.TimeS {
			return a.TimeS > b.TimeS
		}
		if a.Calls != b.Calls {
			return a.Calls > b.Calls
		}
		return a.Name < b.Name
	})
	// Summed per call, in the events' order, by what each call worked on.
	for _, c := range a.cats {
		if c.Category != "" {
			r.Categories = append(r.Categories, c)
		}
	}
	sort.Slice(r.Categories, func(i, j int) bool {
		if r.Categories[i].TimeS != r.Categories[j].TimeS {
			return r.Categories[i].TimeS > r.Categories[j].TimeS
		}
		return r.Categories[i].Category < r.Categories[j].Category
	})
}

// fileIO attributes I/O to what each fd refers to, as strace -y prints it:
// read(3</etc/passwd>, ...) = 1234, openat(...) = 3</etc/passwd>.
type fileIO struct {
	m    map[string]*profile.FileStat
	last *profile.FileStat // the previous call's row: reads come in runs
}

func (a *fileIO) Observe(e *strace.Event) {
	switch e.Kind {
	case strace.Syscall:
		c := e.Info()
		if path := e.MissingPath(); path != "" {
			f := a.row(path)
			f.Missing++
			f.Calls++
			if e.Dur > 0 {
				f.TimeS += e.Dur
			}
			return
		}
		a.count(e.FileTarget(), e, c.Open, c.Read, c.Write)
		if c.PeerArg > 0 {
			a.count(e.Peer(), e, false, c.Write, c.Read)
		}
	case strace.PeerIO:
		c := e.Info()
		a.count(e.Target(), e, false, c.Write, c.Read)
	}
}

// count adds e's calls to target's row: as opens, reads or writes. A
// transfer call counts on both its fds, its calls and time on each.
func (a *fileIO) count(target string, e *strace.Event, open, read, write bool) {
	if target == "" {
		return
	}
	f := a.row(target)
	n := e.N()
	f.Calls += n
	if e.Dur > 0 {
		f.TimeS += e.Dur
	}
	switch {
	case open:
		f.Opens += n
	case read:
		f.Reads += n
		f.BytesRead += e.Moved()
	case write:
		f.Writes += n
		f.BytesWritten += e.Moved()
	}
}

// row is target's row in the files table.
func (a *fileIO) row(target string) *profile.FileStat {
	if a.last != nil && a.last.Target == target {
		return a.last
	}
	f := a.m[target]
	if f == nil {
		f = &profile.FileStat{Target: target, Kind: strace.TargetKind(target)}
		a.m[target] = f
	}
	a.last = f
	return f
}

func (a *fileIO) Finish(r *profile.SyscallReport) {
	for _, f := range a.m {
		if f.Missing == f.Calls {
			f.Kind = "missing" // only ever looked for
		}
		r.Files = append(r.Files, *f)
	}
	sort.Slice(r.Files, func(i, j int) bool {
		a, b := r.Files[i], r.Files[j]
		if a.TimeS != b.TimeS {
			return a.TimeS > b.TimeS
		}
		if a.BytesRead+a.BytesWritten != b.BytesRead+b.BytesWritten {
			return a.BytesRead+a.BytesWritten > b.BytesRead+b.BytesWritten
		}
		return a.Target < b.Target
	})
}

type waits struct {
	max  int
	min  float64
	list []profile.Wait
}

func (a *waits) Observe(e *strace.Event) {
	if e.Kind != strace.Syscall || e.Calls > 0 || !e.Info().Wait || e.Dur <= 0 || e.Dur < a.min {
		return
	}
	// read only counts as a wait on sockets, pipes and terminals. A poll
	// is named by the first fd it waited on, as in seed 002's DNS wait.
	target := e.FileTarget()
	if e.Name == "read" && (target == "" || strace.TargetKind(target) == "file") {
		return
	}
	a.list = append(a.list, profile.Wait{PID: e.PID, Line: e.Line, Name: e.Name, Target: target, Start: e.Time, DurS: e.Dur, Errno: e.Errno})
	if a.max > 0 && len(a.list) > 4*a.max {
		a.trim()
	}
}

func (a *waits) trim() {
	sort.Slice(a.list, func(i, j int) bool { return a.list[i].DurS > a.list[j].DurS })
	if a.max > 0 && len(a.list) > a.max {
		a.list = a.list[:a.max]
	}
}

func (a *waits) Finish(r *profile.SyscallReport) {
	a.trim()
	r.Waits = a.list
}

// procTree follows fork, clone, execve and exits. Its events are by thread
// (strace -f prints thread ids); threads are folded into their process at
// the end, since a thread's first calls may come before the clone that made
// it.
type procTree struct {
	min     float64 // the shortest call kept in Blocked
	m       map[int]*profile.Process
	leader  map[int]int    // thread id -> the thread that made it with CLONE_THREAD, or its process
	running map[int]string // Options.Running
	window  func() (start, end float64)
	last    *profile.Process // the process of the previous event
}

func (a *procTree) get(pid int) *profile.Process {
	// Events come in runs of one process (an -ff file is one process's):
	// the map is asked only when the process changes. (Entries leave it
	// only in Finish.)
	if a.last != nil && a.last.PID == pid {
		return a.last
	}
	p := a.m[pid]
	if p == nil {
		p = &profile.Process{PID: pid}
		a.m[pid] = p
	}
	a.last = p
	return p
}

func (a *procTree) Observe(e *strace.Event) {
	if e.Kind == strace.Sample || e.Kind == strace.PeerIO || e.Kind == strace.Failed || e.PID == strace.Unattributed {
		return
	}
	p := a.get(e.PID)
	if e.TGID != 0 && e.TGID != e.PID {
		a.leader[e.PID] = e.TGID
	}
	// Aggregates from the live source have no time; the first event with
	// one starts the process.
	if e.Time > 0 && (p.Start == 0 || e.Time < p.Start) {
		p.Start = e.Time
	}
	if end := e.Time + max(e.Dur, 0); e.Time > 0 && end > p.End {
		p.End = end // a call's end, not its start: a 5 s poll is in its process's life
	}
	switch e.Kind {
	case strace.Syscall:
		p.Calls += e.N()
		if e.Dur > 0 {
			p.SyscallS += e.Dur
		}
		if e.Calls == 0 && e.Dur >= a.min && e.Dur > 0 && len(p.Blocked) < profile.MaxBlocked {
			s := profile.Span{Start: e.Time, DurS: e.Dur, Name: e.Name, Target: e.FileTarget(), Errno: e.Errno}
			if e.Name == "wait4" || e.Name == "waitid" {
				if id, ok := e.RetInt(); ok && id > 0 {
					s.Child = int(id)
				}
			}
			p.Blocked = append(p.Blocked, s)
		}
		if child := e.Child(); child > 0 {
			if strings.Contains(e.Args, "CLONE_THREAD") {
				a.leader[child] = e.PID
				return
			}
			c := a.get(child)
			if c.Start == 0 || (e.Time > 0 && e.Time < c.Start) {
				c.Start = e.Time
			}
			c.Parent = e.PID
			if c.Exec == "" {
				c.Exec = p.Exec
			}
		} else if (e.Name == "execve" || e.Name == "execveat") && e.Errno == "" {
			if path, ok := strace.Quoted(strace.FirstArg(e.Args)); ok {
				p.Exec = path
				p.Execs = append(p.Execs, profile.ExecStep{Start: e.Time, Program: path, Args: strace.ExecArgv(e)})
			}
		}
	case strace.Exit:
		st := e.Status
		p.Exit = &st
		p.UserCPUS += e.UserS
		p.SysCPUS += e.SysS
	case strace.Killed:
		p.Killed = e.Name
		p.UserCPUS += e.UserS
		p.SysCPUS += e.SysS
	}
}

// process is the process that thread tid belongs to.
func (a *procTree) process(tid int) int {
	for range len(a.leader) + 1 { // a cycle (reused thread ids) ends here
		l, ok := a.leader[tid]
		if !ok || l == tid {
			break
		}
		tid = l
	}
	return tid
}

func (a *procTree) Finish(r *profile.SyscallReport) {
	own := map[int]float64{} // each process's main thread's time in calls
	for pid, p := range a.m {
		own[pid] = p.SyscallS
	}
	for tid, t := range a.m {
		pid := a.process(tid)
		if pid == tid {
			continue
		}
		p := a.get(pid)
		p.Calls += t.Calls
		p.SyscallS += t.SyscallS
		p.OutsideS += max(0, t.End-t.Start-t.SyscallS)
		p.UserCPUS += t.UserCPUS
		p.SysCPUS += t.SysCPUS
		p.Execs = append(p.Execs, t.Execs...) // an exec by a thread: it became the process's leader
		sortExecs(p.Execs)
		if t.Start > 0 && (p.Start == 0 || t.Start < p.Start) {
			p.Start = t.Start
		}
		p.End = max(p.End, t.End)
		if p.Exec == "" {
			p.Exec = t.Exec
		}
		if p.Killed == "" {
			p.Killed = t.Killed // a fatal signal kills every thread
		}
		p.Threads = max(p.Threads, 1) + 1
		delete(a.m, tid)
	}
	var start, end float64
	if a.window != nil {
		start, end = a.window()
	}
	for _, p := range a.m {
		if p.Exec == "" {
			p.Exec = a.running[p.PID]
		}
		if _, ok := a.running[p.PID]; ok && start > 0 {
			p.Start = start
		}
		if p.Exit == nil && p.Killed == "" && end > p.End {
			p.End = end
		}
		if p.Parent != 0 {
			p.Parent = a.process(p.Parent) // a process started by a thread is its process's child
		}
		if p.PID != strace.Unattributed && p.End > p.Start {
			p.OutsideS += max(0, p.End-p.Start-own[p.PID])
		}
		r.Processes = append(r.Processes, *p)
	}
	sort.Slice(r.Processes, func(i, j int) bool { return r.Processes[i].PID < r.Processes[j].PID })
}

// clock measures the log's span and total duration.
type clock struct {
	r           *profile.SyscallReport
	first, last float64
	seen        bool
}

func (a *clock) Observe(e *strace.Event) {
	if e.Time > 0 {
		if !a.seen || e.Time < a.first {
			a.first = e.Time
		}
		if e.Time > a.last {
			a.last = e.Time
		}
		a.seen = true
	}
	if e.Kind == strace.Syscall && e.Dur >= 0 {
		a.r.HasDuration = true
		a.r.TotalTime += e.Dur
	}
}

func (a *clock) Finish(r *profile.SyscallReport) {
	if a.seen {
		r.Span = a.last - a.first
	}
}
