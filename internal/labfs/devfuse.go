package labfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// mountDevFuse mounts mnt as go-fuse's DirectMount does (root), but with
// /dev/fuse opened close-on-exec: go-fuse v2.12.1 opens it without
// O_CLOEXEC on that path, so every process the daemon started afterwards
// held the connection and kept a killed daemon's mount hung
// (third_party/go-fuse/PATCHES.md). It returns the /dev/fd/N mount point
// that hands the connection to fuse.NewServer, which serves it and leaves
// mounting and unmounting to us (FS.unmountOnce).
func mountDevFuse(mnt string, opts *fuse.MountOptions) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); err != nil {
		return "", err
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	source := opts.FsName
	if source == "" {
		source = opts.Name
	}
	// The options go-fuse's direct mount passes (fuse/mount_linux.go):
	// those fusermount would, then the caller's, which override them.
	data := []string{fmt.Sprintf("fd=%d", fd), fmt.Sprintf("rootmode=%o", st.Mode&unix.S_IFMT),
		fmt.Sprintf("user_id=%d", os.Geteuid()), fmt.Sprintf("group_id=%d", os.Getegid())}
	if opts.MaxWrite > 0 {
		data = append(data, fmt.Sprintf("max_read=%d", opts.MaxWrite))
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	for _, o := range opts.Options {
		switch o {
		case "nodev":
			flags |= unix.MS_NODEV
		case "dev":
			flags &^= unix.MS_NODEV
		case "nosuid":
			flags |= unix.MS_NOSUID
		case "suid":
			flags &^= unix.MS_NOSUID
		case "noexec":
			flags |= unix.MS_NOEXEC
		case "exec":
			flags &^= unix.MS_NOEXEC
		default:
			data = append(data, o)
		}
	}
	if opts.AllowOther {
		data = append(data, "allow_other")
	}
	if err := unix.Mount(source, mnt, "fuse."+opts.Name, flags, strings.Join(data, ",")); err != nil {
		unix.Close(fd)
		return "", err
	}
	return fmt.Sprintf("/dev/fd/%d", fd), nil
}

// pollHack is what go-fuse's WaitMount does on a mount point it knows
// (it cannot for /dev/fd/N): a poll on its reserved name, answered ENOSYS,
// so that the kernel stops sending POLL before the runtime's epoll, in
// this process, waits on a file of the mount that no free thread serves.
func pollHack(mnt string) {
	fd, err := unix.Open(filepath.Join(mnt, ".go-fuse-epoll-hack"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLPRI | unix.POLLOUT}}, 0)
	unix.Close(fd)
}

// unmountOnce unmounts without forcing: the mount we made ourselves
// directly (go-fuse cannot unmount a /dev/fd/N mount point), any other
// through go-fuse (fusermount -u).
func (f *FS) unmountOnce() error {
	if f.ownMount {
		return unix.Unmount(f.MountPoint, 0)
	}
	return f.server.Unmount()
}
