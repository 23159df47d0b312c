package systrace

import (
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/fusescope/fusescope/internal/profile"
)

// Analyzer is one question asked of the event stream.
type Analyzer interface {
	Observe(e *Event)
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
func Analyze(events func(emit func(*Event)) error, p *Parser, o Options) (*profile.SyscallReport, error) {
	r := &profile.SyscallReport{}
	as := []Analyzer{newSyscallCounter(), &fileIO{m: map[string]*profile.FileStat{}},
		&waits{max: o.MaxWaits, min: o.MinWaitS}, &procTree{min: o.waitMin(), m: map[int]*profile.Process{}, leader: map[int]int{}, running: o.Running, window: o.Window},
		&waitGroups{min: o.waitMin(), m: map[[2]string]*profile.WaitGroup{}}, &clock{r: r},
		&timeline{width: o.TimelineS, bins: map[int]*profile.TimelineBin{}, maxBins: profile.MaxTimelineBins}}
	err := events(func(e *Event) {
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
		r.Unfinished = len(p.pending) + p.Lost
	}
	return r, err
}

// Categories of system calls (seed 002's time per category).
var categories = func() map[string]string {
	m := map[string]string{}
	add := func(cat string, names ...string) {
		for _, n := range names {
			m[n] = cat
		}
	}
	add("file I/O", "read", "write", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev", "preadv2", "pwritev2",
		"open", "openat", "openat2", "creat", "close", "close_range", "lseek", "stat", "fstat", "lstat", "newfstatat", "statx",
		"access", "faccessat", "faccessat2", "readlink", "readlinkat", "getdents", "getdents64", "fsync", "fdatasync",
		"truncate", "ftruncate", "rename", "renameat", "renameat2", "unlink", "unlinkat", "mkdir", "mkdirat", "rmdir",
		"chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "link", "linkat", "symlink", "symlinkat",
		"getxattr", "lgetxattr", "fgetxattr", "setxattr", "lsetxattr", "fsetxattr", "listxattr", "flistxattr",
		"removexattr", "fremovexattr", "statfs", "fstatfs", "sendfile", "copy_file_range", "splice", "tee", "fallocate",
		"fadvise64", "sync", "syncfs", "dup", "dup2", "dup3", "fcntl", "ioctl", "flock", "getcwd", "chdir", "fchdir", "utimensat")
	add("network", "socket", "connect", "accept", "accept4", "bind", "listen", "sendto", "recvfrom", "sendmsg", "recvmsg",
		"sendmmsg", "recvmmsg", "shutdown", "getsockname", "getpeername", "setsockopt", "getsockopt", "socketpair")
	add("IPC", "pipe", "pipe2", "msgget", "msgsnd", "msgrcv", "semget", "semop", "shmget", "shmat", "shmdt", "eventfd2",
		"futex", "futex_waitv", "poll", "ppoll", "select", "pselect6", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
		"epoll_pwait2", "kill", "tgkill", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait", "sigaltstack")
	add("memory", "mmap", "munmap", "mprotect", "brk", "mremap", "madvise", "mlock", "munlock", "mincore", "membarrier")
	add("process", "clone", "clone3", "fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4", "waitid",
		"getpid", "getppid", "gettid", "set_tid_address", "set_robust_list", "rseq", "prctl", "arch_prctl", "prlimit64",
		"getrlimit", "setrlimit", "getuid", "geteuid", "getgid", "getegid", "setuid", "setgid", "capget", "capset",
		"sched_yield", "sched_getaffinity", "sched_setaffinity", "getrandom", "uname")
	add("sleep and timers", "nanosleep", "clock_nanosleep", "alarm", "setitimer", "getitimer", "timer_create",
		"timer_settime", "timerfd_create", "timerfd_settime", "clock_gettime", "gettimeofday", "time", "pause")
	return m
}()

// Category names a syscall's category ("other" when unknown).
func Category(name string) string { return lookupCall(name).category }

// callInfo is what the analyzers ask of a system call's name, found with
// one lookup per event (Event.info) rather than one per question.
type callInfo struct {
	id                      int // 1.. for the calls of callInfos; 0 for otherCall
	name                    string
	category                string
	catIndex                int // category's index in profile.SyscallCategories
	open, read, write, wait bool
	spawn                   bool // clone, clone3, fork, vfork: returns the id of what it made
	fdArgs                  int  // leading arguments nameFDs reads; -1: the call involves no fd
	// peerArg: 1 + the argument holding a transfer call's second fd
	// (splice's fd_out, sendfile's in_fd), which moves the bytes the other
	// way: a call that reads its first fd writes its peer, and the reverse.
	peerArg int
}

var (
	callInfos = map[string]*callInfo{}
	otherCall = &callInfo{category: "other", catIndex: categoryIndex("other"), fdArgs: -1}
	// What a read, write or wait counts for when its fd is a socket or a pipe.
	networkCategory, ipcCategory = categoryIndex("network"), categoryIndex("IPC")
)

// categoryIndex is cat's index in profile.SyscallCategories.
func categoryIndex(cat string) int {
	i := slices.Index(profile.SyscallCategories, cat)
	if i < 0 {
		panic("no system-call category " + cat)
	}
	return i
}

func init() {
	get := func(name string) *callInfo {
		c := callInfos[name]
		if c == nil {
			c = &callInfo{category: "other", catIndex: otherCall.catIndex, fdArgs: -1}
			callInfos[name] = c
		}
		return c
	}
	for name, cat := range categories {
		get(name).category, get(name).catIndex = cat, categoryIndex(cat)
	}
	for name := range openCalls {
		get(name).open = true
	}
	for name := range spawnCalls {
		get(name).spawn = true
	}
	for name := range readCalls {
		get(name).read = true
	}
	for name := range writeCalls {
		get(name).write = true
	}
	for name := range waitCalls {
		get(name).wait = true
	}
	for name, n := range fdArgs {
		get(name).fdArgs = n
	}
	for name, n := range peerArgs {
		get(name).peerArg = n
	}
	for name, c := range callInfos {
		knownCalls++
		c.id, c.name = knownCalls, name
		i := callSlot(name)
		for callTable[i] != nil {
			i = (i + 1) & (len(callTable) - 1)
		}
		callTable[i] = c
	}
}

// knownCalls is how many calls callInfos knows.
var knownCalls int

// callTable finds a name's callInfo with less work than a map lookup,
// which was 7% of a log's analysis: open addressing with linear probing,
// at a tenth full, so a lookup mostly compares one name.
var callTable [2048]*callInfo

func callSlot(name string) int {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(name); i++ {
		h = (h ^ uint32(name[i])) * 16777619
	}
	return int(h^h>>15) & (len(callTable) - 1)
}

func lookupCall(name string) *callInfo {
	for i := callSlot(name); ; i = (i + 1) & (len(callTable) - 1) {
		c := callTable[i]
		if c == nil {
			return otherCall
		}
		if c.name == name {
			return c
		}
	}
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
	return &syscallCounter{known: make([]*callCount, knownCalls+1), other: map[string]*callCount{}, errnos: map[profile.ErrnoStat]int{},
		cats: make([]profile.CategoryStat, len(profile.SyscallCategories))}
}

func (a *syscallCounter) Observe(e *Event) {
	if e.Kind == Failed {
		a.errnos[profile.ErrnoStat{Syscall: e.Name, Errno: e.Errno}] += e.Calls
		return
	}
	// Calls that never returned (exit_group, a call cut by a kill) are not
	// counted, as strace -c does not count them. A call a signal interrupted
	// (= ? ERESTARTSYS) did return, failed, and strace -c counts it.
	if e.Kind != Syscall || e.Ret == "?" && e.Errno == "" {
		return
	}
	if e.Errno != "" && e.Calls == 0 {
		a.errnos[profile.ErrnoStat{Syscall: e.Name, Errno: e.Errno}]++
	}
	c := e.info()
	var s *callCount
	if c.id > 0 {
		if s = a.known[c.id]; s == nil {
			s = newCallCount(e.Name, c)
			a.known[c.id] = s
		}
	} else if s = a.other[e.Name]; s == nil {
		s = newCallCount(e.Name, c)
		a.other[e.Name] = s
	}
	n := e.N()
	s.stat.Calls += n
	s.stat.Errors += e.failures()
	cat := e.categoryIndex()
	a.cats[cat].Category = profile.SyscallCategories[cat]
	a.cats[cat].Calls += n
	s.byCat[cat].Calls += n
	if e.Dur > 0 {
		s.stat.TimeS += e.Dur
		a.cats[cat].TimeS += e.Dur
		s.byCat[cat].TimeS += e.Dur
	}
}

func newCallCount(name string, c *callInfo) *callCount {
	return &callCount{stat: profile.SyscallStat{Name: name, Category: c.category}, byCat: make([]profile.CategoryStat, len(profile.SyscallCategories))}
}

// row is the call's row, labelled with the category that took most of its
// time (most of its calls, in a log without -T); its own on a tie.
func (c *callCount) row() profile.SyscallStat {
	own, best := categoryIndex(c.stat.Category), -1
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

var (
	// The transfer calls are here by their first fd: splice, tee and
	// copy_file_range read it, sendfile writes it (peerArgs: the other).
	readCalls  = set("read", "pread64", "readv", "preadv", "preadv2", "recvfrom", "recvmsg", "recv", "splice", "tee", "copy_file_range")
	writeCalls = set("write", "pwrite64", "writev", "pwritev", "pwritev2", "sendto", "sendmsg", "send", "sendfile")
	// peerArgs: 1 + the argument holding a transfer call's second fd.
	peerArgs   = map[string]int{"splice": 3, "tee": 2, "copy_file_range": 3, "sendfile": 2}
	openCalls  = set("open", "openat", "openat2", "creat")
	spawnCalls = set("clone", "clone3", "fork", "vfork")
)

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// fileIO attributes I/O to what each fd refers to, as strace -y prints it:
// read(3</etc/passwd>, ...) = 1234, openat(...) = 3</etc/passwd>.
type fileIO struct {
	m    map[string]*profile.FileStat
	last *profile.FileStat // the previous call's row: reads come in runs
}

func (a *fileIO) Observe(e *Event) {
	switch e.Kind {
	case Syscall:
		c := e.info()
		if path := e.missingPath(); path != "" {
			f := a.row(path)
			f.Missing++
			f.Calls++
			if e.Dur > 0 {
				f.TimeS += e.Dur
			}
			return
		}
		a.count(e.fileTarget(), e, c.open, c.read, c.write)
		if c.peerArg > 0 {
			a.count(e.Peer(), e, false, c.write, c.read)
		}
	case PeerIO:
		c := e.info()
		a.count(e.Target(), e, false, c.write, c.read)
	}
}

// count adds e's calls to target's row: as opens, reads or writes. A
// transfer call counts on both its fds, its calls and time on each.
func (a *fileIO) count(target string, e *Event, open, read, write bool) {
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
		f.BytesRead += e.moved()
	case write:
		f.Writes += n
		f.BytesWritten += e.moved()
	}
}

// row is target's row in the files table.
func (a *fileIO) row(target string) *profile.FileStat {
	if a.last != nil && a.last.Target == target {
		return a.last
	}
	f := a.m[target]
	if f == nil {
		f = &profile.FileStat{Target: target, Kind: targetKind(target)}
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

// firstArg returns the first top-level argument of an argument list.
func firstArg(args string) string {
	if i := topLevelIndex(args, ','); i >= 0 {
		return args[:i]
	}
	return args
}

// fdTarget extracts "/etc/passwd" from "3</etc/passwd>" (strace -y).
func fdTarget(s string) string {
	s = strings.TrimSpace(s)
	i := strings.IndexByte(s, '<')
	if i <= 0 || !allDigits(s[:i]) || !strings.HasSuffix(s, ">") {
		return ""
	}
	return unescape(s[i+1 : len(s)-1])
}

// firstAnnotation is the first fd target anywhere in args, outside quoted
// strings, or "".
func firstAnnotation(args string) string {
	if i := scanArgs(args, -1); i >= 0 {
		if end := annotationEnd(args, i); end > 0 {
			return unescape(args[i+1 : end])
		}
	}
	return ""
}

// unescape undoes strace's escapes in a -y path: \" \\ \n \t \r \v \f,
// \xNN, and octal of one to three digits (strace prints '>' as \76).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		c := s[i+1]
		if r := simpleEscape(c); r != 0 {
			b.WriteByte(r)
			i++
			continue
		}
		if c == 'x' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		if n := octalDigits(s[i+1:]); n > 0 {
			v, _ := strconv.ParseUint(s[i+1:i+1+n], 8, 16)
			b.WriteByte(byte(v))
			i += n
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// simpleEscape is the byte that \c stands for, or 0.
func simpleEscape(c byte) byte {
	switch c {
	case '"', '\\':
		return c
	case 'n':
		return '\n'
	case 't':
		return '\t'
	case 'r':
		return '\r'
	case 'v':
		return '\v'
	case 'f':
		return '\f'
	}
	return 0
}

// octalDigits is how many octal digits (at most 3) s starts with.
func octalDigits(s string) int {
	n := 0
	for n < 3 && n < len(s) && s[n] >= '0' && s[n] <= '7' {
		n++
	}
	return n
}

func targetKind(t string) string {
	switch {
	case strings.HasPrefix(t, "/dev/"):
		return "device"
	case strings.HasPrefix(t, "/"):
		return "file"
	case strings.HasPrefix(t, "TCP"):
		return "tcp"
	case strings.HasPrefix(t, "UDP"):
		return "udp"
	case strings.HasPrefix(t, "UNIX"):
		return "unix"
	case strings.HasPrefix(t, "pipe:"):
		return "pipe"
	case strings.HasPrefix(t, "socket:"):
		return "socket"
	}
	return "other"
}

// Blocking calls whose duration is waiting, not work.
var waitCalls = set("connect", "accept", "accept4", "poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait",
	"epoll_pwait2", "recvfrom", "recvmsg", "recv", "futex", "nanosleep", "clock_nanosleep", "wait4", "waitid", "read",
	"rt_sigsuspend", "rt_sigtimedwait", "pause")

type waits struct {
	max  int
	min  float64
	list []profile.Wait
}

func (a *waits) Observe(e *Event) {
	if e.Kind != Syscall || e.Calls > 0 || !e.info().wait || e.Dur <= 0 || e.Dur < a.min {
		return
	}
	// read only counts as a wait on sockets, pipes and terminals. A poll
	// is named by the first fd it waited on, as in seed 002's DNS wait.
	target := e.fileTarget()
	if e.Name == "read" && (target == "" || targetKind(target) == "file") {
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

func (a *procTree) Observe(e *Event) {
	if e.Kind == Sample || e.Kind == PeerIO || e.Kind == Failed || e.PID == Unattributed {
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
	case Syscall:
		p.Calls += e.N()
		if e.Dur > 0 {
			p.SyscallS += e.Dur
		}
		if e.Calls == 0 && e.Dur >= a.min && e.Dur > 0 && len(p.Blocked) < profile.MaxBlocked {
			s := profile.Span{Start: e.Time, DurS: e.Dur, Name: e.Name, Target: e.fileTarget(), Errno: e.Errno}
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
			if path, ok := quoted(firstArg(e.Args)); ok {
				p.Exec = path
				p.Execs = append(p.Execs, profile.ExecStep{Start: e.Time, Program: path, Args: execArgv(e)})
			}
		}
	case Exit:
		st := e.Status
		p.Exit = &st
		p.UserCPUS += e.UserS
		p.SysCPUS += e.SysS
	case Killed:
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
		if p.PID != Unattributed && p.End > p.Start {
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

func (a *clock) Observe(e *Event) {
	if e.Time > 0 {
		if !a.seen || e.Time < a.first {
			a.first = e.Time
		}
		if e.Time > a.last {
			a.last = e.Time
		}
		a.seen = true
	}
	if e.Kind == Syscall && e.Dur >= 0 {
		a.r.HasDuration = true
		a.r.TotalTime += e.Dur
	}
}

func (a *clock) Finish(r *profile.SyscallReport) {
	if a.seen {
		r.Span = a.last - a.first
	}
}
