package labfs

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// probe is a feature that only this file registers: it counts what a real
// mount tells it about one file, and the GETATTRs it wraps, as a new
// feature would (one file, one registration, a counter of its own).
type probe struct {
	mu        sync.Mutex
	node      uint64 // the file "probed", once a reply named it
	changes   int    // dataChanged events of node: the invalidations a write makes
	changing  int
	forgotten bool
	getattrs  int // GETATTRs that went through around
}

func (p *probe) observe(e event) fuse.Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case e.kind == referenced && e.name == "probed":
		p.node = e.node
	case e.node != p.node || p.node == 0:
	case e.kind == dataChanging:
		p.changing++
	case e.kind == dataChanged:
		p.changes++
	case e.kind == forgotten:
		p.forgotten = true
	}
	return fuse.OK
}

func (p *probe) wraps(op fuseproto.Opcode) bool { return op == fuseproto.Getattr }

func (p *probe) around(r *request) fuse.Status {
	p.mu.Lock()
	p.getattrs++
	p.mu.Unlock()
	return r.next()
}

func (p *probe) count(m map[string]uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m["probe_invalidations"] = uint64(p.changes)
}

// A feature registered in a test file alone sees a real mount's events:
// each WRITE of its file is one invalidation (the data changing, then
// changed), each GETATTR passes through its around, and its counter shows
// in the mount's record; the daemon's own request counts are the oracle.
func TestRegisteredFeatureFollowsAMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting the lab file system here needs root")
	}
	p := &probe{}
	saved := registered
	registered = append(slices.Clone(registered), func(*labRaw) feature { return p })
	t.Cleanup(func() { registered = saved })

	src, mnt := t.TempDir(), t.TempDir()
	// Timeouts of 0: every stat is a GETATTR.
	f, err := Mount(src, mnt, Config{EntryTimeout: Timeout(0), AttrTimeout: Timeout(0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Unmount() })

	file, err := os.OpenFile(filepath.Join(mnt, "probed"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	const writes = 3
	for i := range writes {
		if _, err := file.WriteAt(make([]byte, 4096), int64(i)*8192); err != nil {
			t.Fatal(err)
		}
	}
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(mnt, "probed"), &st); err != nil {
			t.Fatal(err)
		}
	}

	rec := f.Record()
	sent := map[string]uint64{}
	for _, o := range rec.Profile.Ops {
		sent[o.Op] += o.Count
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.node == 0 {
		t.Fatal("no reply named the file: the CREATE's reference never reached the feature")
	}
	w := sent[fuseproto.Write.String()]
	if w != writes || uint64(p.changes) != w || uint64(p.changing) != w {
		t.Errorf("%d WRITEs by the daemon's count (want %d): the feature saw %d invalidations and %d changes begin; want one each per WRITE",
			w, writes, p.changes, p.changing)
	}
	if g := sent[fuseproto.Getattr.String()]; g < 4 || uint64(p.getattrs) != g {
		t.Errorf("the daemon served %d GETATTRs (want at least the 4 stats), the feature wrapped %d", g, p.getattrs)
	}
	if got := rec.Meta.FS.Counters["probe_invalidations"]; got != writes {
		t.Errorf("the record's probe_invalidations = %d, want %d", got, writes)
	}
}
