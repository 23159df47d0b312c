package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/fusescope/fusescope/internal/fuseconn"
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
	return m.mountTemplate(ctx, c, src, mnt)
}

// mountTemplate runs the template and waits for a mount at mnt, whether
// the command returns (a daemon that forks) or stays (one in the
// foreground, stopped at unmount).
func (m Mounter) mountTemplate(ctx context.Context, c Configuration, src, mnt string) (*mounted, error) {
	cmd := exec.Command("sh", "-c", expand(c.Mount, src, mnt))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("configuration %q: %w", c.Name, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}
	wait := mountWait
	if c.MountTimeout > 0 {
		wait = time.Duration(c.MountTimeout)
	}
	deadline := time.Now().Add(wait)
	exitedOK := false
	for {
		if conn, err := connAt(mnt); err == nil {
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
				if !exitedOK {
					select {
					case <-exited:
					case <-time.After(5 * time.Second):
						stop()
					}
				}
				return err
			}
			return &mounted{dir: mnt, conn: conn, umount: umount}, nil
		}
		select {
		case err := <-exited:
			if err != nil {
				return nil, fmt.Errorf("configuration %q: the mount command failed: %s", c.Name, firstLine(out.Bytes(), err))
			}
			exitedOK = true
			exited = nil // it returned: the mount may still be on its way
		case <-ctx.Done():
			if !exitedOK {
				stop()
			}
			detach(mnt)
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			if !exitedOK {
				stop()
			}
			exec.Command("umount", "-l", mnt).Run()
			return nil, fmt.Errorf("configuration %q: nothing was mounted at %s within %v of running %q (mount_timeout sets the wait)", c.Name, mnt, wait, c.Mount)
		}
	}
}

// detach unmounts whatever a failed or interrupted mount left at mnt.
func detach(mnt string) {
	if m, err := fuseconn.TopMount(mnt); err == nil && m != nil {
		if exec.Command("umount", mnt).Run() != nil {
			exec.Command("umount", "-l", mnt).Run()
		}
	}
}

// connAt is the FUSE connection mounted at mnt; an error when no FUSE file
// system is mounted there.
func connAt(mnt string) (uint32, error) {
	m, err := fuseconn.TopMount(mnt)
	if err != nil {
		return 0, err
	}
	if m == nil {
		return 0, errNotMounted
	}
	if !m.IsFUSE() {
		return 0, fmt.Errorf("%s is a %s mount, not FUSE", mnt, m.FSType)
	}
	return m.Minor, nil
}

var errNotMounted = errors.New("not mounted")

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
