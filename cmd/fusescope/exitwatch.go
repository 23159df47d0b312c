package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// exitWatch opens a pidfd on process pid, so that -p can end when the
// process does (as strace -p does); a PID, unlike a pidfd, may be reused.
type exitWatch struct{ fd int }

func watchExit(pid int) (*exitWatch, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("-p %d: %v: give the PID of a running process", pid, err)
	}
	return &exitWatch{fd: fd}, nil
}

// wait blocks until the process has exited.
func (w *exitWatch) wait() {
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
	for {
		if n, err := unix.Poll(fds, -1); n > 0 || (err != nil && err != unix.EINTR) {
			return
		}
	}
}

func (w *exitWatch) close() { unix.Close(w.fd) }
