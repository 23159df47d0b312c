package labfs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
)

// ControlDir holds the control sockets of running lab file systems.
func ControlDir() string {
	if os.Geteuid() == 0 {
		return "/run/fusescope"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "fusescope")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("fusescope-%d", os.Geteuid()))
}

// SocketPath is the control socket of the lab file system mounted at mnt.
func SocketPath(mnt string) string {
	abs, err := filepath.Abs(mnt)
	if err != nil {
		abs = mnt
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(ControlDir(), hex.EncodeToString(sum[:8])+".sock")
}

type controlServer struct {
	l    net.Listener
	path string
}

// serveControl answers each connection on the control socket with the
// daemon's statistics as one JSON record. The socket is 0600: the statistics
// are the mounting user's.
func serveControl(f *FS) (*controlServer, error) {
	dir := ControlDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("control socket directory %s: %v", dir, err)
	}
	path := SocketPath(f.MountPoint)
	os.Remove(path) // left by a daemon that was killed
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %v", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	c := &controlServer{l: l, path: path}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			f.Record().Write(conn)
			conn.Close()
		}
	}()
	return c, nil
}

func (c *controlServer) close() {
	c.l.Close()
	os.Remove(c.path)
}

// Stats asks the lab file system mounted at mnt for its statistics.
func Stats(mnt string) (*profile.Record, error) {
	path := SocketPath(mnt)
	conn, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("no fusescope lab file system answers for %s (%s: %v): mount one with fusescope fs mount SRC %s", mnt, path, unwrapSyscall(err), mnt)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	var buf []byte
	tmp := make([]byte, 64<<10)
	for {
		n, err := conn.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if err != nil {
			break
		}
	}
	return profile.Parse(buf)
}

func unwrapSyscall(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		var se *os.SyscallError
		if errors.As(op.Err, &se) {
			return se.Err
		}
		return op.Err
	}
	return err
}
