package labfs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/profile"
	"golang.org/x/sys/unix"
)

// The daemon's lifecycle: serving in the foreground, detaching into the
// background, unmounting by path.

// readyEnv names the fd a background daemon reports its mount on.
const readyEnv = "FUSESCOPE_FS_READY_FD"

// Serve mounts SRC at MNT and serves it until Ctrl-C, SIGTERM or an
// unmount: Ctrl-C on a busy mount says who uses it and goes on serving, a
// second one forces the unmount; SIGTERM forces it at once. Messages go to
// log. Started by ServeInBackground, it tells its parent how the mount went
// and ignores SIGHUP.
func Serve(src, mnt string, cfg Config, log io.Writer) error {
	return ServeWith(src, mnt, cfg, log, DaemonOptions{})
}

// DaemonOptions are the daemon's own settings, apart from the file
// system's configuration.
type DaemonOptions struct {
	// Publisher, when set, hands the daemon's statistics on while it
	// serves (cmd/ serves them as Prometheus metrics: fs mount --metrics).
	Publisher Publisher
}

// A Publisher hands the daemon's statistics on while it serves.
type Publisher interface {
	// Open readies it before the mount: its error (a port in use) fails
	// the mount, and a background daemon's parent reports it.
	Open() error
	// Publish runs once the file system is mounted until ctx ends,
	// reading the statistics through record.
	Publish(ctx context.Context, record func() (*profile.Record, error))
	// Close releases what Open took.
	Close() error
}

// ServeWith is Serve with the daemon's own settings.
func ServeWith(src, mnt string, cfg Config, log io.Writer, opts DaemonOptions) error {
	ready := os.Getenv(readyEnv)
	// Caught from before the mount: a signal that came as soon as the
	// mount showed up killed the daemon and left the mount behind.
	sigs := make(chan os.Signal, 1)
	if ready != "" {
		signal.Ignore(syscall.SIGHUP) // a detached daemon outlives its terminal
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	} else {
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	}
	defer signal.Stop(sigs)
	var err error
	if opts.Publisher != nil {
		// Before the mount: a port in use fails the mount, not later.
		if err = opts.Publisher.Open(); err == nil {
			defer opts.Publisher.Close()
		}
	}
	var fsys *FS
	if err == nil {
		fsys, err = Mount(src, mnt, cfg)
	}
	if err == nil && opts.Publisher != nil {
		ctx, stop := context.WithCancel(context.Background())
		defer stop()
		go opts.Publisher.Publish(ctx, func() (*profile.Record, error) { return fsys.Record(), nil })
	}
	if ready != "" {
		fd, _ := strconv.Atoi(ready)
		pipe := os.NewFile(uintptr(fd), "ready")
		if err != nil {
			fmt.Fprintf(pipe, "error %s\n", err)
		} else {
			fmt.Fprintf(pipe, "ok %s\n", fsys.Stale())
		}
		pipe.Close()
	}
	if err != nil {
		return err
	}
	if s := fsys.Stale(); s != "" && ready == "" {
		fmt.Fprintln(log, "fusescope: "+s)
	}
	if ready == "" {
		fmt.Fprintf(log, "fusescope fs: %s mounted at %s (conn %d); Ctrl-C or fusescope fs umount %s ends it\n", fsys.Source, fsys.MountPoint, fsys.Conn, fsys.MountPoint)
	}
	done := make(chan struct{})
	go func() { fsys.Wait(); close(done) }()
	busy := false
wait:
	for {
		select {
		case sig := <-sigs:
			if sig != os.Interrupt {
				// SIGTERM (a service manager, kill): end now, lazily if busy,
				// after the write-behind queues are written.
				err = fsys.Unmount()
				break wait
			}
			if err = fsys.TryUnmount(); !errors.Is(err, ErrBusy) {
				break wait
			}
			if busy { // the second Ctrl-C, still busy: forced
				err = fsys.Unmount()
				break wait
			}
			busy, err = true, nil
			fmt.Fprintln(log, busyMessage(fsys.MountPoint))
		case <-done:
			break wait
		}
	}
	if ready != "" && err == nil {
		RemoveEmptyLog(mnt) // kept only when the daemon said something
	}
	return err
}

// busyMessage says what a busy mount waits for and how to force it.
func busyMessage(mnt string) string {
	return fmt.Sprintf("fusescope fs: %s is busy, still serving: %s. Ctrl-C again to unmount it: cleanly if they are done by then, else forced (umount -l: what is still open there fails with ENOTCONN).", mnt, usersOf(mnt))
}

// usersOf names the processes that keep mnt busy, up to five.
func usersOf(mnt string) string {
	users, _ := fuseconn.Users(mnt)
	var who []string
	for i, u := range users {
		if i == 5 {
			who = append(who, fmt.Sprintf("and %d more", len(users)-i))
			break
		}
		what := u.What
		if what == "cwd" || what == "root" {
			what = "its " + map[string]string{"cwd": "working", "root": "root"}[what] + " directory"
		}
		who = append(who, fmt.Sprintf("%d %s (%s)", u.PID, u.Comm, what))
	}
	if len(who) == 0 {
		return "files are open in it, or a shell is inside it (fuser -vm " + mnt + " lists the processes)"
	}
	return "in use by " + strings.Join(who, ", ")
}

// ServeInBackground runs fusescope with args (the mount command without
// --background) detached, its output in LogPath(mnt), and returns once the
// child says it has mounted.
func ServeInBackground(mnt string, args []string, log io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	if _, err := PrivateControlDir(); err != nil {
		return err
	}
	logPath := LogPath(mnt)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	child := exec.Command(self, args...)
	child.Env = append(os.Environ(), readyEnv+"=3")
	child.ExtraFiles = []*os.File{w}
	child.Stdout, child.Stderr = logf, logf
	// A process group of its own, not a session: with the scheduler's
	// autogroups (kernel.sched_autogroup_enabled), a new session is a new
	// scheduling group, which delays the daemon's wakeups behind the caller's
	// (measured: 4 KiB random reads 15-25% slower). SIGHUP is ignored below,
	// so closing the terminal does not unmount.
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := child.Start(); err != nil {
		return err
	}
	w.Close()
	logf.Close()
	line, _ := bufio.NewReader(r).ReadString('\n')
	r.Close()
	status, msg, _ := strings.Cut(strings.TrimSpace(line), " ")
	if status != "ok" {
		child.Wait()
		if msg == "" {
			msg = "the file system daemon exited before mounting (see " + logPath + ")"
		} else {
			os.Remove(logPath) // it holds only the message passed on here
		}
		return fmt.Errorf("%s", msg)
	}
	if msg != "" {
		fmt.Fprintln(log, "fusescope: "+msg)
	}
	abs, _ := filepath.Abs(mnt)
	fmt.Fprintf(log, "fusescope fs: mounted at %s (daemon pid %d, log %s)\n", abs, child.Process.Pid, logPath)
	child.Process.Release()
	return nil
}

// UnmountPath unmounts the lab file system at mnt (an absolute path) and
// waits briefly for its daemon to exit; anything else mounted there is
// refused. A mount whose daemon died is detached lazily.
func UnmountPath(mnt string, log io.Writer) error {
	// Only a lab file system: this command must not take down
	// whatever else a mistyped path names.
	m, err := fuseconn.TopMount(mnt)
	if err != nil {
		return err
	}
	if m == nil {
		// Lstat, not stat: a path a dead mount hides still exists.
		if _, err := os.Lstat(mnt); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s does not exist: give the mount point of a lab file system (findmnt -t %s lists them)", mnt, FSType)
		}
		return fmt.Errorf("%s is not a mount point: nothing to unmount (findmnt -t %s lists lab file systems)", mnt, FSType)
	}
	if m.FSType != FSType {
		return fmt.Errorf("%s is a %s mount, not a fusescope lab file system: unmount it with umount", mnt, m.FSType)
	}
	// A dead mount is detached lazily, as fs mount does: nothing
	// can be written to it, and a shell may still be inside.
	if dead, err := DetachDead(mnt); err != nil || dead {
		if dead {
			fmt.Fprintln(log, "fusescope: "+DeadMessage(mnt))
		}
		return err
	}
	if err := unix.Unmount(mnt, 0); err != nil {
		if err == unix.EBUSY {
			return fmt.Errorf("%s is busy (%s): close them, or umount -l %s", mnt, usersOf(mnt), mnt)
		}
		if out, ferr := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); ferr != nil {
			return fmt.Errorf("unmounting %s: %v (%s)", mnt, err, strings.TrimSpace(string(out)))
		}
	}
	// The daemon removes its socket as it exits; wait for it briefly.
	for i := 0; i < 50; i++ {
		if _, err := os.Stat(SocketPath(mnt)); err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
