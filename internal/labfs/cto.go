package labfs

import "github.com/hanwen/go-fuse/v2/fuse"

// fileVersion is what close-to-open compares between a close and an open.
type fileVersion struct {
	size             uint64
	mtime, mtimensec uint64
}

// version reads an inode's size and mtime from the backend.
func (w *labRaw) version(c <-chan struct{}, node uint64) (fileVersion, bool) {
	var a fuse.AttrOut
	if w.RawFileSystem.GetAttr(c, &fuse.GetAttrIn{InHeader: fuse.InHeader{NodeId: node}}, &a) != fuse.OK {
		return fileVersion{}, false
	}
	return fileVersion{size: a.Size, mtime: a.Mtime, mtimensec: uint64(a.Mtimensec)}, true
}

// noteClose records the version of a file being closed (close-to-open).
func (w *labRaw) noteClose(c <-chan struct{}, node uint64) {
	if w.cfg.Invalidation != "cto" {
		return
	}
	if v, ok := w.version(c, node); ok {
		w.ctoMu.Lock()
		w.lastClose[node] = v
		w.ctoMu.Unlock()
	}
}

// closeToOpen keeps a file's cached pages across opens unless its size or
// mtime changed since it was last closed through this mount; then the open
// is answered without FOPEN_KEEP_CACHE, which makes the kernel drop them.
func (w *labRaw) closeToOpen(c <-chan struct{}, node uint64, out *fuse.OpenOut) {
	if w.cfg.Invalidation != "cto" || w.cfg.DirectIO {
		return
	}
	out.OpenFlags |= fuse.FOPEN_KEEP_CACHE
	now, ok := w.version(c, node)
	w.ctoMu.Lock()
	last, seen := w.lastClose[node]
	w.ctoMu.Unlock()
	if ok && seen && now != last {
		out.OpenFlags &^= fuse.FOPEN_KEEP_CACHE
		w.c.invalidations.Add(1)
	}
}
