// Package kernel names what the kernel reports as numbers: errors, the
// clock of BPF timestamps, the release and the host, once for every
// source and view.
package kernel

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// restartCodes are the kernel's own codes from 512 on, which a system
// call that a signal interrupted returns at the exit tracepoint, before
// the kernel restarts it or turns the code into EINTR; strace names them so.
var restartCodes = []string{"ERESTARTSYS", "ERESTARTNOINTR", "ERESTARTNOHAND", "ENOIOCTLCMD", "ERESTART_RESTARTBLOCK"}

// ErrnoName names an error number as strace and errno(1) do: ENOENT for
// 2 (or -2: a FUSE reply and a system call's return carry it negated),
// ERESTARTSYS for 512, E4000 for a number with no name.
func ErrnoName(e int64) string {
	if e < 0 {
		e = -e
	}
	if name := unix.ErrnoName(syscall.Errno(e)); name != "" {
		return name
	}
	if e >= 512 && e-512 < int64(len(restartCodes)) {
		return restartCodes[e-512]
	}
	return "E" + strconv.FormatInt(e, 10)
}

// Clock turns BPF timestamps (bpf_ktime_get_ns: CLOCK_MONOTONIC, in ns)
// into wall-clock times, by the two clocks read together once. A wall
// clock stepped later (NTP) does not move the times already anchored.
type Clock struct {
	mono0 uint64
	wall0 time.Time
}

// NewClock anchors a Clock now.
func NewClock() Clock { return Clock{mono0: Monotonic(), wall0: time.Now()} }

// Wall is the wall-clock time of a BPF timestamp.
func (c Clock) Wall(ns uint64) time.Time {
	return c.wall0.Add(time.Duration(int64(ns) - int64(c.mono0)))
}

// Seconds is the wall-clock time of a BPF timestamp in seconds of the
// epoch, as strace -ttt writes it.
func (c Clock) Seconds(ns uint64) float64 {
	return float64(c.wall0.UnixNano())/1e9 + (float64(ns)-float64(c.mono0))/1e9
}

// Monotonic reads CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns.
func Monotonic() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// Release is uname -r.
func Release() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// Hostname names this machine in records.
func Hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
}

// FuseURingParam is fuse's switch for FUSE over io_uring (Linux 6.14+),
// one for the whole machine: the kernel offers a daemon the ring at INIT
// only while it is on.
const FuseURingParam = "/sys/module/fuse/parameters/enable_uring"

// FuseURingEnabled says whether FUSE over io_uring is enabled
// (FuseURingParam): daemons may then take requests from a ring instead of
// reading /dev/fuse.
func FuseURingEnabled() bool {
	b, err := os.ReadFile(FuseURingParam)
	return err == nil && len(b) > 0 && (b[0] == 'Y' || b[0] == '1')
}

// BPFStatsEnabled says whether the kernel accounts each BPF program's run
// time (sysctl kernel.bpf_stats_enabled=1, as bpftool prog show reads it).
func BPFStatsEnabled() bool {
	b, err := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled")
	return err == nil && len(b) > 0 && b[0] == '1'
}

// Comm is a thread's or process's command name (/proc/PID/comm), "" if it
// is gone or pid is 0.
func Comm(pid int) string {
	if pid <= 0 {
		return ""
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}
