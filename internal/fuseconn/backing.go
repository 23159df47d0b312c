package fuseconn

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fusescope/fusescope/internal/profile"
	"golang.org/x/sys/unix"
)

// Local file systems a passthrough daemon's backing files may live on,
// by statfs magic.
var localFS = map[int64]string{
	0xEF53: "ext4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x01021994: "tmpfs", 0x794c7630: "overlay",
	0xF2F52010: "f2fs", 0x2FC12FC1: "zfs", 0x3153464a: "jfs", 0x52654973: "reiserfs",
}

// AddBacking adds to each mount's daemons their command lines and the
// local file system of a directory each holds open (O_PATH included), or
// of a regular file it holds open for reading: the mark of a daemon that
// serves files it could pass through (its log, open for writing only, is
// not).
func AddBacking(mounts []profile.Mount) {
	for i := range mounts {
		for j := range mounts[i].Daemons {
			d := &mounts[i].Daemons[j]
			d.Backing = backingOf(d.PID)
			d.Args = cmdline(d.PID)
		}
	}
}

// cmdline is a process's command line, nil if it is gone.
func cmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

func backingOf(pid int) string {
	proc := "/proc/" + strconv.Itoa(pid)
	ents, err := os.ReadDir(proc + "/fd")
	if err != nil {
		return ""
	}
	for _, e := range ents {
		l := filepath.Join(proc, "fd", e.Name())
		target, err := os.Readlink(l)
		if err != nil || len(target) == 0 || target[0] != '/' || target == "/" {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(l, &st) != nil {
			continue
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
		case unix.S_IFREG:
			if writeOnly(filepath.Join(proc, "fdinfo", e.Name())) {
				continue
			}
		default:
			continue
		}
		var fs unix.Statfs_t
		if unix.Statfs(l, &fs) != nil {
			continue
		}
		if name, ok := localFS[int64(fs.Type)]; ok {
			return fmt.Sprintf("%s (%s)", name, target)
		}
	}
	return ""
}

// writeOnly says whether an fd (its /proc/PID/fdinfo/N) was opened for
// writing only.
func writeOnly(fdinfo string) bool {
	b, err := os.ReadFile(fdinfo)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err == nil && flags&unix.O_ACCMODE == unix.O_WRONLY
		}
	}
	return false
}
