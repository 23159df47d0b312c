// Package sysevent is what the live system-call source's kernel side
// (internal/ktrace) hands to its interpretation (internal/systrace): typed
// events, one per record of the BPF ring buffer or counter read from its
// maps, with the numbers of the kernel's slots already turned into threads
// and processes, and the tables both sides agree on. It holds data only,
// so that the interpretation can be tested by replaying recorded events.
package sysevent

// Kind says what an Event is.
type Kind uint8

// The kinds of events, in the order a trace produces them: Start first,
// then calls and tasks as they happen, then the counters read at the end.
const (
	Start    Kind = iota + 1 // tracing began at Time; Root is the traced process
	Call                     // one system call, sent whole: Name, TID, PID, Time, Dur, Ret, Args, Str, Raw
	Fork                     // PID (TID) created ChildTID in process ChildPID (== PID for a thread)
	Exec                     // TID of PID executed Str
	Exit                     // TID of PID exited at Time with wait status ExitCode
	FDIO                     // FD's counters in PID, flushed before FD was reused or closed: IO
	Counted                  // Calls, Errors, Ns of Name by TID of PID (possibly Unattributed)
	FDTotals                 // at the end: FD's counters in PID (Known false: the process is not known)
	Errnos                   // at the end: Calls of Name that failed with Errno, by no one in particular
	Bin                      // at the end: Calls and Ns of Category in the timeline bin at Time
)

// Unattributed is the TID and PID of counts that belong to no one thread.
const Unattributed = -1

// Event is one thing the kernel side saw or counted. Which fields are set
// depends on Kind.
type Event struct {
	Kind               Kind
	Name               string  // the system call
	TID, PID           int     // the thread and its process
	Root               int     // Start: the traced process
	Time               float64 // wall-clock seconds: the call's start, an exit, a bin's middle
	Dur                float64 // seconds
	Ret                int64   // the call's return value; -errno for an error
	Args               [6]uint64
	Str                string   // the call's path argument, or the program an exec ran
	Argv               []string // Exec: the program's arguments (cut at 512 bytes)
	UserNs, SysNs      uint64   // Exit: the thread's CPU time in user space and in the kernel
	Raw                []byte   // the call's struct sockaddr, or the 8 bytes behind a pointer argument
	ChildTID, ChildPID int
	ExitCode           int // a wait status: exit status << 8, or the killing signal
	FD                 int
	Known              bool // FDTotals: the process is known, so its fds can be named
	IO                 []IOCount
	Calls, Errors      int
	Ns                 uint64
	Errno              string // Errnos: ENOENT, ERESTARTSYS, or "other"
	Category           string // Bin
}

// IOCount is the I/O one kind of call did on one fd.
type IOCount struct {
	Name          string // the system call
	Peer          bool   // the fd was the call's second (splice's fd_out, sendfile's in_fd)
	Calls, Errors int
	Bytes         int64
	Ns            uint64
}

// IOKinds are the calls counted per fd, in the order of the kernel's fd_io
// counters.
var IOKinds = []string{"read", "write", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev",
	"preadv2", "pwritev2", "recvfrom", "sendto", "recvmsg", "sendmsg", "splice", "tee", "sendfile", "copy_file_range"}

// PeerKinds count the transfer calls' second fds, in the fd_io counters
// after IOKinds'; PeerArgs says where that fd is (1 + argument index).
var (
	PeerKinds = []string{"splice", "tee", "sendfile", "copy_file_range"}
	PeerArgs  = map[string]uint8{"splice": 3, "tee": 2, "sendfile": 2, "copy_file_range": 3}
)

// FDCreators return a new fd.
var FDCreators = set("open", "openat", "openat2", "creat", "socket", "accept", "accept4", "dup", "eventfd", "eventfd2",
	"epoll_create", "epoll_create1", "timerfd_create", "signalfd", "signalfd4", "memfd_create", "inotify_init",
	"inotify_init1", "pidfd_open", "userfaultfd", "fanotify_init", "perf_event_open", "io_uring_setup", "memfd_secret")

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}
