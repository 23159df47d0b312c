package labfs

import (
	"sync"
	"sync/atomic"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// closeToOpen is --invalidation cto: it keeps a file's cached pages across
// opens unless its size or mtime changed since it was last closed through
// this mount; then the open is answered without FOPEN_KEEP_CACHE, which
// makes the kernel drop them.
type closeToOpen struct {
	w             *labRaw
	mu            sync.Mutex
	lastClose     map[uint64]fileVersion
	invalidations atomic.Uint64
}

// fileVersion is what close-to-open compares between a close and an open.
type fileVersion struct {
	size             uint64
	mtime, mtimensec uint64
}

func newCloseToOpen(w *labRaw) feature {
	if w.cfg.Invalidation != "cto" {
		return nil
	}
	return &closeToOpen{w: w, lastClose: map[uint64]fileVersion{}}
}

// version reads an inode's size and mtime from the backend.
func (f *closeToOpen) version(c <-chan struct{}, node uint64) (fileVersion, bool) {
	var a fuse.AttrOut
	if f.w.RawFileSystem.GetAttr(c, &fuse.GetAttrIn{InHeader: fuse.InHeader{NodeId: node}}, &a) != fuse.OK {
		return fileVersion{}, false
	}
	return fileVersion{size: a.Size, mtime: a.Mtime, mtimensec: uint64(a.Mtimensec)}, true
}

// observe records the version of a file being closed: at FLUSH, which
// close() waits for, and at RELEASE.
func (f *closeToOpen) observe(e event) fuse.Status {
	if e.kind != flushed && e.kind != releasing {
		return fuse.OK
	}
	if v, ok := f.version(e.c, e.node); ok {
		f.mu.Lock()
		f.lastClose[e.node] = v
		f.mu.Unlock()
	}
	return fuse.OK
}

func (f *closeToOpen) wraps(op fuseproto.Opcode) bool { return op == fuseproto.Open }

func (f *closeToOpen) around(r *request) fuse.Status {
	st := r.next()
	if st != fuse.OK || f.w.cfg.DirectIO {
		return st
	}
	r.open.OpenFlags |= fuse.FOPEN_KEEP_CACHE
	now, ok := f.version(r.c, r.node)
	f.mu.Lock()
	last, seen := f.lastClose[r.node]
	f.mu.Unlock()
	if ok && seen && now != last {
		r.open.OpenFlags &^= fuse.FOPEN_KEEP_CACHE
		f.invalidations.Add(1)
	}
	return st
}

func (f *closeToOpen) count(m map[string]uint64) {
	m["cto_invalidations"] = f.invalidations.Load()
}
