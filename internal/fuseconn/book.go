package fuseconn

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/fusescope/fusescope/internal/profile"
)

// ErrMountGone reports a traced mount that went away while being traced,
// or whose connection was aborted (Aborted: its daemon died).
type ErrMountGone struct {
	What    string
	Aborted bool
}

func (e *ErrMountGone) Error() string {
	if e.Aborted {
		return fmt.Sprintf("%s: the daemon died while traced (the connection was aborted; umount -l it); the statistics above cover the time until then", e.What)
	}
	return fmt.Sprintf("%s disappeared while traced (unmounted, or its daemon died); the statistics above cover the time until then", e.What)
}

// Book remembers every FUSE mount seen during a run, so a connection
// keeps its label after it is unmounted, and notices traced ones that go.
type Book struct {
	traced  []uint32
	named   map[uint32]string // the mount point the user named, by connection
	known   map[uint32]profile.Mount
	present map[uint32]bool
}

// NewBook starts a book of the traced connections (none: every one);
// named maps a connection to the mount point the user named for it, which
// labels it when it is mounted at several places. It reads mountinfo and
// fusectl once.
func NewBook(traced []uint32, named map[uint32]string) *Book {
	b := &Book{traced: traced, named: map[uint32]string{}, known: map[uint32]profile.Mount{}}
	for c, m := range named {
		b.named[c] = m
	}
	b.Refresh()
	return b
}

// MountPoint is where a connection seen during the run was mounted; "" if
// nowhere this mount namespace shows.
func (b *Book) MountPoint(conn uint32) string { return b.known[conn].MountPoint }

// Refresh reads mountinfo and fusectl again.
func (b *Book) Refresh() {
	infos, err := ReadMountInfo()
	if err != nil {
		return
	}
	live, _ := Live()
	b.refresh(infos, live)
}

// refresh is Refresh on mountinfo's FUSE mounts and fusectl's live
// connections as read.
func (b *Book) refresh(infos []MountInfo, live map[uint32]bool) {
	reused := b.reusedNumbers(infos)
	b.present = map[uint32]bool{}
	for _, m := range DescribeMounts(infos, b.named) {
		if live[m.Conn] && !reused[m.Conn] {
			b.present[m.Conn] = true
			b.known[m.Conn] = m
		}
	}
	for c := range live {
		if m := b.known[c]; m.MountPoint == "" && !reused[c] {
			// Not in mountinfo (another namespace's): fusectl still counts.
			b.known[c] = profile.Mount{Conn: c, Connection: Read(c)}
			b.present[c] = true
		}
	}
	// A connection is aborted for good: its mount stays until unmounted,
	// but nothing more will happen on it.
	for _, c := range b.traced {
		if b.present[c] && b.aborted(c) {
			b.present[c] = false
		}
	}
}

// reusedNumbers are the traced connections whose number another file
// system now has: the kernel gives a new mount the lowest free device
// number, so once a traced mount is unmounted and its connection gone,
// the next FUSE mount (under make test, within the second between two
// looks) takes it. A traced connection that was mounted somewhere and is
// now mounted only at places it never was is that new file system.
func (b *Book) reusedNumbers(infos []MountInfo) map[uint32]bool {
	at := map[uint32][]string{}
	for _, m := range infos {
		if m.IsFUSE() {
			at[m.Minor] = append(at[m.Minor], m.MountPoint)
		}
	}
	out := map[uint32]bool{}
	for _, c := range b.traced {
		was := b.known[c].MountPoint
		if was == "" || len(at[c]) == 0 {
			continue
		}
		if !slices.Contains(at[c], was) && !slices.Contains(at[c], b.named[c]) {
			out[c] = true
		}
	}
	return out
}

func (b *Book) aborted(c uint32) bool {
	ci := b.known[c].Connection
	return ci != nil && ci.Aborted
}

// Gone names the traced connections that are no longer there, and whether
// all of those are still mounted, with their connection aborted.
func (b *Book) Gone() (names string, aborted bool) {
	var out []string
	aborted = true
	for _, c := range b.traced {
		if !b.present[c] {
			aborted = aborted && b.aborted(c)
			if m, ok := b.known[c]; ok && m.MountPoint != "" {
				out = append(out, fmt.Sprintf("%s (conn %d)", m.MountPoint, c))
			} else {
				out = append(out, fmt.Sprintf("FUSE connection %d", c))
			}
		}
	}
	return strings.Join(out, ", "), aborted && len(out) > 0
}

// Mounts describes the traced connections, or every connection that appears
// in the profile when all are traced.
func (b *Book) Mounts(p profile.Profile) []profile.Mount {
	want := map[uint32]bool{}
	for _, c := range b.traced {
		want[c] = true
	}
	if len(want) == 0 {
		for _, s := range p.Ops {
			want[s.Conn] = true
		}
	}
	out := []profile.Mount{}
	for c := range want {
		m, ok := b.known[c]
		if !ok {
			m = profile.Mount{Conn: c}
		}
		m.Gone = !b.present[c]
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Conn < out[j].Conn })
	return out
}
