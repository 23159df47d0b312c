package session

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// TerminateGrace is how long the processes of a command fusescope ends
// have to exit after SIGTERM before they are killed, as timeout -k gives.
const TerminateGrace = 2 * time.Second

// terminate ends a command still running when the run ends under it (its
// count of intervals reached, a second Ctrl-C, a traced mount gone):
// SIGTERM to it and every process it started that is still its
// descendant, as timeout signals its command's process group (the command
// stays in fusescope's, so that the terminal's Ctrl-C and input still
// reach it), then SIGKILL to those left after the grace period. It says
// so on log, and returns how the command ended.
func (c *command) terminate(why string, log func(string)) *Exit {
	var tree processes
	defer tree.close()
	c.addTree(&tree)
	started := max(len(tree)-1, 0)
	tree.signal(unix.SIGTERM)
	sent := "SIGTERM"
	deadline := time.Now().Add(TerminateGrace)
	for tree.alive() {
		if time.Now().After(deadline) {
			tree.signal(unix.SIGKILL)
			sent = fmt.Sprintf("SIGTERM, and SIGKILL %v later", TerminateGrace)
			break
		}
		time.Sleep(10 * time.Millisecond)
		if n := len(tree); c.addTree(&tree) > 0 { // forked meanwhile
			tree[n:].signal(unix.SIGTERM)
		}
	}
	// SIGKILL cannot be ignored, but a process takes a moment to die on a
	// loaded machine: nothing of the command's may outlive the run.
	for killBy := deadline.Add(TerminateGrace); tree.alive() && time.Now().Before(killBy); {
		time.Sleep(5 * time.Millisecond)
	}
	<-c.done
	e := c.ended()
	if log != nil {
		also := ""
		switch {
		case started == 1:
			also = " and the process it started"
		case started > 1:
			also = fmt.Sprintf(" and the %d processes it started", started)
		}
		log(fmt.Sprintf("%s (pid %d) was still running when %s: sent it%s %s; it ended %s.",
			filepath.Base(c.name), c.pid, why, also, sent, e.describe()))
	}
	return e
}

// addTree adds the command's tree to ps, while its pid is still its: until
// it has been waited for, a pid that exited cannot be given to another.
func (c *command) addTree(ps *processes) int {
	select {
	case <-c.done:
		return 0
	default:
		return ps.add(c.pid)
	}
}

// describe says how a command ended, as a shell would report it.
func (e *Exit) describe() string {
	switch {
	case e.Status != nil:
		return fmt.Sprintf("with status %d", *e.Status)
	case e.KilledBy != "":
		return "by " + e.KilledBy
	}
	return "with no status"
}

// processes are pidfds, so that a process that exits is never mistaken for
// another that later gets its pid.
type processes []process

type process struct {
	pid, fd int
}

// add opens the processes of root's tree not held yet, and returns how
// many. A process is kept only if, once its pidfd is open, its parent is
// still root or a process of the tree: its pid was not given to another.
func (ps *processes) add(root int) int {
	n := 0
	parents := descendants(root)
	for _, pid := range parents {
		known := false
		for _, p := range *ps {
			known = known || p.pid == pid
		}
		if known {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if pid != root && !slices.Contains(parents, parentOf(pid)) {
			syscall.Close(fd)
			continue
		}
		*ps = append(*ps, process{pid, fd})
		n++
	}
	return n
}

func (ps processes) signal(sig unix.Signal) {
	for _, p := range ps {
		unix.PidfdSendSignal(p.fd, sig, nil, 0)
	}
}

// alive says whether a process of ps has not exited: its pidfd becomes
// readable when it does.
func (ps processes) alive() bool {
	for _, p := range ps {
		fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(fds, 0); err == nil && n == 0 {
			return true
		}
	}
	return false
}

func (ps processes) close() {
	for _, p := range ps {
		syscall.Close(p.fd)
	}
}

// descendants is pid and the processes under it now, parents first.
func descendants(pid int) []int {
	children := map[int][]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		child, err := strconv.Atoi(strings.Split(f, "/")[2])
		if err != nil {
			continue
		}
		if parent := parentOf(child); parent > 0 {
			children[parent] = append(children[parent], child)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// parentOf is a process's parent, or 0 if it is gone.
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 2 {
		return 0
	}
	parent, _ := strconv.Atoi(fields[1])
	return parent
}
