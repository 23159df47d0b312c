package labfs

import (
	"bytes"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// labRaw wraps go-fuse's node file system at the protocol level, where every
// request passes: it times each one from receipt to reply, injects the
// emulated backend's latency and bandwidth, limits concurrency (--threads),
// sets the open flags of the caching modes, and carries out the suid/sgid
// clearing that FUSE_HANDLE_KILLPRIV_V2 hands to the daemon.
type labRaw struct {
	fuse.RawFileSystem
	cfg   *Config
	stats *daemonStats
	link  *link
	sleep *sleeper
	slots chan struct{} // nil: no concurrency limit

	c    *counters
	md   *mdCache      // nil unless --md-cache
	wb   *writeBehind  // nil unless --write-behind
	pipe *pipeline     // nil unless --read-pipeline
	lru  *inodeLRU     // nil unless --max-inodes
	rda  *readdirAhead // nil unless --readdir-ahead
	ord  *writeOrder   // nil where the kernel orders READ after WRITE itself

	ctoMu     sync.Mutex
	lastClose map[uint64]fileVersion // --invalidation cto
	acls      *defaultACLs           // nil: asked at every create

	invalidateAttr func(node uint64) // drops the kernel's cached attributes of a node
	shrinks        *atomic.Uint64    // the mount's requests that may shorten a file (confinedNode.readable)
}

func (w *labRaw) Lookup(c <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	return w.serve(h, fuseproto.Lookup, func(remote backend) (fuse.Status, int) {
		remote.wait()
		since := w.md.begin()
		st := w.RawFileSystem.Lookup(c, h, name, out)
		if st == fuse.OK {
			w.md.put(out.NodeId, &fuse.AttrOut{AttrValid: out.AttrValid, AttrValidNsec: out.AttrValidNsec, Attr: out.Attr}, since)
			w.lru.looked(h.NodeId, name, out.NodeId)
		}
		return st, 0
	})
}

// entry records a reply that created a name (create, mkdir, link...).
func (w *labRaw) entry(parent uint64, name string, out *fuse.EntryOut, st fuse.Status) fuse.Status {
	w.md.clear()
	if st == fuse.OK {
		w.lru.looked(parent, name, out.NodeId)
	}
	return st
}

func (w *labRaw) Forget(nodeid, nlookup uint64) {
	w.lru.forgot(nodeid, nlookup)
	w.md.forget(nodeid)
	w.wb.forget(nodeid)
	w.acls.drop(nodeid)
	w.RawFileSystem.Forget(nodeid, nlookup)
}

func (w *labRaw) GetAttr(c <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Getattr, func(remote backend) (fuse.Status, int) {
		w.wb.drain(in.NodeId, false)
		w.lru.touch(in.NodeId)
		if w.md != nil {
			if w.md.get(in.NodeId, out) {
				w.c.mdHits.Add(1)
				return fuse.OK, 0
			}
			w.c.mdMisses.Add(1)
		}
		remote.wait()
		since := w.md.begin()
		st := w.RawFileSystem.GetAttr(c, in, out)
		if st == fuse.OK {
			w.md.put(in.NodeId, out, since)
		}
		return st, 0
	})
}

func (w *labRaw) SetAttr(c <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Setattr, func(remote backend) (fuse.Status, int) {
		w.wb.drain(in.NodeId, false)
		remote.wait()
		st := w.pipe.change(in.NodeId, func() fuse.Status { return w.RawFileSystem.SetAttr(c, in, out) })
		w.md.drop(in.NodeId) // after the change: an answer fetched before it is not cached
		if in.Valid&fuse.FATTR_SIZE != 0 {
			w.shrinks.Add(1)
		}
		if st == fuse.OK && in.Valid&fuse.FATTR_KILL_SUIDGID != 0 && in.Valid&fuse.FATTR_MODE == 0 {
			w.killSuidgid(c, &in.InHeader, in.Fh, out)
		}
		return st, 0
	})
}

func (w *labRaw) Mknod(c <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Mknod, func(remote backend) (fuse.Status, int) {
		remote.wait()
		in.Mode = w.creationMode(c, in.NodeId, in.Mode, in.Umask)
		return w.entry(in.NodeId, name, out, w.RawFileSystem.Mknod(c, in, name, out)), 0
	})
}

func (w *labRaw) Mkdir(c <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Mkdir, func(remote backend) (fuse.Status, int) {
		remote.wait()
		in.Mode = w.creationMode(c, in.NodeId, in.Mode, in.Umask)
		return w.entry(in.NodeId, name, out, w.RawFileSystem.Mkdir(c, in, name, out)), 0
	})
}

func (w *labRaw) Unlink(c <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return w.serve(h, fuseproto.Unlink, func(remote backend) (fuse.Status, int) {
		remote.wait()
		defer w.md.clear()
		return w.RawFileSystem.Unlink(c, h, name), 0
	})
}

func (w *labRaw) Rmdir(c <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return w.serve(h, fuseproto.Rmdir, func(remote backend) (fuse.Status, int) {
		remote.wait()
		defer w.md.clear()
		return w.RawFileSystem.Rmdir(c, h, name), 0
	})
}

func (w *labRaw) Rename(c <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Rename, func(remote backend) (fuse.Status, int) {
		remote.wait()
		defer w.md.clear()
		return w.RawFileSystem.Rename(c, in, oldName, newName), 0
	})
}

func (w *labRaw) Link(c <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Link, func(remote backend) (fuse.Status, int) {
		remote.wait()
		return w.entry(in.NodeId, name, out, w.RawFileSystem.Link(c, in, name, out)), 0
	})
}

func (w *labRaw) Symlink(c <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	return w.serve(h, fuseproto.Symlink, func(remote backend) (fuse.Status, int) {
		remote.wait()
		return w.entry(h.NodeId, name, out, w.RawFileSystem.Symlink(c, h, target, name, out)), 0
	})
}

func (w *labRaw) Readlink(c <-chan struct{}, h *fuse.InHeader) (out []byte, st fuse.Status) {
	w.serve(h, fuseproto.Readlink, func(remote backend) (fuse.Status, int) {
		remote.wait()
		out, st = w.RawFileSystem.Readlink(c, h)
		return st, len(out)
	})
	return out, st
}

func (w *labRaw) Access(c <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Access, func(remote backend) (fuse.Status, int) {
		remote.wait()
		return w.RawFileSystem.Access(c, in), 0
	})
}

func (w *labRaw) GetXAttr(c <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (sz uint32, st fuse.Status) {
	w.serve(h, fuseproto.Getxattr, func(remote backend) (fuse.Status, int) {
		remote.wait()
		sz, st = w.RawFileSystem.GetXAttr(c, h, attr, dest)
		return st, xattrReply(sz, dest)
	})
	return sz, st
}

func (w *labRaw) ListXAttr(c <-chan struct{}, h *fuse.InHeader, dest []byte) (sz uint32, st fuse.Status) {
	w.serve(h, fuseproto.Listxattr, func(remote backend) (fuse.Status, int) {
		remote.wait()
		sz, st = w.RawFileSystem.ListXAttr(c, h, dest)
		return st, xattrReply(sz, dest)
	})
	return sz, st
}

// xattrReply is what an xattr reply carried after its out header: to a
// caller that gave no buffer, the size alone (a GetXAttrOut), else the
// value or the list of names, sz bytes.
func xattrReply(sz uint32, dest []byte) int {
	if len(dest) == 0 {
		return int(unsafe.Sizeof(fuse.GetXAttrOut{}))
	}
	return int(sz)
}

func (w *labRaw) SetXAttr(c <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Setxattr, func(remote backend) (fuse.Status, int) {
		remote.wait()
		st := w.RawFileSystem.SetXAttr(c, in, attr, data)
		if st == fuse.OK && attr == aclAccess && in.SetXAttrFlags&fuse.SETXATTR_ACL_KILL_SGID != 0 {
			w.killSgid(c, &in.InHeader)
		}
		w.md.drop(in.NodeId) // an ACL changes the mode with it
		if attr == aclDefault {
			w.acls.drop(in.NodeId)
		}
		return st, 0
	})
}

func (w *labRaw) RemoveXAttr(c <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	return w.serve(h, fuseproto.Removexattr, func(remote backend) (fuse.Status, int) {
		remote.wait()
		st := w.RawFileSystem.RemoveXAttr(c, h, attr)
		w.md.drop(h.NodeId)
		if attr == aclDefault {
			w.acls.drop(h.NodeId)
		}
		return st, 0
	})
}

func (w *labRaw) Create(c <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Create, func(remote backend) (fuse.Status, int) {
		remote.wait()
		in.Flags = w.backingFlags(in.Flags)
		in.Mode = w.creationMode(c, in.NodeId, in.Mode, in.Umask)
		st := w.entry(in.NodeId, name, &out.EntryOut, w.RawFileSystem.Create(c, in, name, out))
		if in.Flags&syscall.O_TRUNC != 0 { // an existing file
			w.shrinks.Add(1)
		}
		if st == fuse.OK {
			w.openFlags(&out.OpenOut)
			w.openedForWrite(out.NodeId, in.Flags)
		}
		return st, 0
	})
}

// Tmpfile is open(O_TMPFILE): a file in no directory, made as Create makes
// one.
func (w *labRaw) Tmpfile(c <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Tmpfile, func(remote backend) (fuse.Status, int) {
		remote.wait()
		in.Flags = w.backingFlags(in.Flags)
		in.Mode = w.creationMode(c, in.NodeId, in.Mode, in.Umask)
		st := w.RawFileSystem.Tmpfile(c, in, out)
		if st == fuse.OK {
			w.openFlags(&out.OpenOut)
		}
		return st, 0
	})
}

const (
	aclAccess  = "system.posix_acl_access"
	aclDefault = "system.posix_acl_default"
)

func (w *labRaw) Open(c <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Open, func(remote backend) (fuse.Status, int) {
		remote.wait()
		in.Flags = w.backingFlags(in.Flags)
		w.lru.touch(in.NodeId)
		st := w.RawFileSystem.Open(c, in, out)
		if in.Flags&syscall.O_TRUNC != 0 {
			w.shrinks.Add(1)
		}
		if st == fuse.OK {
			w.openFlags(out)
			w.openedForWrite(in.NodeId, in.Flags)
			w.closeToOpen(c, in.NodeId, out)
			// O_TRUNC by a caller without CAP_FSETID (FUSE_OPEN_KILL_SUIDGID).
			if in.Mode&1 != 0 && in.Flags&syscall.O_TRUNC != 0 {
				var a fuse.AttrOut
				w.killSuidgid(c, &in.InHeader, out.Fh, &a)
			} else if w.cfg.Passthrough && !w.cfg.NoKillprivV2 && in.Flags&syscall.O_ACCMODE != syscall.O_RDONLY {
				w.killPrivsForWriter(c, &in.InHeader)
			}
		}
		return st, 0
	})
}

// fetchChunk reads one pipelined chunk from the backend, paying the emulated
// READ delay and bandwidth as a READ request would.
func (w *labRaw) fetchChunk(node, fh uint64, off int64, size int) ([]byte, bool) {
	if d := w.cfg.Latency.For(fuseproto.Read); d > 0 {
		w.sleep.sleep(d)
	}
	buf := make([]byte, size)
	res, st := w.RawFileSystem.Read(nil, &fuse.ReadIn{InHeader: fuse.InHeader{NodeId: node}, Fh: fh, Offset: uint64(off), Size: uint32(size)}, buf)
	if st != fuse.OK || res == nil {
		return nil, false
	}
	data, st := res.Bytes(buf)
	res.Done()
	if st != fuse.OK {
		return nil, false
	}
	w.link.wait(len(data))
	return data, true
}

func (w *labRaw) Read(c <-chan struct{}, in *fuse.ReadIn, buf []byte) (res fuse.ReadResult, st fuse.Status) {
	start := monotonic()
	w.ord.wait(in.NodeId, in.Unique, in.Offset, int(in.Size))
	n, deferred := 0, false
	w.serveFrom(start, &in.InHeader, fuseproto.Read, func(remote backend) (fuse.Status, int) {
		w.wb.drain(in.NodeId, false)
		if w.pipe != nil {
			if data, ok := w.pipe.read(in.NodeId, in.Fh, int64(in.Offset), int(in.Size)); ok {
				res, st = fuse.ReadResultData(data), fuse.OK
				return st, len(data)
			}
		}
		remote.wait()
		if in.Flags&syscall.O_DIRECT != 0 { // the kernel sends the caller's open flags
			defer markDirect(c)()
		}
		res, st = w.RawFileSystem.Read(c, in, buf)
		if st == fuse.OK && res != nil {
			n = res.Size() // exact: openHandle.Read sizes it to the file
			if n == 0 {
				// Recorded now: go-fuse sends an empty reply without
				// calling the result's Done.
				return fuse.OK, 0
			}
			w.link.wait(n)
			deferred = true
			return fuse.OK, -1 // recorded when the reply has gone out
		}
		return st, 0
	})
	if deferred {
		length := in.Length // go-fuse may reuse the request's buffer once it has replied
		res = timeRead(res, n, func(n int) { w.stats.record(fuseproto.Read, monotonic()-start, "", length, outHeaderSize+n) })
	}
	return res, st
}

// Write is not called by go-fuse while Writev answers; it is here so that
// every path goes through the same handling.
func (w *labRaw) Write(c <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	return w.Writev(c, in, [][]byte{data})
}

// Writev handles WRITE (go-fuse calls it first, with the payload as it came
// off /dev/fuse).
func (w *labRaw) Writev(c <-chan struct{}, in *fuse.WriteIn, data [][]byte) (n uint32, st fuse.Status) {
	size := 0
	for _, d := range data {
		size += len(d)
	}
	applied := w.ord.begin(in.NodeId, in.Unique, in.Offset, size) // before the wait for a slot, which a later READ may pass
	defer applied()
	// The caller's direct I/O, not the page cache's write-back, which the
	// kernel sends through any open file of the inode.
	direct := in.Flags&syscall.O_DIRECT != 0 && in.WriteFlags&fuse.WRITE_CACHE == 0
	w.serve(&in.InHeader, fuseproto.Write, func(remote backend) (fuse.Status, int) {
		node := in.NodeId
		// The caches are dropped once the backend has the data: an answer
		// fetched before it must not be kept after it (pipeline.begin,
		// mdCache.put).
		w.pipe.begin(node)
		write := func(c <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
			remote.wait()
			w.link.wait(size)
			if direct {
				defer markDirect(c)()
			}
			n, st := w.RawFileSystem.Writev(c, in, data)
			if st == fuse.ENOSYS {
				n, st = w.RawFileSystem.Write(c, in, bytes.Join(data, nil))
			}
			if st == fuse.OK && int(n) != size {
				st = fuse.EIO // a short write the client was told succeeded
			}
			if st == fuse.OK && in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0 {
				var a fuse.AttrOut
				w.killSuidgid(c, &in.InHeader, in.Fh, &a)
			}
			w.pipe.end(node)
			w.md.drop(node)
			return n, st
		}
		if w.wb == nil {
			n, st = write(c, in, data)
			return st, 0
		}
		// Write-behind: copy the request (go-fuse reuses its buffers) and
		// acknowledge it; the queue writes it in order, a direct write
		// from a page-aligned copy.
		inCopy, dataCopy := *in, bytes.Join(data, nil)
		var queued <-chan struct{} // names the request as direct I/O
		if direct {
			aligned := alignedBuffer(len(dataCopy))
			copy(aligned, dataCopy)
			dataCopy, queued = aligned, make(chan struct{})
		}
		w.wb.submit(in.NodeId, func() fuse.Status {
			_, st := write(queued, &inCopy, [][]byte{dataCopy})
			return st
		})
		n, st = uint32(size), fuse.OK
		return st, 0
	})
	return n, st
}

func (w *labRaw) Lseek(c <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Lseek, func(remote backend) (fuse.Status, int) {
		w.wb.drain(in.NodeId, false)
		remote.wait()
		return w.RawFileSystem.Lseek(c, in, out), 0
	})
}

func (w *labRaw) GetLk(c <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Getlk, func(remote backend) (fuse.Status, int) {
		remote.wait()
		return w.RawFileSystem.GetLk(c, in, out), 0
	})
}

func (w *labRaw) SetLk(c <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Setlk, func(remote backend) (fuse.Status, int) { remote.wait(); return w.RawFileSystem.SetLk(c, in), 0 })
}

func (w *labRaw) SetLkw(c <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Setlkw, func(remote backend) (fuse.Status, int) {
		remote.wait()
		return w.RawFileSystem.SetLkw(c, in), 0
	})
}

func (w *labRaw) Release(c <-chan struct{}, in *fuse.ReleaseIn) {
	w.serve(&in.InHeader, fuseproto.Release, func(remote backend) (fuse.Status, int) {
		w.wb.drain(in.NodeId, false)
		w.pipe.forget(in.Fh)
		w.noteClose(c, in.NodeId)
		remote.wait()
		w.RawFileSystem.Release(c, in)
		if w.cfg.Passthrough && in.Flags&syscall.O_ACCMODE != syscall.O_RDONLY {
			w.md.closed(in.NodeId)
		}
		return fuse.OK, 0
	})
}

func (w *labRaw) CopyFileRange(c <-chan struct{}, in *fuse.CopyFileRangeIn) (n uint32, st fuse.Status) {
	w.serve(&in.InHeader, fuseproto.CopyFileRange, func(remote backend) (fuse.Status, int) {
		w.wb.drain(in.NodeId, false)
		w.wb.drain(in.NodeIdOut, false)
		remote.wait()
		st = w.pipe.change(in.NodeIdOut, func() fuse.Status {
			n, st = w.RawFileSystem.CopyFileRange(c, in)
			return st
		})
		w.md.drop(in.NodeIdOut)
		return st, 0
	})
	return n, st
}

// Flush (close) and fsync report write-behind errors, so none is lost.
func (w *labRaw) Flush(c <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Flush, func(remote backend) (fuse.Status, int) {
		queued := w.wb.drain(in.NodeId, true)
		remote.wait()
		st := w.RawFileSystem.Flush(c, in)
		// close() sends FLUSH and waits for it; RELEASE comes later and
		// asynchronously, too late for an open that follows at once.
		w.noteClose(c, in.NodeId)
		if queued == fuse.OK {
			return st, 0
		}
		return queued, 0
	})
}

func (w *labRaw) Fsync(c <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Fsync, func(remote backend) (fuse.Status, int) {
		queued := w.wb.drain(in.NodeId, true)
		remote.wait()
		if st := w.RawFileSystem.Fsync(c, in); queued == fuse.OK {
			return st, 0
		}
		return queued, 0
	})
}

func (w *labRaw) Fallocate(c <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Fallocate, func(remote backend) (fuse.Status, int) {
		w.wb.drain(in.NodeId, false)
		remote.wait()
		st := w.pipe.change(in.NodeId, func() fuse.Status { return w.RawFileSystem.Fallocate(c, in) })
		w.md.drop(in.NodeId)
		w.shrinks.Add(1) // FALLOC_FL_COLLAPSE_RANGE shortens
		return st, 0
	})
}

func (w *labRaw) OpenDir(c <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Opendir, func(remote backend) (fuse.Status, int) {
		remote.wait()
		st := w.RawFileSystem.OpenDir(c, in, out)
		if st == fuse.OK && w.rda != nil {
			op := w.cfg.listingOp()
			w.rda.start(out.Fh, backend{w, op}.wait)
		}
		return st, 0
	})
}

// listing answers a READDIR(PLUS): from the readdir-ahead prefetch when the
// handle has one, otherwise with a round trip to the backend.
func (w *labRaw) listing(fh uint64, remote backend) {
	if w.rda == nil || !w.rda.wait(fh) {
		remote.wait()
	}
}

func (w *labRaw) ReadDir(c <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Readdir, func(remote backend) (fuse.Status, int) {
		w.listing(in.Fh, remote)
		before := len(out.Bytes())
		st := w.RawFileSystem.ReadDir(c, in, out)
		return st, len(out.Bytes()) - before
	})
}

func (w *labRaw) ReadDirPlus(c <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Readdirplus, func(remote backend) (fuse.Status, int) {
		w.listing(in.Fh, remote)
		before := len(out.Bytes())
		since := w.md.begin()
		st := w.RawFileSystem.ReadDirPlus(c, in, out)
		if st == fuse.OK {
			w.lookedPlus(in.NodeId, out.Bytes()[before:], since)
		}
		return st, len(out.Bytes()) - before
	})
}

// lookedPlus learns from a READDIRPLUS reply what a LOOKUP of each entry
// would have taught: the entry's attributes for the md-cache, and the
// reference the kernel now holds (one per entry with a node id; the kernel
// skips "." and ".."), so that an `ls -l` cannot take the inode count past
// --max-inodes.
func (w *labRaw) lookedPlus(dir uint64, reply []byte, since uint64) {
	if (w.lru == nil && w.md == nil) || len(reply) == 0 {
		return
	}
	entries, outs, err := fuse.ParseDirLookupEntries(reply)
	if err != nil {
		return
	}
	names, ids := make([]string, 0, len(entries)), make([]uint64, 0, len(entries))
	for i, e := range entries {
		out := &outs[i]
		if out.NodeId == 0 || e.Name == "." || e.Name == ".." {
			continue
		}
		names, ids = append(names, e.Name), append(ids, out.NodeId)
		w.md.put(out.NodeId, &fuse.AttrOut{AttrValid: out.AttrValid, AttrValidNsec: out.AttrValidNsec, Attr: out.Attr}, since)
	}
	w.lru.lookedAll(dir, names, ids)
}

func (w *labRaw) ReleaseDir(in *fuse.ReleaseIn) {
	w.serve(&in.InHeader, fuseproto.Releasedir, func(remote backend) (fuse.Status, int) {
		remote.wait()
		if w.rda != nil {
			w.rda.release(in.Fh)
		}
		w.RawFileSystem.ReleaseDir(in)
		return fuse.OK, 0
	})
}

func (w *labRaw) FsyncDir(c <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Fsyncdir, func(remote backend) (fuse.Status, int) {
		remote.wait()
		return w.RawFileSystem.FsyncDir(c, in), 0
	})
}

func (w *labRaw) StatFs(c <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	return w.serve(h, fuseproto.Statfs, func(remote backend) (fuse.Status, int) {
		remote.wait()
		return w.RawFileSystem.StatFs(c, h, out), 0
	})
}

func (w *labRaw) Statx(c <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Statx, func(remote backend) (fuse.Status, int) {
		remote.wait()
		return w.RawFileSystem.Statx(c, in, out), 0
	})
}
