package profile

// The system-call section of a record: what fusescope syscalls found in
// strace logs or live (docs/syscalls.md).

import (
	"fmt"
	"strconv"
	"strings"
)

// SyscallFilter records the filters a report was made with (the flags'
// values; seconds count from a log's first timestamp, or live from the
// command's release, or -p's attach).
type SyscallFilter struct {
	PIDs     []int    `json:"pids,omitempty"`
	Comms    []string `json:"comms,omitempty"`
	Files    []string `json:"files,omitempty"`
	Category string   `json:"category,omitempty"`
	SinceS   float64  `json:"since_s,omitempty"`
	UntilS   float64  `json:"until_s,omitempty"`
}

// Flags writes the filter as the flags that make it.
func (f *SyscallFilter) Flags() string {
	var out []string
	for _, p := range f.PIDs {
		out = append(out, fmt.Sprintf("-p %d", p))
	}
	for _, c := range f.Comms {
		out = append(out, "--comm "+strconv.Quote(c))
	}
	for _, g := range f.Files {
		out = append(out, "--file "+strconv.Quote(g))
	}
	if f.Category != "" {
		out = append(out, "--category "+strconv.Quote(f.Category))
	}
	if f.SinceS != 0 {
		out = append(out, fmt.Sprintf("--since %g", f.SinceS))
	}
	if f.UntilS != 0 {
		out = append(out, fmt.Sprintf("--until %g", f.UntilS))
	}
	return strings.Join(out, " ")
}

// SyscallReport is what the analyzers found: plain data for every view.
type SyscallReport struct {
	Filter      *SyscallFilter `json:"filter,omitempty"` // what was kept; nil: everything
	Lines       int            `json:"lines"`
	Events      int            `json:"events"`
	Malformed   int            `json:"malformed"`
	FirstBad    []Malformed    `json:"first_malformed,omitempty"`
	Unfinished  int            `json:"unfinished"`             // calls never resumed (killed, or the log was cut)
	Syscalls    []SyscallStat  `json:"syscalls"`               // by total time, then calls
	Errnos      []ErrnoStat    `json:"errnos"`                 // failed calls by system call and errno, most first
	Files       []FileStat     `json:"files"`                  // by total time
	FollowedFDs bool           `json:"fds_followed,omitempty"` // a log without -y: fds named from the calls that made them
	Categories  []CategoryStat `json:"categories"`
	Waits       []Wait         `json:"waits"` // longest first
	// WaitGroups: the blocking calls of at least WaitMinS, by call and
	// target, most time first.
	WaitGroups []WaitGroup `json:"wait_groups"`
	WaitMinS   float64     `json:"wait_min_s,omitempty"`
	// CriticalPath explains the root process's run, from its start to its
	// end: its programs one after another, the waits of WaitMinS or more
	// of each, the children it waited for (explained the same way), and
	// the time outside those waits. CriticalTop sums its waits by call
	// and target: the top item is where a slow start went.
	CriticalPath []PathStep    `json:"critical_path,omitempty"`
	CriticalTop  []PathItem    `json:"critical_top,omitempty"`
	Processes    []Process     `json:"processes"`
	Timeline     []TimelineBin `json:"timeline,omitempty"`
	TimelineBinS float64       `json:"timeline_bin_s,omitempty"`
	// TimelineDropped counts calls that fell in no bin: a log spanning more
	// than MaxTimelineBins bins.
	TimelineDropped int       `json:"timeline_dropped_calls,omitempty"`
	Live            *LiveInfo `json:"live,omitempty"` // set when the events came from the live source
	TotalTime       float64   `json:"total_time_s"`   // sum of -T durations
	Span            float64   `json:"span_s"`         // last timestamp minus first
	HasDuration     bool      `json:"has_duration"`   // the log had -T
}

// LiveInfo describes a live trace (fusescope syscalls -- CMD, or -p PID).
type LiveInfo struct {
	Command    []string          `json:"command,omitempty"`
	PID        int               `json:"pid"`
	MinWaitS   float64           `json:"min_wait_s"`          // calls this long were kept one by one
	WallS      float64           `json:"wall_s"`              // from the start of tracing to its end
	SetupS     float64           `json:"setup_s,omitempty"`   // loading and attaching the programs, before the command runs
	LoadedBy   string            `json:"loaded_by,omitempty"` // the server whose programs traced the run (syscalls --serve); empty: loaded for it
	CommandS   float64           `json:"command_s,omitempty"` // the command's run, from its exec to its exit
	Drops      map[string]uint64 `json:"drops,omitempty"`
	ExitStatus *int              `json:"exit_status,omitempty"` // of the command
	KilledBy   string            `json:"killed_by,omitempty"`   // the signal that killed the command
}

// SyscallStat is one system call's totals.
type SyscallStat struct {
	Name     string  `json:"name"`
	Category string  `json:"category"`
	Calls    int     `json:"calls"`
	Errors   int     `json:"errors"`
	TimeS    float64 `json:"time_s"`
}

// ErrnoStat counts the calls of one system call that failed with one errno.
type ErrnoStat struct {
	Syscall string `json:"syscall"`
	Errno   string `json:"errno"` // ENOENT; ERESTARTSYS and the like for a live call a signal interrupted
	Calls   int    `json:"calls"`
}

// FileStat is the I/O on one file, socket, pipe or device, as strace -y
// names it.
type FileStat struct {
	Target       string  `json:"target"`
	Kind         string  `json:"kind"` // file, device, tcp, udp, unix, pipe, socket, other
	Opens        int     `json:"opens"`
	Reads        int     `json:"reads"`
	Writes       int     `json:"writes"`
	BytesRead    int64   `json:"bytes_read"`
	BytesWritten int64   `json:"bytes_written"`
	Calls        int     `json:"calls"`
	TimeS        float64 `json:"time_s"`
	// Missing: lookups of this path that failed with ENOENT (opens,
	// stats, access, readlink, execve): a search path's probes.
	Missing int `json:"missing,omitempty"`
}

// CategoryStat is the time spent in one category of system calls.
type CategoryStat struct {
	Category string  `json:"category"`
	Calls    int     `json:"calls"`
	TimeS    float64 `json:"time_s"`
}

// Wait is one long blocking call: the stalls seed 002 hunted (a DNS lookup
// waiting for a timeout).
type Wait struct {
	PID    int     `json:"pid"`
	Line   int     `json:"line,omitempty"` // in the log; a live source has none
	Name   string  `json:"name"`
	Target string  `json:"target,omitempty"`
	Start  float64 `json:"start"`
	DurS   float64 `json:"dur_s"`
	Errno  string  `json:"errno,omitempty"`
}

// Process is one process of the traced tree.
type Process struct {
	PID    int     `json:"pid"`
	Parent int     `json:"parent,omitempty"`
	Exec   string  `json:"exec,omitempty"` // last program it executed
	Start  float64 `json:"start"`
	End    float64 `json:"end"`
	Exit   *int    `json:"exit,omitempty"`
	Killed string  `json:"killed_by,omitempty"`
	Calls  int     `json:"calls"`
	// Threads: how many threads the process ran that were seen, itself
	// included, when more than one. Their calls are the process's.
	Threads int `json:"threads,omitempty"`
	// Execs: every program it executed, in order, with its arguments (a
	// shim's chain: bash, then python3).
	Execs []ExecStep `json:"execs,omitempty"`
	// SyscallS is the time its threads spent in system calls; OutsideS
	// the rest of their lives (each thread's lifetime less its calls,
	// summed): running in user space, or waiting to run. UserCPUS and
	// SysCPUS are the kernel's own CPU times of its threads (live only).
	SyscallS float64 `json:"syscall_s"`
	OutsideS float64 `json:"outside_s"`
	UserCPUS float64 `json:"user_cpu_s,omitempty"`
	SysCPUS  float64 `json:"sys_cpu_s,omitempty"`
	// Blocked: its main thread's calls of at least the report's
	// WaitMinS, in order (the first MaxBlocked): the long waits a
	// timeline draws and the critical path follows.
	Blocked []Span `json:"blocked,omitempty"`
}

// ExecStep is one program a process executed.
type ExecStep struct {
	Start   float64  `json:"start"`
	Program string   `json:"program"`
	Args    []string `json:"args,omitempty"`
}

// Span is one long call of a process's main thread.
type Span struct {
	Start  float64 `json:"start"`
	DurS   float64 `json:"dur_s"`
	Name   string  `json:"name"`
	Target string  `json:"target,omitempty"`
	Child  int     `json:"child,omitempty"` // wait4, waitid: the child it reaped
	Errno  string  `json:"errno,omitempty"`
}

// MaxBlocked bounds the long calls kept per process.
const MaxBlocked = 10000

// WaitGroup is the blocking calls of one system call on one target.
type WaitGroup struct {
	Name   string  `json:"name"`
	Target string  `json:"target,omitempty"`
	Calls  int     `json:"calls"`
	TimeS  float64 `json:"time_s"`
	MaxS   float64 `json:"max_s"`
}

// PathStep is one step of the critical path, Depth deep: a program run
// (Kind "exec": PID, Program, Args), a wait of it ("wait": Name, Target;
// a wait for a child is followed by the child's steps one deeper), or the
// time between its waits ("outside": in user space or in shorter calls).
type PathStep struct {
	Depth   int      `json:"depth"`
	Kind    string   `json:"kind"`
	PID     int      `json:"pid"`
	Program string   `json:"program,omitempty"`
	Args    []string `json:"args,omitempty"`
	Name    string   `json:"name,omitempty"`
	Target  string   `json:"target,omitempty"`
	Start   float64  `json:"start"`
	DurS    float64  `json:"dur_s"`
}

// PathItem sums the critical path's waits on one call and target (a
// child's waits count for themselves, not in the wait for the child), and
// the time outside them by program.
type PathItem struct {
	Kind    string  `json:"kind"` // wait, outside
	Name    string  `json:"name,omitempty"`
	Target  string  `json:"target,omitempty"`
	Program string  `json:"program,omitempty"`
	DurS    float64 `json:"dur_s"`
	Share   float64 `json:"share"` // of the root's elapsed time
}

// TimelineBin is one interval of the timeline: calls and time per category.
type TimelineBin struct {
	Start float64            `json:"start_s"` // seconds after the first timestamp (live: the command's release, or -p's attach)
	Calls map[string]int     `json:"calls"`
	TimeS map[string]float64 `json:"time_s"`
}

// Malformed is a line the parser could not read.
type Malformed struct {
	File string `json:"file,omitempty"` // when the log came from a named file
	Line int    `json:"line"`
	Text string `json:"text"`
	Why  string `json:"why"`
}

// SyscallCategories lists the categories of system calls, in the order
// every view shows them.
var SyscallCategories = []string{"file I/O", "network", "IPC", "memory", "process", "sleep and timers", "other"}

// withLists returns r with its lists as arrays even when empty, never
// null, so that jq's .syscalls.waits[] works on any report. A copy, made
// as the record is written: a MarshalJSON method here cost the encoder
// two more passes over a report's 4.6 MB of files.
func (r *SyscallReport) withLists() *SyscallReport {
	c := *r
	c.Syscalls, c.Files, c.Categories = nonNil(c.Syscalls), nonNil(c.Files), nonNil(c.Categories)
	c.Waits, c.Processes, c.Errnos = nonNil(c.Waits), nonNil(c.Processes), nonNil(c.Errnos)
	c.WaitGroups = nonNil(c.WaitGroups)
	return &c
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// MaxTimelineBins bounds the timeline's memory.
const MaxTimelineBins = 100000
