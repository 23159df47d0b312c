package fuseconn

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/fusescope/fusescope/internal/profile"
	"golang.org/x/sys/unix"
)

// Holder is one open /dev/fuse file of a process: the daemon's end of a
// connection. A daemon with several (libfuse's clone_fd opens /dev/fuse
// once per worker thread and clones the session into each with
// FUSE_DEV_IOC_CLONE) has one Holder per fd.
type Holder struct {
	PID  int    // the process (its threads share the fd)
	FD   int    // the descriptor's number in it
	Comm string // its command, as /proc/PID/comm says
	Conn uint32 // the connection the file serves; 0 before the mount is made
}

// devFuse is /dev/fuse's device number, 10:229 (misc, FUSE_MINOR).
var devFuse = unix.Mkdev(10, 229)

// Holders lists every open /dev/fuse of every process that /proc shows,
// by process then fd. The connection comes from the fd's fdinfo, whose
// fuse_connection line (where the kernel prints it; 6.18 does) names the connection the
// file was mounted with or cloned into; a file opened but not yet mounted
// with, or a kernel without that line, gives 0. Processes that exit while
// being read, and those this user cannot read, are left out.
//
// The number is the one the connection had: once its mount is gone (and
// the connection with it) the number can be given to a new mount while
// the old daemon, not yet exited, still holds its fd. Such an fd, of a
// connection that has ended, is left out.
func Holders() ([]Holder, error) { return holdersIn("/proc") }

// HoldersOf lists the holders of one connection.
func HoldersOf(conn uint32) ([]Holder, error) {
	all, err := Holders()
	if err != nil {
		return nil, err
	}
	var out []Holder
	for _, h := range all {
		if h.Conn == conn {
			out = append(out, h)
		}
	}
	return out, nil
}

func holdersIn(proc string) ([]Holder, error) {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return nil, err
	}
	var out []Holder
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join(proc, e.Name())
		fds, err := os.ReadDir(filepath.Join(dir, "fd"))
		if err != nil {
			continue
		}
		var comm string
		for _, fd := range fds {
			n, err := strconv.Atoi(fd.Name())
			if err != nil || !isDevFuse(filepath.Join(dir, "fd", fd.Name())) {
				continue
			}
			if comm == "" {
				b, _ := os.ReadFile(filepath.Join(dir, "comm"))
				comm = strings.TrimSpace(string(b))
			}
			info, _ := os.ReadFile(filepath.Join(dir, "fdinfo", fd.Name()))
			conn := fdinfoConn(info)
			if conn != 0 && disconnected(pid, n) {
				continue // its number may be a new mount's now
			}
			out = append(out, Holder{PID: pid, FD: n, Comm: comm, Conn: conn})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].PID != out[j].PID {
			return out[i].PID < out[j].PID
		}
		return out[i].FD < out[j].FD
	})
	return out, nil
}

// isDevFuse tells whether an fd link opens the FUSE device: by its device
// number, so a /dev/fuse made elsewhere (a container's) counts too. The
// link's text is looked at first, as stat of every fd of every process
// would touch sockets, pipes and files on hung mounts alike.
func isDevFuse(link string) bool {
	target, err := os.Readlink(link)
	if err != nil || !strings.HasSuffix(target, "fuse") {
		return false
	}
	var st unix.Stat_t
	if err := unix.Stat(link, &st); err != nil {
		return false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == devFuse
}

// disconnected says whether a process's /dev/fuse fd serves a connection
// that has ended (unmounted or aborted): a copy of the fd (pidfd_getfd,
// Linux 5.6) polls with an error then, where a live connection's polls
// readable or not at all. Where the copy cannot be made (an older kernel,
// no right to the process), the fd counts as live.
func disconnected(pid, fd int) bool {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(pidfd)
	dup, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		return false
	}
	defer unix.Close(dup)
	fds := []unix.PollFd{{Fd: int32(dup), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, 0); err != nil || n == 0 {
		return false
	}
	return fds[0].Revents&unix.POLLERR != 0
}

// fdinfoConn reads the fuse_connection line of an fd's fdinfo; 0 if none.
func fdinfoConn(info []byte) uint32 {
	sc := bufio.NewScanner(bytes.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "fuse_connection:"); ok {
			if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32); err == nil {
				return uint32(n)
			}
		}
	}
	return 0
}

// User is a process that keeps a mount busy: its working or root
// directory, or a file it has open, is under the mount point.
type User struct {
	PID  int
	Comm string
	What string // "cwd", "root", or the open file's path
}

// Users lists the processes that keep mnt busy, as fuser -m would, from
// the links in /proc (which name a file without asking its daemon).
// Processes this user cannot read are left out.
func Users(mnt string) ([]User, error) { return usersIn("/proc", mnt) }

func usersIn(proc, mnt string) ([]User, error) {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return nil, err
	}
	under := func(p string) bool { return p == mnt || strings.HasPrefix(p, strings.TrimSuffix(mnt, "/")+"/") }
	var out []User
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join(proc, e.Name())
		var what string
		for _, link := range []string{"cwd", "root"} {
			if t, err := os.Readlink(filepath.Join(dir, link)); err == nil && under(t) && what == "" {
				what = link
			}
		}
		if what == "" {
			fds, _ := os.ReadDir(filepath.Join(dir, "fd"))
			for _, fd := range fds {
				if t, err := os.Readlink(filepath.Join(dir, "fd", fd.Name())); err == nil && under(t) {
					what = t
					break
				}
			}
		}
		if what != "" {
			b, _ := os.ReadFile(filepath.Join(dir, "comm"))
			out = append(out, User{PID: pid, Comm: strings.TrimSpace(string(b)), What: what})
		}
	}
	return out, nil
}

// AddDaemons fills in each mount's daemons: the processes holding its
// connection's /dev/fuse, one scan of /proc for all of them. A process
// this user cannot read is left out.
func AddDaemons(mounts []profile.Mount) {
	holders, err := Holders()
	if err != nil {
		return
	}
	addDaemons(mounts, holders)
}

func addDaemons(mounts []profile.Mount, holders []Holder) {
	for i := range mounts {
		m := &mounts[i]
		m.Daemons = nil
		for _, h := range holders {
			if h.Conn != m.Conn || h.Conn == 0 {
				continue
			}
			if n := len(m.Daemons); n > 0 && m.Daemons[n-1].PID == h.PID {
				m.Daemons[n-1].FDs++ // holders come by process, then fd
				continue
			}
			m.Daemons = append(m.Daemons, profile.Daemon{PID: h.PID, Comm: h.Comm, FDs: 1})
		}
	}
}
