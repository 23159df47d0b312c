package fuseconn

import (
	"fmt"

	"github.com/fusescope/fusescope/internal/profile"
)

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
		d.Connection = Read(m.Minor)
		at[m.Minor] = len(out)
		out = append(out, d)
	}
	return out
}

// CheckTraced refuses connections to trace that do not exist or whose
// daemon is gone; mounts label them in the message.
func CheckTraced(conns []uint32, mounts []MountInfo) error {
	if err := Ensure(); err != nil {
		return err
	}
	live, err := Live()
	if err != nil {
		return err
	}
	for _, c := range conns {
		if !live[c] {
			return fmt.Errorf("FUSE connection %d does not exist (%s lists the live ones)", c, Dir)
		}
		if ci := Read(c); ci != nil && ci.Aborted {
			err := &ErrConnAborted{Conn: c}
			for _, m := range mounts {
				if m.Minor == c {
					err.MountPoint = m.MountPoint
				}
			}
			return err
		}
	}
	return nil
}
