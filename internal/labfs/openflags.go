package labfs

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// openFlags applies the page-cache mode to an open reply.
func (w *labRaw) openFlags(out *fuse.OpenOut) {
	if w.cfg.KeepCache {
		out.OpenFlags |= fuse.FOPEN_KEEP_CACHE
	}
	if w.cfg.DirectIO { // never with passthrough: Config.Validate refuses it
		out.OpenFlags |= fuse.FOPEN_DIRECT_IO
	}
}

// backingFlags adapts open flags for the backing file. With write-back
// caching the kernel sends every write with its offset (it implements
// O_APPEND itself) and may read pages of a file opened write-only, so the
// backing file must be opened without O_APPEND and readable; otherwise
// appended data lands at the wrong place and is lost.
func (w *labRaw) backingFlags(flags uint32) uint32 {
	if !w.cfg.WritebackCache {
		return flags
	}
	flags &^= syscall.O_APPEND
	if flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		flags = flags&^syscall.O_ACCMODE | syscall.O_RDWR
	}
	return flags
}
