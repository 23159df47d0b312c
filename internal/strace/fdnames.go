package strace

import (
	"net/netip"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// nameFDs is the preprocessing stage for logs recorded without strace -y
// (strace-analyzer's `strace -s 0 -ff`, an strace -p attach): it follows each
// process's fd table through the calls that create, duplicate and close fds,
// and names the fd of every call as -y would have, so that per-file I/O,
// waits and --file work on such logs too. Threads (CLONE_FILES) share their
// creator's table and forks copy it at the fork, so that children know the
// fds they inherited. A log with -y targets is passed on as it is. Names
// differ from -y's where a log cannot know better: paths are as the program
// gave them (relative ones are joined to a directory only when the log
// showed it), pipes and socket pairs are numbered in the order they were
// made (pipe:[#1]), and fds the log never saw created are "fd:N".
func nameFDs(events func(emit func(*Event)) error, n *fdNamer) func(emit func(*Event)) error {
	return func(emit func(*Event)) error {
		return events(func(e *Event) {
			n.observe(e)
			emit(e)
		})
	}
}

func newFDNamer() *fdNamer { return &fdNamer{tables: map[int]*FDTable{}} }

type fdNamer struct {
	tables    map[int]*FDTable      // by PID (the thread id in strace -f logs)
	annotated bool                  // the log has -y targets
	pipes     int                   // pipes and socket pairs named so far
	sockets   map[string]socketAddr // -y logs: by socket inode (nameSocket)
}

// FDTable is what one process knows of its fds (threads share one): the
// one table that logs without -y (nameFDs) and the live source
// (syslive.Live) keep, from the calls that make, duplicate and close fds.
type FDTable struct {
	FDs map[int]string // the fds' targets, as strace -y names them
	Cwd string         // "" until a chdir shows it (or, live, until asked)
	// seenFirst: made for a process seen before the call that created it
	// (strace -f prints a child's first calls before its parent's clone
	// returns); the clone then hands it what the child inherited.
	seenFirst bool
	// Ask names an fd the table did not see made, and AskCwd the working
	// directory (the live source asks /proc); nil in a log, whose unknown
	// fds are "fd:N".
	Ask    func(fd int) (string, bool)
	AskCwd func() string
}

// Name is what fd refers to: its target, or "fd:N" where neither the
// calls seen nor Ask know it.
func (t *FDTable) Name(fd int) string {
	if s, ok := t.FDs[fd]; ok {
		return s
	}
	if t.Ask != nil {
		s, ok := t.Ask(fd)
		if !ok {
			s = "fd:" + strconv.Itoa(fd)
		}
		t.FDs[fd] = s
		return s
	}
	return "fd:" + strconv.Itoa(fd)
}

// Clone is a forked child's copy of the table.
func (t *FDTable) Clone() *FDTable {
	c := &FDTable{FDs: make(map[int]string, len(t.FDs)), Cwd: t.Cwd}
	for fd, s := range t.FDs {
		c.FDs[fd] = s
	}
	return c
}

// resolve names path opened relative to dirfd ("AT_FDCWD" or a number).
func (t *FDTable) resolve(dirfd, p string) string {
	fd, ok := atoi(dirfd)
	if !ok {
		fd = unix.AT_FDCWD
	}
	return t.ResolveAt(fd, p)
}

// ResolveAt names path opened relative to dirfd, as strace -y prints it.
func (t *FDTable) ResolveAt(dirfd int, p string) string {
	if p == "" || path.IsAbs(p) {
		return path.Clean(p)
	}
	base := t.Cwd
	if dirfd != unix.AT_FDCWD {
		base = t.Name(dirfd)
	} else if base == "" && t.AskCwd != nil {
		t.Cwd = t.AskCwd()
		base = t.Cwd
	}
	if !path.IsAbs(base) {
		return p
	}
	return path.Join(base, p)
}

// atCalls take a directory fd first, which strace -y names.
var atCalls = set("newfstatat", "fstatat64", "unlinkat", "mkdirat", "mknodat", "fchmodat", "fchmodat2", "fchownat",
	"faccessat", "faccessat2", "readlinkat", "renameat", "renameat2", "linkat", "utimensat", "futimesat", "statx",
	"execveat", "name_to_handle_at", "getxattrat", "setxattrat", "listxattrat", "removexattrat")

// fdFirst are the calls whose first argument is an fd (strace -y prints its
// target there).
var fdFirst = set("read", "write", "close", "fstat", "lseek", "pread64", "pwrite64", "readv", "writev", "ioctl",
	"fcntl", "flock", "fsync", "fdatasync", "ftruncate", "getdents", "getdents64", "fchdir", "fchmod", "fchown",
	"fstatfs", "connect", "accept", "accept4", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg",
	"shutdown", "bind", "listen", "getsockname", "getpeername", "setsockopt", "getsockopt", "sendfile", "epoll_ctl",
	"epoll_wait", "epoll_pwait", "epoll_pwait2", "dup", "dup2", "dup3", "preadv", "pwritev", "preadv2", "pwritev2",
	"fgetxattr", "fsetxattr", "flistxattr", "fremovexattr", "fadvise64", "fallocate", "sync_file_range", "syncfs",
	"splice", "tee", "copy_file_range", "readahead", "vmsplice", "inotify_add_watch", "timerfd_settime", "timerfd_gettime")

// FDArgs is how many leading arguments nameFDs reads of each call that
// involves fds; calls not listed are passed over.
var FDArgs = func() map[string]int {
	m := map[string]int{"open": 1, "creat": 1, "openat": 2, "openat2": 2, "close": 1, "close_range": 3,
		"dup": 2, "dup2": 2, "dup3": 2, "fcntl": 2, "socket": 2, "connect": 2, "bind": 2, "accept": 2, "accept4": 2,
		"pipe": 1, "pipe2": 1, "socketpair": 4, "chdir": 1, "fchdir": 1, "clone": 0, "clone3": 0, "fork": 0, "vfork": 0,
		"poll": 1, "ppoll": 1}
	for _, names := range []map[string]bool{fdFirst, atCalls} {
		for name := range names {
			if _, ok := m[name]; !ok {
				m[name] = 1
			}
		}
	}
	for name, n := range peerArgs {
		m[name] = n
	}
	return m
}()

// nameSocket names a -y log's sockets as the live source and logs without
// -y do. strace -y names a socket by its inode, and as "socket:[1234]" where
// it cannot tell the protocol (on this project's kernels, always), which
// says nothing of what it talks to: the socket call gives the protocol,
// connect, bind and accept the address. A failed connect is named by the
// address it tried, so the waits list says what did not answer.
func (n *fdNamer) nameSocket(e *Event) {
	if e.Kind != Syscall {
		return
	}
	switch e.Name {
	case "socket", "accept", "accept4", "connect", "bind":
		n.learnSocket(e)
	case "poll", "ppoll":
		e.polled = firstAnnotation(e.Args)
		if inode, ok := socketInode(e.polled); ok {
			if s, ok := n.sockets[inode]; ok {
				e.polled = s.name(e.polled)
			}
		}
		return
	}
	if len(n.sockets) == 0 {
		return
	}
	if peer := e.Peer(); strings.HasSuffix(peer, "]") {
		if inode, ok := socketInode(peer); ok {
			if s, ok := n.sockets[inode]; ok {
				e.SetPeer(s.name(peer))
			}
		}
	}
	target := e.Target()
	if !strings.HasSuffix(target, "]") {
		return
	}
	if inode, ok := socketInode(target); ok {
		if s, ok := n.sockets[inode]; ok {
			e.SetTarget(s.name(target))
			if e.Name == "close" {
				delete(n.sockets, inode)
			}
		}
	}
}

// learnSocket remembers what a socket call, connect, bind or accept says of
// a -y socket.
func (n *fdNamer) learnSocket(e *Event) {
	if n.sockets == nil {
		n.sockets = map[string]socketAddr{}
	}
	args := leadingArgs(e.Args, 2)
	switch e.Name {
	case "socket":
		if inode, ok := socketInode(fdTarget(e.Ret)); ok {
			n.sockets[inode] = socketAddr{proto: Protocol(socketName(args[0], args[1]))}
		}
	case "accept", "accept4":
		listener, _ := socketInode(e.Target())
		if inode, ok := socketInode(fdTarget(e.Ret)); ok {
			s := n.sockets[listener]
			s.addr = sockaddrText(args[1])
			n.sockets[inode] = s
		}
	case "connect", "bind":
		a := sockaddrText(args[1])
		if a == "" {
			return
		}
		inode, byInode := socketInode(e.Target()) // -y, not -yy
		s := n.sockets[inode]
		if s.proto == "" && strings.Contains(args[1], "sa_family=AF_UNIX,") {
			s.proto = "UNIX"
		}
		s.addr = a
		if e.Errno != "" && e.Errno != "EINPROGRESS" {
			e.SetTarget(s.name(e.Target())) // the fd stays as it was
		} else if byInode {
			n.sockets[inode] = s
		}
	}
}

// socketAddr is what a -y log said of a socket: its protocol (TCP, UDP,
// UNIX...) and the address it connected or bound to.
type socketAddr struct{ proto, addr string }

// name renames target ("socket:[1234]") to "TCP:[10.0.0.2:80]", or to
// "TCP:[1234]" before the socket has an address.
func (s socketAddr) name(target string) string {
	proto := Protocol(target)
	if proto == "socket" && s.proto != "" && s.proto != "socket" {
		proto = s.proto
	}
	if s.addr == "" {
		inode, _ := socketInode(target)
		return proto + ":[" + inode + "]"
	}
	return proto + ":[" + s.addr + "]"
}

// socketInode is the 1234 of a -y socket target "TCP:[1234]".
func socketInode(target string) (string, bool) {
	i := strings.Index(target, ":[")
	if i <= 0 || !strings.HasSuffix(target, "]") {
		return "", false
	}
	inode := target[i+2 : len(target)-1]
	if inode == "" || strings.Trim(inode, "0123456789") != "" {
		return "", false
	}
	return inode, true
}

// TakesFD says whether a call's first argument is an fd: what the live
// source names a call by, as -y would.
func TakesFD(name string) bool { return fdFirst[name] }

func (n *fdNamer) observe(e *Event) {
	if n.annotated {
		n.nameSocket(e)
		return
	}
	switch e.Kind {
	case Exit, Killed:
		delete(n.tables, e.PID) // the PID may be reused
		return
	case Syscall:
	default:
		return
	}
	c := e.Info()
	want := c.FDArgs
	if want < 0 {
		return
	}
	args := leadingArgs(e.Args, max(want, 1))
	// A -y target: the first argument's for most calls (what Target reads,
	// without splitting the arguments again), the return value's for opens,
	// sockets and accepts.
	if c.Open {
		n.annotated = e.Target() != ""
	} else if target := fdTarget(args[0]); target != "" {
		e.SetTarget(target)
		n.annotated = true
	} else if strings.HasSuffix(e.Ret, ">") {
		n.annotated = fdTarget(e.Ret) != ""
	}
	if n.annotated {
		n.nameSocket(e)
		return
	}
	t := n.tables[e.PID]
	if t == nil {
		t = &FDTable{FDs: map[int]string{}, seenFirst: true}
		n.tables[e.PID] = t
	}
	ret, ok := e.RetInt()
	ok = ok && e.Errno == "" && ret >= 0
	fd, isFD := atoi(args[0])
	if !isFD {
		fd = -1
	}
	switch e.Name {
	case "open", "creat", "openat", "openat2":
		if !ok {
			return
		}
		dirfd, p := "AT_FDCWD", args[0]
		if e.Name == "openat" || e.Name == "openat2" {
			dirfd, p = args[0], args[1]
		}
		name := t.resolve(dirfd, unquote(p))
		t.FDs[int(ret)] = name
		e.SetTarget(name)
		return
	case "close":
		if fd >= 0 {
			e.SetTarget(t.Name(fd))
			delete(t.FDs, fd)
		}
		return
	case "close_range":
		first, ok1 := atoi(args[0])
		last, err2 := strconv.ParseUint(args[1], 0, 32)
		if ok && ok1 && err2 == nil && !strings.Contains(args[2], "CLOSE_RANGE_CLOEXEC") {
			for f := range t.FDs {
				if f >= first && uint64(f) <= last {
					delete(t.FDs, f)
				}
			}
		}
		return
	case "dup", "dup2", "dup3", "fcntl":
		if fd < 0 {
			return
		}
		old := t.Name(fd)
		if ok && (e.Name != "fcntl" || args[1] == "F_DUPFD" || args[1] == "F_DUPFD_CLOEXEC") {
			t.FDs[int(ret)] = old
		}
		e.SetTarget(old)
		return
	case "socket":
		if ok {
			t.FDs[int(ret)] = socketName(args[0], args[1])
		}
		return
	case "connect", "bind":
		if fd < 0 {
			return
		}
		if a := sockaddrText(args[1]); a != "" {
			named := Protocol(t.Name(fd)) + ":[" + a + "]"
			if ok || e.Errno == "EINPROGRESS" {
				t.FDs[fd] = named
			} else {
				e.SetTarget(named) // what it failed to reach; the fd stays unnamed
				return
			}
		}
		e.SetTarget(t.Name(fd))
		return
	case "accept", "accept4":
		if fd < 0 {
			return
		}
		listener := t.Name(fd)
		if ok {
			t.FDs[int(ret)] = Protocol(listener) + ":[" + sockaddrText(args[1]) + "]"
		}
		e.SetTarget(listener)
		return
	case "pipe", "pipe2", "socketpair":
		list := args[0]
		kind := "pipe"
		if e.Name == "socketpair" {
			list, kind = args[3], Protocol(socketName(args[0], args[1]))
		}
		a, b, found := strings.Cut(strings.Trim(list, "[]"), ", ")
		r, ok1 := atoi(a)
		w, ok2 := atoi(b)
		if ok && found && ok1 && ok2 {
			n.pipes++
			name := kind + ":[#" + strconv.Itoa(n.pipes) + "]"
			t.FDs[r], t.FDs[w] = name, name
		}
		return
	case "poll", "ppoll":
		// [{fd=5, events=POLLIN}, ...]: the waits list names the first.
		if _, v, found := strings.Cut(args[0], "fd="); found {
			if end := strings.IndexAny(v, ",}"); end > 0 {
				if pfd, ok := atoi(v[:end]); ok {
					e.polled = t.Name(pfd)
				}
			}
		}
		return
	case "chdir":
		if ok {
			t.Cwd = t.resolve("AT_FDCWD", unquote(args[0]))
		}
		return
	case "fchdir":
		if fd >= 0 {
			e.SetTarget(t.Name(fd))
			if ok {
				t.Cwd = t.Name(fd)
			}
		}
		return
	case "clone", "clone3", "fork", "vfork":
		if child := e.Child(); child > 0 && e.Errno == "" {
			n.inherit(child, t, strings.Contains(e.Args, "CLONE_FILES"))
		}
		return
	}
	if fd >= 0 { // fdFirst and atCalls
		e.SetTarget(t.Name(fd))
	}
	if i := c.PeerArg; i > 0 {
		if pfd, ok := atoi(args[i-1]); ok {
			e.SetPeer(t.Name(pfd))
		}
	}
}

// atoi reads a non-negative decimal number without allocating an error.
func atoi(s string) (int, bool) {
	if !allDigits(s) || len(s) > 9 {
		return 0, false
	}
	v := 0
	for i := 0; i < len(s); i++ {
		v = v*10 + int(s[i]-'0')
	}
	return v, true
}

// inherit gives child the fd table of its creator: the same table for a
// thread (CLONE_FILES), a copy for a fork.
func (n *fdNamer) inherit(child int, parent *FDTable, shared bool) {
	c := n.tables[child]
	if c != nil && !c.seenFirst {
		return // already given
	}
	switch {
	case c == nil && shared:
		n.tables[child] = parent
	case c == nil:
		n.tables[child] = parent.Clone()
	case shared:
		// What the child opened before its creator's clone returned.
		for fd, s := range c.FDs {
			parent.FDs[fd] = s
		}
		n.tables[child] = parent
	default:
		for fd, s := range parent.FDs {
			if _, ok := c.FDs[fd]; !ok {
				c.FDs[fd] = s
			}
		}
		if c.Cwd == "" {
			c.Cwd = parent.Cwd
		}
		c.seenFirst = false
	}
}

// leadingArgs splits the first k (at most 4) top-level arguments off args.
func leadingArgs(args string, k int) (out [4]string) {
	for i := 0; i < k && args != ""; i++ {
		end := nextArgEnd(args)
		if end < 0 {
			out[i] = strings.TrimSpace(args)
			break
		}
		out[i] = strings.TrimSpace(args[:end])
		args = args[end+1:]
	}
	return out
}

// nextArgEnd is topLevelIndex(args, ','), quicker for the usual leading
// argument, a number or a constant: with no quote, bracket or fd annotation
// before the first comma, that comma ends it; with no comma at all, nothing
// does.
func nextArgEnd(args string) int {
	end := strings.IndexByte(args, ',')
	if end < 0 || !strings.ContainsAny(args[:end], "\"<()[]{}") {
		return end
	}
	return topLevelIndex(args, ',')
}

// unquote reads a quoted path as strace prints it; a path cut by -s keeps
// what was printed.
func unquote(s string) string {
	s = strings.TrimSuffix(s, "...")
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return unescape(s[1 : len(s)-1])
	}
	return s
}

// families are the address families strace names that SocketTarget tells apart.
var families = map[string]int{"AF_INET": unix.AF_INET, "AF_INET6": unix.AF_INET6, "AF_UNIX": unix.AF_UNIX,
	"AF_LOCAL": unix.AF_UNIX, "AF_NETLINK": unix.AF_NETLINK}

// socketName names a new socket from socket()'s first two arguments as
// strace prints them (AF_INET, SOCK_DGRAM|SOCK_CLOEXEC).
func socketName(domain, typ string) string {
	family := families[domain]
	kind := 0
	switch {
	case strings.HasPrefix(typ, "SOCK_STREAM"):
		kind = unix.SOCK_STREAM
	case strings.HasPrefix(typ, "SOCK_DGRAM"):
		kind = unix.SOCK_DGRAM
	}
	return SocketTarget(family, kind)
}

// SocketTarget names a new socket as strace -yy does before it connects
// (TCP:[], UDP:[], UNIX:[]...): the live source and logs without -y.
func SocketTarget(family, sockType int) string {
	sockType &^= unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC
	switch family {
	case unix.AF_INET, unix.AF_INET6:
		switch sockType {
		case unix.SOCK_STREAM:
			return "TCP:[]"
		case unix.SOCK_DGRAM:
			return "UDP:[]"
		}
		return "socket:[inet]"
	case unix.AF_UNIX:
		return "UNIX:[]"
	case unix.AF_NETLINK:
		return "NETLINK:[]"
	}
	return "socket:[]"
}

// Protocol is the "TCP" of "TCP:[...]".
func Protocol(target string) string {
	if i := strings.Index(target, ":["); i > 0 {
		return target[:i]
	}
	return "socket"
}

// sockaddrText renders strace's struct sockaddr as the live source does:
// 10.0.0.2:53, [::1]:443, /run/x.sock, @abstract.
func sockaddrText(s string) string {
	field := func(name string) string {
		i := strings.Index(s, name)
		if i < 0 {
			return ""
		}
		v := s[i+len(name):]
		if end := strings.IndexAny(v, ",}"); end >= 0 {
			v = v[:end]
		}
		return v
	}
	port := func(name string) (uint16, bool) {
		v := strings.TrimSuffix(strings.TrimPrefix(field(name), "htons("), ")")
		p, err := strconv.ParseUint(v, 10, 16)
		return uint16(p), err == nil
	}
	switch {
	case strings.Contains(s, "sa_family=AF_INET,"):
		ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(field("sin_addr="), `inet_addr("`), `")`))
		if p, ok := port("sin_port="); ok && err == nil {
			return netip.AddrPortFrom(ip, p).String()
		}
	case strings.Contains(s, "sa_family=AF_INET6,"):
		i := strings.Index(s, `inet_pton(AF_INET6, "`)
		if i < 0 {
			return ""
		}
		a, _, _ := strings.Cut(s[i+len(`inet_pton(AF_INET6, "`):], `"`)
		ip, err := netip.ParseAddr(a)
		if p, ok := port("sin6_port="); ok && err == nil {
			return netip.AddrPortFrom(ip, p).String()
		}
	case strings.Contains(s, "sa_family=AF_UNIX,"):
		i := strings.Index(s, "sun_path=")
		if i < 0 {
			return ""
		}
		v := s[i+len("sun_path="):]
		abstract := strings.HasPrefix(v, "@")
		v = strings.TrimPrefix(v, "@")
		if len(v) < 2 || v[0] != '"' {
			return ""
		}
		end := 1
		for end < len(v) && v[end] != '"' {
			if v[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(v) {
			return ""
		}
		p := unescape(v[1:end])
		if abstract {
			return "@" + p
		}
		return p
	}
	return ""
}
