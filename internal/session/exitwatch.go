package session

import (
	"context"
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

// wait blocks until the process has exited (true) or ctx ends (false).
func (w *exitWatch) wait(ctx context.Context) bool {
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
	for ctx.Err() == nil {
		n, err := unix.Poll(fds, 100)
		if n > 0 || (err != nil && err != unix.EINTR) {
			return true
		}
	}
	return false
}

func (w *exitWatch) close() { unix.Close(w.fd) }
