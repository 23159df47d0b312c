package strace

import (
	"slices"

	"github.com/fusescope/fusescope/internal/profile"
)

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
func Category(name string) string { return LookupCall(name).Category }

// Call is what the parser, the fd naming and the analyzers ask of a
// system call's name, found with one lookup per event (Event.Info) rather
// than one per question.
type Call struct {
	ID                      int // 1..KnownCalls() for the calls of callInfos; 0 for otherCall
	Name                    string
	Category                string
	CatIndex                int // Category's index in profile.SyscallCategories
	Open, Read, Write, Wait bool
	Spawn                   bool // clone, clone3, fork, vfork: returns the id of what it made
	FDArgs                  int  // leading arguments nameFDs reads; -1: the call involves no fd
	// PeerArg: 1 + the argument holding a transfer call's second fd
	// (splice's fd_out, sendfile's in_fd), which moves the bytes the other
	// way: a call that reads its first fd writes its peer, and the reverse.
	PeerArg int
}

var (
	callInfos = map[string]*Call{}
	otherCall = &Call{Category: "other", CatIndex: CategoryIndex("other"), FDArgs: -1}
	// What a read, write or wait counts for when its fd is a socket or a pipe.
	networkCategory, ipcCategory = CategoryIndex("network"), CategoryIndex("IPC")
)

// categoryIndex is cat's index in profile.SyscallCategories.
func CategoryIndex(cat string) int {
	i := slices.Index(profile.SyscallCategories, cat)
	if i < 0 {
		panic("no system-call category " + cat)
	}
	return i
}

func init() {
	get := func(name string) *Call {
		c := callInfos[name]
		if c == nil {
			c = &Call{Category: "other", CatIndex: otherCall.CatIndex, FDArgs: -1}
			callInfos[name] = c
		}
		return c
	}
	for name, cat := range categories {
		get(name).Category, get(name).CatIndex = cat, CategoryIndex(cat)
	}
	for name := range openCalls {
		get(name).Open = true
	}
	for name := range spawnCalls {
		get(name).Spawn = true
	}
	for name := range readCalls {
		get(name).Read = true
	}
	for name := range writeCalls {
		get(name).Write = true
	}
	for name := range waitCalls {
		get(name).Wait = true
	}
	for name, n := range FDArgs {
		get(name).FDArgs = n
	}
	for name, n := range peerArgs {
		get(name).PeerArg = n
	}
	for name, c := range callInfos {
		knownCalls++
		c.ID, c.Name = knownCalls, name
		i := callSlot(name)
		for callTable[i] != nil {
			i = (i + 1) & (len(callTable) - 1)
		}
		callTable[i] = c
	}
}

// knownCalls is how many calls callInfos knows.
var knownCalls int

// KnownCalls is how many calls have an ID: an array of KnownCalls()+1
// counters indexes them all.
func KnownCalls() int { return knownCalls }

// callTable finds a name's Call with less work than a map lookup,
// which was 7% of a log's analysis: open addressing with linear probing,
// at a tenth full, so a lookup mostly compares one name.
var callTable [2048]*Call

func callSlot(name string) int {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(name); i++ {
		h = (h ^ uint32(name[i])) * 16777619
	}
	return int(h^h>>15) & (len(callTable) - 1)
}

func LookupCall(name string) *Call {
	for i := callSlot(name); ; i = (i + 1) & (len(callTable) - 1) {
		c := callTable[i]
		if c == nil {
			return otherCall
		}
		if c.Name == name {
			return c
		}
	}
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

// Blocking calls whose duration is waiting, not work.
var waitCalls = set("connect", "accept", "accept4", "poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait",
	"epoll_pwait2", "recvfrom", "recvmsg", "recv", "futex", "nanosleep", "clock_nanosleep", "wait4", "waitid", "read",
	"rt_sigsuspend", "rt_sigtimedwait", "pause")

// category is the call's category by what it worked on: a read, write or
// poll of a socket is network, of a pipe IPC, whatever its name's
// category.
func (e *Event) Category() string { return profile.SyscallCategories[e.CategoryIndex()] }

// categoryIndex is category's index in profile.SyscallCategories.
func (e *Event) CategoryIndex() int {
	c := e.Info()
	if !c.Read && !c.Write && !c.Wait {
		return c.CatIndex
	}
	switch TargetKind(e.FileTarget()) {
	case "tcp", "udp", "unix", "socket":
		return networkCategory
	case "pipe":
		return ipcCategory
	}
	return c.CatIndex
}
