package fuseconn

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// MountInfo is one line of /proc/self/mountinfo.
type MountInfo struct {
	Major, Minor uint32
	MountPoint   string
	FSType       string
	Source       string
	Options      string // per-mount options, then super-block options
}

// IsFUSE reports whether the mount is served over a FUSE connection whose
// number is the mount's minor device number. fuseblk mounts use a block
// device's number instead and are not included.
func (m *MountInfo) IsFUSE() bool {
	return m.Major == 0 && (m.FSType == "fuse" || strings.HasPrefix(m.FSType, "fuse."))
}

// ReadMountInfo parses /proc/self/mountinfo.
func ReadMountInfo() ([]MountInfo, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseMountInfo(f)
}

// ParseMountInfo parses mountinfo text (proc(5)).
func ParseMountInfo(r io.Reader) ([]MountInfo, error) {
	var out []MountInfo
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+3 {
			continue
		}
		maj, min, ok := strings.Cut(fields[2], ":")
		if !ok {
			continue
		}
		ma, err1 := strconv.ParseUint(maj, 10, 32)
		mi, err2 := strconv.ParseUint(min, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		m := MountInfo{
			Major: uint32(ma), Minor: uint32(mi),
			MountPoint: unescapeMount(fields[4]),
			FSType:     fields[sep+1],
			Source:     unescapeMount(fields[sep+2]),
			Options:    fields[5],
		}
		if len(fields) > sep+3 {
			m.Options += "," + fields[sep+3]
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// unescapeMount undoes the octal escapes (\040 for space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ResolveMount maps a path to the FUSE connection that serves it: the
// mountinfo entry with the same major:minor as the path's st_dev.
func ResolveMount(path string, mounts []MountInfo) (MountInfo, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return MountInfo{}, err
	}
	// A path at or beneath a mount point listed in mountinfo is resolved
	// from the path alone, by the deepest mount point it lies under (the
	// last listed of those, the one on top), so a hung daemon cannot block
	// us in stat(), and a daemon under trace gets no requests from us.
	if m, ok := deepestMount(abs, mounts); ok {
		switch {
		case m.IsFUSE():
			return m, nil
		case m.MountPoint == abs:
			return MountInfo{}, fmt.Errorf("%s is a %s mount, not a FUSE file system: give the mount point of a FUSE file system (see findmnt -t fuse)", path, m.FSType)
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(abs, &st); err != nil {
		return MountInfo{}, fmt.Errorf("%s: %w: give the mount point of a FUSE file system", path, err)
	}
	major, minor := unix.Major(st.Dev), unix.Minor(st.Dev)
	for i := len(mounts) - 1; i >= 0; i-- {
		m := mounts[i]
		if m.Major == major && m.Minor == minor {
			if !m.IsFUSE() {
				return MountInfo{}, fmt.Errorf("%s is on a %s file system (%s), not FUSE: give the mount point of a FUSE file system (see findmnt -t fuse)", path, m.FSType, m.MountPoint)
			}
			return m, nil
		}
	}
	return MountInfo{}, fmt.Errorf("%s (device %d:%d) is not on any mount in /proc/self/mountinfo: give the mount point of a FUSE file system", path, major, minor)
}

// deepestMount is the mount whose mount point is the longest prefix of abs
// (whole components), the last listed among equals; ok is false when abs
// is relative or nothing is listed.
func deepestMount(abs string, mounts []MountInfo) (MountInfo, bool) {
	best, found := -1, false
	var m MountInfo
	for _, mi := range mounts {
		mp := mi.MountPoint
		under := abs == mp || mp == "/" || strings.HasPrefix(abs, mp+"/")
		if under && len(mp) >= best {
			best, m, found = len(mp), mi, true
		}
	}
	return m, found
}

// TopMount is the mount on top at mnt, an absolute path; nil when mnt is
// not a mount point.
func TopMount(mnt string) (*MountInfo, error) {
	infos, err := ReadMountInfo()
	if err != nil {
		return nil, err
	}
	var m *MountInfo
	for i := range infos {
		if infos[i].MountPoint == mnt {
			m = &infos[i] // the last one is on top
		}
	}
	return m, nil
}

// Owner is the user a FUSE mount was made by (its user_id option), or -1
// if mountinfo does not say.
func (m *MountInfo) Owner() int {
	for _, o := range strings.Split(m.Options, ",") {
		if v, ok := strings.CutPrefix(o, "user_id="); ok {
			if uid, err := strconv.Atoi(v); err == nil {
				return uid
			}
		}
	}
	return -1
}
