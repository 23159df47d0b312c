package labfs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
	"golang.org/x/sys/unix"
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

// PrivateControlDir returns ControlDir, made if missing, once it is known to
// be a directory of the user's own that no one else can write: in a shared
// /tmp, a directory another user made first could swap the sockets and logs
// in it for symlinks to the user's files.
func PrivateControlDir() (string, error) {
	dir := ControlDir()
	return dir, privateDir(dir)
}

func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("control socket directory %s: %w", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("control socket directory %s: %w", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return fmt.Errorf("control socket directory %s is not a private directory of yours (owner uid %d, mode %o): remove it, or set XDG_RUNTIME_DIR", dir, st.Uid, st.Mode&0o7777)
	}
	return nil
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

// LogPath is where a detached daemon of the mount at mnt writes its
// output: beside its control socket.
func LogPath(mnt string) string {
	return strings.TrimSuffix(SocketPath(mnt), ".sock") + ".log"
}

// removeIfEmpty removes a daemon's log that holds nothing: kept only when
// the daemon said something.
func removeIfEmpty(log string) {
	if fi, err := os.Lstat(log); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
		os.Remove(log)
	}
}

// controlServer answers on the control socket with plain blocking system
// calls on a thread of its own. A goroutine parked in Go's network poller
// (net.Listener.Accept) makes the runtime's idle threads sleep in epoll
// rather than on a futex, and every wakeup of a request goroutine then costs
// more: 4 KiB direct reads from disk through the lab file system took ~20%
// longer than through go-fuse's loopback with the listener, and the same
// without it (docs/performance.md).
type controlServer struct {
	fd      int
	path    string
	closing atomic.Bool
	done    chan struct{}
}

// serveControl answers each connection on the control socket with the
// daemon's statistics as one JSON record. The socket is 0600: the statistics
// are the mounting user's.
func serveControl(f *FS) (*controlServer, error) {
	if _, err := PrivateControlDir(); err != nil {
		return nil, err
	}
	path := SocketPath(f.MountPoint)
	removeStaleSockets(filepath.Dir(path))
	fd, err := listenControl(path)
	if err != nil {
		return nil, err
	}
	c := &controlServer{fd: fd, path: path, done: make(chan struct{})}
	go c.serve(f)
	return c, nil
}

// listenControl makes the control socket at path, 0600, and listens on it.
// The socket is bound, closed to others and listening under a name of its
// own before it is renamed to path: a socket at a *.sock path that
// refuses a connection is a dead daemon's, which another daemon starting
// meanwhile removes (removeStaleSockets), so a bound socket not yet
// listening must never be found there.
func listenControl(path string) (int, error) {
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	os.Remove(tmp)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("control socket %s: %w", path, err)
	}
	fail := func(err error) (int, error) {
		unix.Close(fd)
		os.Remove(tmp)
		return -1, fmt.Errorf("control socket %s: %w", path, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: tmp}); err != nil {
		return fail(err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fail(err)
	}
	if err := unix.Listen(fd, 16); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	return fd, nil
}

// removeStaleSockets removes the control sockets in dir that no daemon
// answers on: those of daemons that were killed, whichever mount points
// they served (a remount at the same place would replace its own anyway),
// and their logs where they are empty.
func removeStaleSockets(dir string) {
	socks, _ := filepath.Glob(filepath.Join(dir, "*.sock"))
	for _, sock := range socks {
		removeStaleSocket(sock)
	}
	// A socket a daemon died with before renaming it into place: its
	// process is gone.
	tmps, _ := filepath.Glob(filepath.Join(dir, "*.sock.*.tmp"))
	for _, tmp := range tmps {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Ext(strings.TrimSuffix(tmp, ".tmp")), "."))
		if err == nil && pid > 0 && errors.Is(unix.Kill(pid, 0), unix.ESRCH) {
			os.Remove(tmp)
		}
	}
}

// removeStaleSocket removes a control socket, and its log if empty, when no
// daemon answers on it.
func removeStaleSocket(sock string) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return
	}
	err = unix.Connect(fd, &unix.SockaddrUnix{Name: sock})
	unix.Close(fd)
	if errors.Is(err, unix.ECONNREFUSED) {
		os.Remove(sock)
		removeIfEmpty(strings.TrimSuffix(sock, ".sock") + ".log")
	}
}

func (c *controlServer) serve(f *FS) {
	defer close(c.done)
	for {
		conn, _, err := unix.Accept4(c.fd, unix.SOCK_CLOEXEC)
		if c.closing.Load() {
			if err == nil {
				unix.Close(conn)
			}
			return
		}
		if err != nil {
			if err == unix.EINTR || err == unix.ECONNABORTED {
				continue
			}
			return
		}
		// A client that stops reading must not hold the daemon's answer
		// thread: writes give up after 10 s.
		unix.SetsockoptTimeval(conn, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &unix.Timeval{Sec: 10})
		f.Record().Write(fdWriter(conn))
		unix.Close(conn)
	}
}

// close stops the answering thread (a connection of our own wakes its
// blocking accept) and removes the socket.
func (c *controlServer) close() {
	c.closing.Store(true)
	if fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err == nil {
		if unix.Connect(fd, &unix.SockaddrUnix{Name: c.path}) == nil {
			select {
			case <-c.done:
			case <-time.After(5 * time.Second):
			}
		}
		unix.Close(fd)
	}
	unix.Close(c.fd)
	os.Remove(c.path)
}

// fdWriter writes to a blocking file descriptor without Go's poller.
type fdWriter int

func (w fdWriter) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := unix.Write(int(w), p[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		n += m
	}
	return n, nil
}

// Stats asks the lab file system mounted at mnt for its statistics.
func Stats(mnt string) (*profile.Record, error) {
	if _, err := PrivateControlDir(); err != nil {
		return nil, err
	}
	path := SocketPath(mnt)
	conn, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		var st unix.Statfs_t
		if serr := unix.Statfs(mnt, &st); errors.Is(serr, unix.ENOTCONN) || errors.Is(serr, unix.ECONNABORTED) {
			return nil, fmt.Errorf("%s is a dead FUSE mount: its daemon is gone (killed?), and its statistics with it: fusescope fs umount %s, or mount it again (fusescope fs mount SRC %s cleans it)", mnt, mnt, mnt)
		}
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

// RemoveEmptyLog removes the log of the daemon of mnt if it is empty.
func RemoveEmptyLog(mnt string) { removeIfEmpty(LogPath(mnt)) }
