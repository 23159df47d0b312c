package ktrace

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fusescope/fusescope/internal/profile"
	"golang.org/x/sys/unix"
)

// ConnectionsDir is where fusectl shows each FUSE connection.
const ConnectionsDir = "/sys/fs/fuse/connections"

// EnsureFusectl mounts fusectl on ConnectionsDir if it is not mounted.
func EnsureFusectl() error {
	var st unix.Statfs_t
	if err := unix.Statfs(ConnectionsDir, &st); err != nil {
		return fmt.Errorf("%s: %v (is the fuse module loaded? modprobe fuse)", ConnectionsDir, err)
	}
	const fusectlMagic = 0x65735543
	if st.Type == fusectlMagic {
		return nil
	}
	if err := unix.Mount("fusectl", ConnectionsDir, "fusectl", 0, ""); err != nil {
		return fmt.Errorf("fusectl is not mounted and mounting it failed (%v): run mount -t fusectl none %s", err, ConnectionsDir)
	}
	return nil
}

// ReadConn reads /sys/fs/fuse/connections/N; nil if the connection is gone.
func ReadConn(conn uint32) *profile.ConnInfo {
	dir := filepath.Join(ConnectionsDir, strconv.FormatUint(uint64(conn), 10))
	read := func(name string) (uint64, bool) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return 0, false
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		return v, err == nil
	}
	w, ok := read("waiting")
	if !ok {
		return nil
	}
	mb, _ := read("max_background")
	ct, _ := read("congestion_threshold")
	// fuse_abort_conn sets max_background to UINT_MAX to release every
	// queued background request; fusectl shows no other sign of an abort.
	return &profile.ConnInfo{Waiting: w, MaxBackground: mb, CongestionThreshold: ct, Aborted: mb == math.MaxUint32}
}

// ErrConnAborted reports a connection to trace whose daemon is gone.
type ErrConnAborted struct {
	Conn       uint32
	MountPoint string // "" when not known
}

func (e *ErrConnAborted) Error() string {
	what, fix := fmt.Sprintf("FUSE connection %d", e.Conn), "its mount point"
	if e.MountPoint != "" {
		what, fix = fmt.Sprintf("%s (conn %d)", e.MountPoint, e.Conn), e.MountPoint
	}
	return fmt.Sprintf("%s: the connection was aborted (its daemon died or was killed, or it was aborted through fusectl), so no request reaches a daemon: umount -l %s, and mount it again", what, fix)
}

// LiveConns lists the connections fusectl shows now.
func LiveConns() (map[uint32]bool, error) {
	ents, err := os.ReadDir(ConnectionsDir)
	if err != nil {
		return nil, err
	}
	out := make(map[uint32]bool, len(ents))
	for _, e := range ents {
		if n, err := strconv.ParseUint(e.Name(), 10, 32); err == nil {
			out[uint32(n)] = true
		}
	}
	return out, nil
}

// DescribeMounts returns the record's view of every FUSE mount, with its
// fusectl counters. A connection mounted at several places (bind mounts)
// is described by its first line in mountinfo, or by the one at the mount
// point prefer names for it (the one the user named).
func DescribeMounts(mounts []MountInfo, prefer map[uint32]string) []profile.Mount {
	var out []profile.Mount
	at := map[uint32]int{} // index in out
	for _, m := range mounts {
		if !m.IsFUSE() {
			continue
		}
		i, seen := at[m.Minor]
		if seen && m.MountPoint != prefer[m.Minor] {
			continue
		}
		d := profile.Mount{Conn: m.Minor, MountPoint: m.MountPoint, FSType: m.FSType, Source: m.Source, Options: m.Options}
		if seen {
			d.Connection = out[i].Connection
			out[i] = d
			continue
		}
		d.Connection = ReadConn(m.Minor)
		at[m.Minor] = len(out)
		out = append(out, d)
	}
	return out
}
