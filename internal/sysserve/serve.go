// Package sysserve is fusescope syscalls --serve: a server that keeps the
// live source's programs (ktrace.SyscallPrograms) loaded and traces one
// run at a time over a Unix socket, and its client (Dial), whose typed
// events a live run (syslive.LiveSource) analyses as it does its own.
package sysserve

import (
	"bufio"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/option"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/session"
	"github.com/fusescope/fusescope/internal/strace"
	"github.com/fusescope/fusescope/internal/sysevent"
	"golang.org/x/sys/unix"
)

// The live source's server (fusescope syscalls --serve) keeps the programs
// loaded between runs: a run of syscalls -- CMD then only attaches them,
// which takes about a millisecond where loading takes 40 (the verifier and
// the kernel's BTF; docs/performance.md). A client sends its options, the
// server attaches and answers, then streams the run's typed events until
// the client says stop; the client analyses them as it would its own.
// Everything goes with the server's process: nothing is pinned.

// DefaultSocket is where syscalls --serve listens and syscalls -- CMD looks.
const DefaultSocket = "/run/fusescope/syscalls.sock"

// serveProtocol changes whenever the messages or the programs do: a
// client and a server of different builds never share a run.
const serveProtocol = 3

type serveRequest struct {
	Protocol int
	Tool     string // the client's version: the server's must be the same
	PID      int    // the client's, as it sees it: the server compares its own view
	Options  ktrace.SyscallOptions
}

type serveReply struct {
	Err         string
	Busy        bool // another run holds the programs
	Mismatch    bool // another version or pid namespace
	PID         int  // the server's
	Root        int
	Running     map[int]string
	WindowStart float64
	Began       time.Time
}

type serveMessage struct {
	Origin *serveOrigin // the answer to the client's release
	Event  *sysevent.Event
	End    *serveEnd
}

// serveOrigin: the run's time 0 is set, the command may go.
type serveOrigin struct {
	Err         string
	WindowStart float64
}

type serveEnd struct {
	Err       string
	Info      profile.LiveInfo
	Ended     time.Time
	WindowEnd float64
}

// clientMessage is what a client sends after its request: with a
// command, Release as it releases the command (the run's time 0 is then),
// and Stop when the run is over.
type clientMessage struct {
	Release, Stop bool
}

// Serve loads the programs, listens on socket (0600, root's) and traces
// one client's run at a time until ctx ends; ready is called once it
// listens. A socket left by a server that was killed is replaced; one that
// a server answers on is refused.
func Serve(ctx context.Context, socket, tool string, ready func()) error {
	ln, err := listenOnce(socket)
	if err != nil {
		return err
	}
	defer ln.Close() // which removes the socket
	progs, err := ktrace.LoadSyscallPrograms(strace.Category)
	if err != nil {
		return err
	}
	defer progs.Close()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	if ready != nil {
		ready()
	}
	var runs sync.WaitGroup
	defer runs.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accepting a client on %s: %w", socket, err)
		}
		runs.Go(func() {
			defer conn.Close()
			serveRun(ctx, conn.(*net.UnixConn), progs, tool)
		})
	}
}

// listenOnce listens on socket with mode 0600, after removing a socket
// no server answers on.
func listenOnce(socket string) (*net.UnixListener, error) {
	if err := CheckSocketPath(socket); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(socket), 0o755); err != nil {
		return nil, fmt.Errorf("creating the socket's directory: %w", err)
	}
	if err := removeStaleSocket(socket); err != nil {
		return nil, err
	}
	// The mode is set at bind, so no client ever sees a wider one.
	old := syscall.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", socket, err)
	}
	return ln, nil
}

// removeStaleSocket removes what is at socket only when it is a socket
// that no server answers on (one a killed server left). Anything else
// stays, and is refused: as root, --socket must never delete a file or a
// directory someone gave by mistake.
func removeStaleSocket(socket string) error {
	st, err := os.Lstat(socket)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return option.Errorf("{socket} %s: %v: give another path", socket, session.WithoutPath(err))
	}
	if st.Mode().Type() != os.ModeSocket {
		return option.Errorf("{socket} %s: the path is %s, not a socket: give another path, or remove it yourself", socket, fileKind(st.Mode()))
	}
	c, err := net.DialTimeout("unix", socket, time.Second)
	if err == nil {
		c.Close()
		return option.Errorf("a server already listens on %s: stop it first, or give another {socket}", socket)
	}
	// Only a refused connection says that no one listens: a socket that
	// timed out may belong to a server that is busy.
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return option.Errorf("{socket} %s: a socket that neither answers nor refuses (%v): give another path, or remove it yourself", socket, dialErrno(err))
	}
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the stale socket %s: %v", socket, session.WithoutPath(err))
	}
	return nil
}

// dialErrno is a failed connect's reason without net's "dial unix PATH:".
func dialErrno(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}

// fileKind names what a mode's type is, as ls -l would tell it.
func fileKind(m os.FileMode) string {
	switch m.Type() {
	case 0:
		return "a regular file"
	case os.ModeDir:
		return "a directory"
	case os.ModeSymlink:
		return "a symbolic link"
	case os.ModeNamedPipe:
		return "a named pipe"
	case os.ModeDevice, os.ModeDevice | os.ModeCharDevice:
		return "a device"
	}
	return "not a file a socket can replace"
}

// CheckSocketPath refuses a path a Unix socket cannot have (sun_path holds
// 107 bytes and a NUL), which bind and connect would only call invalid.
func CheckSocketPath(socket string) error {
	if len(socket) > 107 {
		return option.Errorf("{socket} %s: the path is %d bytes, and a Unix socket's may have 107 at most: give a shorter one", socket, len(socket))
	}
	return nil
}

// serveRun traces one client's run.
func serveRun(ctx context.Context, conn *net.UnixConn, progs *ktrace.SyscallPrograms, tool string) {
	w := bufio.NewWriterSize(conn, 64<<10)
	enc, dec := gob.NewEncoder(w), gob.NewDecoder(conn)
	reply := func(r serveReply) {
		enc.Encode(r)
		w.Flush()
	}
	var req serveRequest
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := dec.Decode(&req); err != nil {
		return
	}
	conn.SetReadDeadline(time.Time{})
	if req.Protocol != serveProtocol || req.Tool != tool {
		reply(serveReply{Mismatch: true, Err: fmt.Sprintf("the server is fusescope %s", tool)})
		return
	}
	if cred, err := peerCred(conn); err != nil || int(cred.Pid) != req.PID || int(cred.Uid) != os.Geteuid() {
		// Its pids are not ours: the command it would start could not be found.
		reply(serveReply{Mismatch: true, Err: "the server runs in another pid namespace or as another user"})
		return
	}
	opts := req.Options
	if opts.GateParent != 0 {
		opts.GateParent = req.PID // the client starts the command: no other process's child
	}
	opts.Category = strace.Category
	opts.EmptyPrograms = false
	tr, err := progs.Start(opts)
	if err != nil {
		reply(serveReply{Err: err.Error(), Busy: errors.Is(err, ktrace.ErrBusy)})
		return
	}
	defer tr.Close()
	start, _ := tr.Window()
	reply(serveReply{PID: os.Getpid(), Root: tr.Root(), Running: tr.Running(), WindowStart: start, Began: tr.Began()})
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-ctx.Done():
			conn.CloseRead() // the server ends: so does the run
		case <-finished:
		}
	}()
	msgs := make(chan clientMessage, 4)
	go func() {
		defer close(msgs) // the client gone, or the server ending
		for {
			var m clientMessage
			if dec.Decode(&m) != nil {
				return
			}
			msgs <- m
		}
	}()
	stopped := false
	if opts.GateParent != 0 {
		// Time 0 is when the client releases its command, as a log's is
		// its first line: the client waits for this answer to release it.
		m, ok := <-msgs
		switch {
		case !ok || m.Stop:
			stopped = true
		case m.Release:
			origin := serveOrigin{}
			if err := tr.SetOrigin(); err != nil {
				origin.Err = err.Error()
			}
			origin.WindowStart, _ = tr.Window()
			enc.Encode(serveMessage{Origin: &origin})
			if w.Flush() != nil || origin.Err != "" {
				return
			}
		}
	}
	stop := make(chan struct{})
	var stopOnce sync.Once
	stopRun := func() { stopOnce.Do(func() { close(stop) }) }
	if stopped {
		stopRun()
	}
	go func() {
		for m := range msgs {
			if m.Stop {
				stopRun()
			}
		}
		stopRun() // the client gone
	}()
	// The events go out every few milliseconds, so that the client
	// analyses them while the command runs rather than all at its end.
	var mu sync.Mutex
	var sendErr error
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				mu.Lock()
				if sendErr == nil {
					sendErr = w.Flush()
				}
				mu.Unlock()
			}
		}
	}()
	var info profile.LiveInfo
	err = tr.Run(stop, func(ev *sysevent.Event) {
		mu.Lock()
		if sendErr == nil {
			sendErr = enc.Encode(serveMessage{Event: ev})
		}
		mu.Unlock()
	}, &info)
	<-flushed
	if sendErr != nil {
		return // the client is gone
	}
	end := serveEnd{Info: info, Ended: tr.Ended()}
	_, end.WindowEnd = tr.Window()
	if err != nil {
		end.Err = err.Error()
	} else if ctx.Err() != nil {
		end.Err = "the server was stopped during the run, whose counts end there"
	}
	enc.Encode(serveMessage{End: &end})
	w.Flush()
}

func peerCred(conn *net.UnixConn) (*unix.Ucred, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	err = raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err != nil {
		return nil, err
	}
	return cred, credErr
}

// Run is fusescope syscalls --serve: it serves on socket until SIGINT,
// SIGTERM or SIGHUP, and says on status once it listens.
func Run(socket, tool string, status io.Writer) error {
	if err := ktrace.CheckPrivileges(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return Serve(ctx, socket, tool, func() {
		fmt.Fprintf(status, "Serving the live source's programs on %s (pid %d): fusescope syscalls -- CMD and -p PID use them. Hit Ctrl-C to end.\n", socket, os.Getpid())
	})
}
