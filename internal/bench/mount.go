package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/kernel"
	"golang.org/x/sys/unix"
)

// mountWait is how long a mount command may take to make its mount appear.
const mountWait = 30 * time.Second

// mounted is a configuration made ready: the directory workloads run in.
type mounted struct {
	dir  string
	conn uint32 // FUSE connection; 0 for native
	// umount undoes the mount and stops a daemon the template left in
	// the foreground.
	umount func() error
}

// Mounter mounts configurations; Self is the fusescope binary that mounts
// the lab file system (fs mount --background).
type Mounter struct {
	Self string
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func expand(tmpl, src, mnt string) string {
	return strings.NewReplacer("{src}", shellQuote(src), "{mnt}", shellQuote(mnt)).Replace(tmpl)
}

// Mount mounts c over src at mnt (an empty directory).
func (m Mounter) Mount(ctx context.Context, c Configuration, src, mnt string) (*mounted, error) {
	for _, need := range c.Needs {
		if _, err := exec.LookPath(need); err != nil {
			return nil, fmt.Errorf("configuration %q needs %s, which is not installed", c.Name, need)
		}
	}
	switch {
	case c.Native:
		return &mounted{dir: src, umount: func() error { return nil }}, nil
	case c.LabFS != nil:
		args := append(append([]string{"fs", "mount", "--background"}, c.LabFS...), src, mnt)
		// Not stopped by ctx: killed half-way it could leave a mount
		// no one knows of; it takes a moment, and ctx is checked after.
		if out, err := exec.Command(m.Self, args...).CombinedOutput(); err != nil {
			detach(mnt)
			return nil, fmt.Errorf("configuration %q: fusescope fs mount failed: %s", c.Name, firstLine(out, err))
		}
		umount := func() error {
			if out, err := exec.Command(m.Self, "fs", "umount", mnt).CombinedOutput(); err != nil {
				return fmt.Errorf("configuration %q: fs umount %s: %s", c.Name, mnt, firstLine(out, err))
			}
			return nil
		}
		conn, err := connAt(mnt)
		if err != nil {
			umount()
			return nil, fmt.Errorf("configuration %q: %w", c.Name, err)
		}
		return &mounted{dir: mnt, conn: conn, umount: umount}, nil
	}
	if c.IOURing {
		// The kernel offers the ring in its INIT request and decides at
		// the daemon's reply, which may come after the mount appears: a
		// STATFS waits for that reply. Then the connection keeps the
		// ring, and the setting is restored.
		if restore, err := enableURing(); err == nil {
			defer restore()
			mt, err := m.mountTemplate(ctx, c, src, mnt)
			if err == nil {
				var st unix.Statfs_t
				unix.Statfs(mnt, &st)
			}
			return mt, err
		}
	}
	return m.mountTemplate(ctx, c, src, mnt)
}

// enableURing enables FUSE over io_uring and returns what restores the
// setting; an error where the kernel has no such switch (the daemon then
// falls back to /dev/fuse, which the runs' traces show).
func enableURing() (restore func(), err error) {
	was, err := os.ReadFile(kernel.FuseURingParam)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(kernel.FuseURingParam, []byte("Y"), 0o644); err != nil {
		return nil, err
	}
	return func() { os.WriteFile(kernel.FuseURingParam, bytes.TrimSpace(was), 0o644) }, nil
}

// mountTemplate runs the template and waits for a mount at mnt, whether
// the command returns (a daemon that forks) or stays (one in the
// foreground, stopped at unmount). The template runs in a session of its
// own, and whatever of that session is left when the mount fails or is
// undone (a daemon sent to the background with &, say) is ended with it.
func (m Mounter) mountTemplate(ctx context.Context, c Configuration, src, mnt string) (*mounted, error) {
	cmd := exec.Command("sh", "-c", expand(c.Mount, src, mnt))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("configuration %q: %w", c.Name, err)
	}
	sid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	wait := mountWait
	if c.MountTimeout > 0 {
		wait = time.Duration(c.MountTimeout)
	}
	deadline := time.Now().Add(wait)
	// fail undoes what the template did: its processes, and whatever it
	// mounted at mnt.
	fail := func(err error) (*mounted, error) {
		endSession(sid, sessionGrace, false)
		detach(mnt)
		return nil, err
	}
	for {
		conn, err := connAt(mnt)
		if err == nil {
			umount := func() error {
				tmpl := c.Umount
				if tmpl == "" {
					tmpl = "umount {mnt}"
				}
				var err error
				if o, e := exec.Command("sh", "-c", expand(tmpl, src, mnt)).CombinedOutput(); e != nil {
					exec.Command("umount", "-l", mnt).Run()
					err = fmt.Errorf("configuration %q: %s failed (%s): detached lazily", c.Name, tmpl, firstLine(o, e))
				}
				// A daemon in the foreground (or sent to the background)
				// ends with its mount; one that does not is ended.
				endSession(sid, sessionGrace, true)
				return err
			}
			return &mounted{dir: mnt, conn: conn, umount: umount}, nil
		}
		var other *notFUSEError
		if errors.As(err, &other) {
			return fail(fmt.Errorf("configuration %q: its mount command mounted %s at %s, not a FUSE file system (unmounted): give the command that mounts a FUSE file system", c.Name, other.fsType, mnt))
		}
		select {
		case err := <-exited:
			if err != nil {
				return fail(fmt.Errorf("configuration %q: the mount command failed: %s", c.Name, firstLine(out.Bytes(), err)))
			}
			exited = nil // it returned: the mount may still be on its way
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("configuration %q: nothing was mounted at %s within %v of running %q (mount_timeout sets the wait)", c.Name, mnt, wait, c.Mount))
		}
	}
}

// sessionGrace is how long a template's processes have to end after
// SIGTERM (or, at unmount, on their own) before SIGKILL.
const sessionGrace = 5 * time.Second

// endSession ends the processes of session sid: SIGTERM, then SIGKILL
// after grace. With waitFirst they have grace to end on their own before
// (a daemon ends with its mount); none left, it returns at once. A
// process that left the session (setsid, as a daemon that forks does) is
// not the bench's to end.
func endSession(sid int, grace time.Duration, waitFirst bool) {
	gone := func(d time.Duration) bool {
		for end := time.Now().Add(d); ; {
			if len(sessionPids(sid)) == 0 {
				return true
			}
			if time.Now().After(end) {
				return false
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if waitFirst && gone(grace) || gone(0) {
		return
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		for _, pid := range sessionPids(sid) {
			syscall.Kill(pid, sig)
		}
		if gone(grace) {
			return
		}
	}
}

// sessionPids are the live processes of session sid (zombies are ended).
func sessionPids(sid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // ended meanwhile
		}
		// pid (comm) state ppid pgrp session ...; comm may hold spaces
		// and parentheses: the fields start after the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 4 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if s, err := strconv.Atoi(f[3]); err == nil && s == sid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// detach unmounts whatever a failed or interrupted mount left at mnt
// (mounts stacked there too).
func detach(mnt string) {
	for range 8 {
		m, err := fuseconn.TopMount(mnt)
		if err != nil || m == nil {
			return
		}
		if exec.Command("umount", mnt).Run() != nil {
			exec.Command("umount", "-l", mnt).Run()
		}
	}
}

// connAt is the FUSE connection mounted at mnt; an error when no FUSE file
// system is mounted there (a notFUSEError when another is).
func connAt(mnt string) (uint32, error) {
	m, err := fuseconn.TopMount(mnt)
	if err != nil {
		return 0, err
	}
	if m == nil {
		return 0, errNotMounted
	}
	if !m.IsFUSE() {
		return 0, &notFUSEError{mnt: mnt, fsType: m.FSType}
	}
	return m.Minor, nil
}

var errNotMounted = errors.New("not mounted")

// notFUSEError is a mount that is not FUSE's where a FUSE one was wanted.
type notFUSEError struct{ mnt, fsType string }

func (e *notFUSEError) Error() string {
	return fmt.Sprintf("%s is a %s mount, not FUSE", e.mnt, e.fsType)
}

// firstLine is a command's first line of output, or its error.
func firstLine(out []byte, err error) string {
	s := strings.TrimSpace(string(out))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if s == "" {
		return err.Error()
	}
	return s
}

// dropCaches writes back dirty data and drops the page cache, dentries and
// inodes.
func dropCaches() error {
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o200); err != nil {
		return fmt.Errorf("dropping caches: %w (run as root, or set drop_caches: false)", err)
	}
	return nil
}
