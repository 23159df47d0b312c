package syslive

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/strace"
	"github.com/fusescope/fusescope/internal/sysevent"
	"golang.org/x/sys/unix"
)

// Live turns the live source's typed events (internal/sysevent) into the
// events an strace log gives the analyzers: it keeps each process's fd
// table from the calls that make, duplicate and close fds and from forks
// and execs, names fds the trace did not see made from /proc (Proc), and
// names the counted I/O with the table. The kernel side only reads the
// kernel; everything that names is here, for logs' fd following and live
// events alike, and is tested by replaying recorded events.
type Live struct {
	proc  Proc
	procs map[int]*liveProc // by process id
	execs map[int]string    // thread id -> program of its last exec
	argv  map[int][]string  // thread id -> the arguments of its last exec
	pairs int               // pipes and socket pairs numbered, /proc having lost them
	root  int
	ev    strace.Event
}

// liveProc is what the interpretation knows of a traced process: its fd
// table (the one logs without -y keep too), which asks /proc for what it
// did not see made.
type liveProc struct {
	*strace.FDTable
	pid int
	// execClosed holds the names of fds an exec seemed to close (gone from
	// /proc when the exec was read, which can be long after it): the
	// kernel still holds their counters, flushed when the number is reused
	// or at the end, and those are named by what the fd was.
	execClosed map[int]string
}

// NewLive starts an interpretation that asks proc what the events do not
// say.
func NewLive(proc Proc) *Live {
	return &Live{proc: proc, procs: map[int]*liveProc{}, execs: map[int]string{}, argv: map[int][]string{}}
}

// Begin learns what the traced process holds already: its inherited fds
// and its working directory. It is called once the kernel side is
// attached, before the process runs on. With only, just those fds are
// named: a command held before its exec has only those once it executes,
// and may hold others until then (sockets, which would cost /proc/net's
// tables to name, ~5 ms).
func (l *Live) Begin(root int, only []int) {
	l.root = root
	p := l.get(root)
	p.Cwd, _ = l.proc.Cwd(root)
	fds, err := l.proc.FDs(root)
	if err != nil {
		return
	}
	for _, fd := range fds {
		if only != nil && !slices.Contains(only, fd) {
			continue
		}
		if target, err := l.proc.FD(root, fd); err == nil {
			p.FDs[fd] = target
		}
	}
}

func (l *Live) get(pid int) *liveProc {
	p := l.procs[pid]
	if p == nil {
		p = &liveProc{pid: pid, execClosed: map[int]string{}}
		l.setTable(p, &strace.FDTable{FDs: map[int]string{}})
		l.procs[pid] = p
	}
	return p
}

// setTable gives p the table t, asking /proc as p.
func (l *Live) setTable(p *liveProc, t *strace.FDTable) {
	t.Ask = func(fd int) (string, bool) {
		s, err := l.proc.FD(p.pid, fd)
		return s, err == nil
	}
	t.AskCwd = func() string {
		s, _ := l.proc.Cwd(p.pid)
		return s
	}
	p.FDTable = t
}

// target names what fd refers to in p, asking /proc for fds the trace did
// not see created.
func (p *liveProc) target(fd int) string {
	if fd < 0 {
		return ""
	}
	return p.FDTable.Name(fd)
}

// pastTarget names fd for what it did before now: counters flushed at its
// close or reuse, or at the end. An fd an exec seemed to close keeps the
// name it had.
func (p *liveProc) pastTarget(fd int) string {
	if _, ok := p.FDs[fd]; !ok {
		if s, ok := p.execClosed[fd]; ok {
			return s
		}
	}
	return p.target(fd)
}

// name records what fd now refers to.
func (p *liveProc) name(fd int, target string) {
	p.FDs[fd] = target
	delete(p.execClosed, fd)
}

// Handle interprets one event and emits what it stands for.
func (l *Live) Handle(ev *sysevent.Event, emit func(*strace.Event)) {
	switch ev.Kind {
	case sysevent.Start:
		// A sample at the start anchors the timeline's bins to the kernel's.
		l.ev = strace.Event{Kind: strace.Sample, Time: ev.Time}
		emit(&l.ev)
	case sysevent.Call:
		l.call(ev, emit)
	case sysevent.Fork:
		if ev.ChildPID != ev.PID { // a process, not a thread: it inherits the fd table
			parent, child := l.get(ev.PID), l.get(ev.ChildPID)
			t := parent.FDTable.Clone()
			for fd, s := range child.FDs { // named before its fork was read: kept where the parent says nothing
				if _, ok := t.FDs[fd]; !ok {
					t.FDs[fd] = s
				}
			}
			l.setTable(child, t)
		}
	case sysevent.Exec:
		l.execs[ev.TID] = ev.Str
		l.argv[ev.TID] = ev.Argv
		// Exec closed the close-on-exec FDs: keep what /proc still shows,
		// or everything if the process is already gone.
		p := l.get(ev.PID)
		for fd, s := range p.FDs {
			if has, alive := l.proc.HasFD(ev.PID, fd); alive && !has {
				delete(p.FDs, fd)
				p.execClosed[fd] = s
			}
		}
	case sysevent.Exit:
		e := &l.ev
		*e = strace.Event{Kind: strace.Exit, PID: ev.TID, TGID: ev.PID, Time: ev.Time, Dur: -1, UserS: float64(ev.UserNs) / 1e9, SysS: float64(ev.SysNs) / 1e9}
		if sig := ev.ExitCode & 0x7f; sig != 0 {
			e.Kind, e.Name = strace.Killed, unix.SignalName(syscall.Signal(sig))
		} else {
			e.Status = ev.ExitCode >> 8 & 0xff
		}
		emit(e) // every thread's, as strace prints +++ exited +++ for each
	case sysevent.FDIO:
		l.emitIO(emit, ev.PID, l.get(ev.PID).pastTarget(ev.FD), ev.IO)
	case sysevent.FDTotals:
		target := "fd:" + strconv.Itoa(ev.FD)
		if ev.Known {
			target = l.get(ev.PID).pastTarget(ev.FD)
		}
		l.emitIO(emit, ev.PID, target, ev.IO)
	case sysevent.Counted:
		e := &l.ev
		*e = strace.Event{Kind: strace.Syscall, Name: ev.Name, PID: ev.TID, TGID: ev.PID,
			Dur: float64(ev.Ns) / 1e9, Calls: ev.Calls, Errors: ev.Errors, Ret: "0"}
		emit(e)
	case sysevent.Errnos:
		e := &l.ev
		*e = strace.Event{Kind: strace.Failed, Name: ev.Name, Errno: ev.Errno, Calls: ev.Calls, PID: strace.Unattributed, TGID: strace.Unattributed}
		emit(e)
	case sysevent.Bin:
		e := &l.ev
		*e = strace.Event{Kind: strace.Sample, Name: ev.Category, Calls: ev.Calls, Dur: float64(ev.Ns) / 1e9, Time: ev.Time}
		emit(e)
	}
}

// emitIO emits an fd's counted I/O as aggregate events.
func (l *Live) emitIO(emit func(*strace.Event), pid int, target string, counts []sysevent.IOCount) {
	for _, c := range counts {
		if c.Calls == 0 {
			continue
		}
		kind := strace.Syscall
		if c.Peer {
			kind = strace.PeerIO
		}
		e := &l.ev
		*e = strace.Event{Kind: kind, Name: c.Name, PID: pid, TGID: pid, Dur: float64(c.Ns) / 1e9,
			Calls: c.Calls, Errors: c.Errors, Bytes: c.Bytes, Ret: "0"}
		e.SetTarget(target)
		emit(e)
	}
}

func (l *Live) call(ev *sysevent.Event, emit func(*strace.Event)) {
	name := ev.Name
	p := l.get(ev.PID)
	e := &l.ev
	*e = strace.Event{Kind: strace.Syscall, Name: name, PID: ev.TID, TGID: ev.PID, Time: ev.Time, Dur: ev.Dur}
	ret := ev.Ret
	if ret < 0 && ret > -4096 {
		e.Ret, e.Errno = "-1", kernel.ErrnoName(-ret)
	} else {
		e.Ret = strconv.FormatInt(ret, 10)
	}
	fd := int(int32(ev.Args[0]))
	str := ev.Str
	switch name {
	case "open", "creat", "openat", "openat2":
		dirfd := unix.AT_FDCWD
		if name == "openat" || name == "openat2" {
			dirfd = fd
		}
		target := ""
		if ret >= 0 {
			target = p.ResolveAt(dirfd, str)
			p.name(int(ret), target)
		}
		e.Args = strconv.Quote(str)
		e.Path = p.ResolveAt(dirfd, str)
		e.SetTarget(target)
	case "stat", "lstat", "access", "readlink":
		e.Args, e.Path = strconv.Quote(str), p.ResolveAt(unix.AT_FDCWD, str)
	case "newfstatat", "statx", "faccessat", "faccessat2", "readlinkat":
		e.Args, e.Path = strconv.Quote(str), p.ResolveAt(fd, str)
	case "close":
		e.SetTarget(p.pastTarget(fd))
		delete(p.FDs, fd)
		delete(p.execClosed, fd)
	case "dup", "dup2", "dup3", "fcntl":
		// fcntl arrives whole only when it duplicated the fd (F_DUPFD,
		// F_DUPFD_CLOEXEC) or lasted --min-wait.
		old := p.target(fd)
		if ret >= 0 && (name != "fcntl" || isDupCmd(ev.Args[1])) {
			p.name(int(ret), old)
		}
		e.SetTarget(old)
	case "socket":
		if ret >= 0 {
			p.name(int(ret), strace.SocketTarget(int(ev.Args[0]), int(ev.Args[1])))
		}
	case "connect", "bind":
		target := p.target(fd)
		if a := sockaddr(ev.Raw); a != "" {
			named := strace.Protocol(target) + ":[" + a + "]"
			if ret == 0 || e.Errno == "EINPROGRESS" {
				p.name(fd, named)
				target = named
			} else {
				target = named // what it failed to reach; the fd stays unnamed
			}
		}
		e.SetTarget(target)
	case "accept", "accept4":
		listener := p.target(fd)
		if ret >= 0 {
			peer := sockaddr(ev.Raw)
			p.name(int(ret), strace.Protocol(listener)+":["+peer+"]")
		}
		e.SetTarget(listener)
	case "pipe", "pipe2", "socketpair":
		if ret == 0 && len(ev.Raw) == 8 {
			// /proc names the pair (pipe:[inode]) while it exists; a
			// short-lived one (a shell's command substitution) is often
			// gone by the time its event is read, and is then numbered as
			// in a log without -y: pipe:[#1], UNIX:[#2].
			kind := "pipe"
			if name == "socketpair" {
				kind = strace.Protocol(strace.SocketTarget(int(ev.Args[0]), int(ev.Args[1])))
			}
			b := ev.Raw
			ends := []int{int(int32(binary.LittleEndian.Uint32(b))), int(int32(binary.LittleEndian.Uint32(b[4:])))}
			// Either end names both: a pipe's ends share its inode (the
			// process may have closed one already).
			pair := ""
			for _, nfd := range ends {
				if s, err := l.proc.FD(p.pid, nfd); err == nil && (strings.HasPrefix(s, kind+":[") || kind != "pipe" && strings.HasPrefix(s, "socket:[")) {
					pair = s
					break
				}
			}
			if pair == "" {
				l.pairs++
				pair = kind + ":[#" + strconv.Itoa(l.pairs) + "]"
			}
			for _, nfd := range ends {
				p.name(nfd, pair)
			}
		}
	case "poll", "ppoll":
		// Sent whole only when it lasted --min-wait: name the first fd it
		// waited on, as strace -y does inside the pollfd array.
		if len(ev.Raw) == 8 && ev.Args[1] > 0 {
			if pfd := int(int32(binary.LittleEndian.Uint32(ev.Raw))); pfd >= 0 {
				e.SetTarget(p.target(pfd))
			}
		}
	case "chdir", "fchdir":
		// Followed here rather than read from /proc later: a short-lived
		// process is gone by the time its events are read.
		dir := ""
		if name == "chdir" {
			dir = p.ResolveAt(unix.AT_FDCWD, str)
		} else {
			dir = p.target(fd)
			e.SetTarget(dir) // strace -y names fchdir's fd, not chdir's path
		}
		if ret == 0 {
			p.Cwd = dir
		}
	case "execve", "execveat":
		if ret == 0 {
			e.Args, e.Argv = strconv.Quote(l.execs[ev.TID]), l.argv[ev.TID]
		} else { // a failed one (a search of PATH): the path it tried
			e.Args, e.Path = strconv.Quote(str), p.ResolveAt(unix.AT_FDCWD, str)
		}
	default:
		if sysevent.FDCreators[name] && ret >= 0 {
			delete(p.FDs, int(ret))
			delete(p.execClosed, int(ret))
			p.target(int(ret))
		}
		if strace.TakesFD(name) && fd >= 0 {
			e.SetTarget(p.target(fd))
		}
		if a := sysevent.PeerArgs[name]; a > 0 {
			if pfd := int(int32(ev.Args[a-1])); pfd >= 0 {
				e.SetPeer(p.target(pfd))
			}
		}
	}
	emit(e)
}

func isDupCmd(cmd uint64) bool { return cmd == unix.F_DUPFD || cmd == unix.F_DUPFD_CLOEXEC }

// sockaddr renders a struct sockaddr as strace -yy does: 1.2.3.4:53,
// [::1]:80, or a unix path.
func sockaddr(b []byte) string {
	if len(b) < 2 {
		return ""
	}
	switch binary.LittleEndian.Uint16(b) {
	case unix.AF_INET:
		if len(b) >= 8 {
			ip := netip.AddrFrom4([4]byte(b[4:8]))
			return netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[2:4])).String()
		}
	case unix.AF_INET6:
		if len(b) >= 24 {
			ip := netip.AddrFrom16([16]byte(b[8:24]))
			return netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[2:4])).String()
		}
	case unix.AF_UNIX:
		path := b[2:]
		if i := strings.IndexByte(string(path), 0); i > 0 {
			path = path[:i]
		} else if i == 0 && len(path) > 1 { // abstract
			return "@" + strings.TrimRight(string(path[1:]), "\x00")
		}
		return string(path)
	}
	return ""
}
