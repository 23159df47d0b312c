package labfs

import (
	"bytes"
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
// clearing that FUSE_HANDLE_KILLPRIV_V2 hands to the daemon. The optional
// features (features.go) follow what its requests do through events, and
// wrap the requests they answer; labRaw names none of them.
type labRaw struct {
	fuse.RawFileSystem
	src   string // the source directory (--invalidation notify watches it)
	cfg   *Config
	stats *daemonStats
	link  *link
	sleep *sleeper
	slots chan struct{} // nil: no concurrency limit

	features featureSet
	acls     *defaultACLs // creationMode's; nil: asked at every create

	invalidateAttr func(node uint64) // drops the kernel's cached attributes of a node
	shrinks        *atomic.Uint64    // the mount's requests that may shorten a file (confinedNode.readable)
}

func (w *labRaw) Lookup(c <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	return w.serve(h, fuseproto.Lookup, func(remote backend) (fuse.Status, int) {
		st := w.run(&request{op: fuseproto.Lookup, c: c, node: h.NodeId, lookup: &lookupRequest{h, name}, entry: out, remote: remote})
		if st == fuse.OK {
			w.tell(event{kind: referenced, parent: h.NodeId, name: name, node: out.NodeId})
		}
		return st, 0
	})
}

// entry records a reply that created a name (create, mkdir, link...).
func (w *labRaw) entry(parent uint64, name string, out *fuse.EntryOut, st fuse.Status) fuse.Status {
	w.tell(event{kind: namespaceChanged})
	if st == fuse.OK {
		w.tell(event{kind: referenced, parent: parent, name: name, node: out.NodeId})
	}
	return st
}

func (w *labRaw) Forget(nodeid, nlookup uint64) {
	w.tell(event{kind: forgotten, node: nodeid, n: nlookup})
	w.RawFileSystem.Forget(nodeid, nlookup)
}

func (w *labRaw) GetAttr(c <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Getattr, func(remote backend) (fuse.Status, int) {
		w.tell(event{kind: drain, c: c, node: in.NodeId})
		w.tell(event{kind: used, node: in.NodeId})
		return w.run(&request{op: fuseproto.Getattr, c: c, node: in.NodeId, getattr: in, attr: out, remote: remote}), 0
	})
}

func (w *labRaw) SetAttr(c <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Setattr, func(remote backend) (fuse.Status, int) {
		w.tell(event{kind: drain, c: c, node: in.NodeId})
		remote.wait()
		w.tell(event{kind: dataChanging, node: in.NodeId})
		st := w.RawFileSystem.SetAttr(c, in, out)
		w.tell(event{kind: dataChanged, node: in.NodeId}) // after the change: an answer fetched before it is not kept
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
		defer w.tell(event{kind: namespaceChanged})
		return w.RawFileSystem.Unlink(c, h, name), 0
	})
}

func (w *labRaw) Rmdir(c <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return w.serve(h, fuseproto.Rmdir, func(remote backend) (fuse.Status, int) {
		remote.wait()
		defer w.tell(event{kind: namespaceChanged})
		return w.RawFileSystem.Rmdir(c, h, name), 0
	})
}

func (w *labRaw) Rename(c <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Rename, func(remote backend) (fuse.Status, int) {
		remote.wait()
		defer w.tell(event{kind: namespaceChanged})
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

// xattrsRefused is the answer to every xattr request under --xattrs
// enosys or eopnotsupp; OK: they are passed through.
func (w *labRaw) xattrsRefused() fuse.Status {
	switch w.cfg.Xattrs {
	case "enosys":
		return fuse.ENOSYS
	case "eopnotsupp":
		return fuse.Status(syscall.EOPNOTSUPP)
	}
	return fuse.OK
}

func (w *labRaw) GetXAttr(c <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (sz uint32, st fuse.Status) {
	w.serve(h, fuseproto.Getxattr, func(remote backend) (fuse.Status, int) {
		if st = w.xattrsRefused(); st != fuse.OK {
			return st, 0
		}
		remote.wait()
		sz, st = w.RawFileSystem.GetXAttr(c, h, attr, dest)
		return st, xattrReply(sz, dest)
	})
	return sz, st
}

func (w *labRaw) ListXAttr(c <-chan struct{}, h *fuse.InHeader, dest []byte) (sz uint32, st fuse.Status) {
	w.serve(h, fuseproto.Listxattr, func(remote backend) (fuse.Status, int) {
		if st = w.xattrsRefused(); st != fuse.OK {
			return st, 0
		}
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
		if st := w.xattrsRefused(); st != fuse.OK {
			return st, 0
		}
		remote.wait()
		st := w.RawFileSystem.SetXAttr(c, in, attr, data)
		if st == fuse.OK && attr == aclAccess && in.SetXAttrFlags&fuse.SETXATTR_ACL_KILL_SGID != 0 {
			w.killSgid(c, &in.InHeader)
		}
		w.tell(event{kind: attrsChanged, node: in.NodeId, name: attr}) // an ACL changes the mode with it
		return st, 0
	})
}

func (w *labRaw) RemoveXAttr(c <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	return w.serve(h, fuseproto.Removexattr, func(remote backend) (fuse.Status, int) {
		if st := w.xattrsRefused(); st != fuse.OK {
			return st, 0
		}
		remote.wait()
		st := w.RawFileSystem.RemoveXAttr(c, h, attr)
		w.tell(event{kind: attrsChanged, node: h.NodeId, name: attr})
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
			w.tell(event{kind: opened, node: out.NodeId, flags: in.Flags})
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
		in.Flags = w.backingFlags(in.Flags)
		w.tell(event{kind: used, node: in.NodeId})
		st := w.run(&request{op: fuseproto.Open, c: c, node: in.NodeId, openIn: in, open: out, remote: remote})
		if in.Flags&syscall.O_TRUNC != 0 {
			w.shrinks.Add(1)
		}
		if st == fuse.OK {
			w.openFlags(out)
			w.tell(event{kind: opened, node: in.NodeId, flags: in.Flags})
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

func (w *labRaw) Read(c <-chan struct{}, in *fuse.ReadIn, buf []byte) (res fuse.ReadResult, st fuse.Status) {
	start := monotonic()
	w.tell(event{kind: readReceived, node: in.NodeId, unique: in.Unique, off: in.Offset, size: int(in.Size)})
	n, deferred := 0, false
	w.serveFrom(start, &in.InHeader, fuseproto.Read, func(remote backend) (fuse.Status, int) {
		w.tell(event{kind: drain, c: c, node: in.NodeId})
		r := request{op: fuseproto.Read, c: c, node: in.NodeId, fh: in.Fh, read: in, buf: buf, remote: remote}
		st = w.run(&r)
		if r.reply != nil { // a feature's answer
			res = fuse.ReadResultData(r.reply)
			return st, len(r.reply)
		}
		res = r.result
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
	received := event{kind: writeReceived, node: in.NodeId, unique: in.Unique, off: in.Offset, size: size}
	w.tell(received) // before the wait for a slot, which a later READ may pass
	defer func() { received.kind = writeAnswered; w.tell(received) }()
	w.serve(&in.InHeader, fuseproto.Write, func(remote backend) (fuse.Status, int) {
		// The caches are dropped once the backend has the data: an answer
		// fetched before it must not be kept after it (dataChanged).
		w.tell(event{kind: dataChanging, node: in.NodeId})
		r := request{op: fuseproto.Write, c: c, node: in.NodeId, fh: in.Fh, write: in, data: data, remote: remote,
			// The caller's direct I/O, not the page cache's write-back,
			// which the kernel sends through any open file of the inode.
			direct: in.Flags&syscall.O_DIRECT != 0 && in.WriteFlags&fuse.WRITE_CACHE == 0}
		st = w.run(&r)
		n = r.written
		return st, 0
	})
	return n, st
}

// writeBackend writes r's payload to the backend, and tells the features
// the node's data changed.
func (w *labRaw) writeBackend(r *request) fuse.Status {
	c, in, data := r.c, r.write, r.data
	size := 0
	for _, d := range data {
		size += len(d)
	}
	r.remote.wait()
	w.link.wait(size)
	if r.direct {
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
	w.tell(event{kind: dataChanged, node: in.NodeId})
	r.written = n
	return st
}

func (w *labRaw) Lseek(c <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Lseek, func(remote backend) (fuse.Status, int) {
		w.tell(event{kind: drain, c: c, node: in.NodeId})
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
		w.tell(event{kind: drain, c: c, node: in.NodeId})
		w.tell(event{kind: releasing, c: c, node: in.NodeId, fh: in.Fh})
		remote.wait()
		w.RawFileSystem.Release(c, in)
		w.tell(event{kind: released, node: in.NodeId, fh: in.Fh, flags: in.Flags})
		return fuse.OK, 0
	})
}

func (w *labRaw) CopyFileRange(c <-chan struct{}, in *fuse.CopyFileRangeIn) (n uint32, st fuse.Status) {
	w.serve(&in.InHeader, fuseproto.CopyFileRange, func(remote backend) (fuse.Status, int) {
		w.tell(event{kind: drain, c: c, node: in.NodeId})
		w.tell(event{kind: drain, c: c, node: in.NodeIdOut})
		remote.wait()
		w.tell(event{kind: dataChanging, node: in.NodeIdOut})
		n, st = w.RawFileSystem.CopyFileRange(c, in)
		w.tell(event{kind: dataChanged, node: in.NodeIdOut})
		return st, 0
	})
	return n, st
}

// Flush (close) and fsync report the errors of writes acknowledged before
// the backend had them (write-behind), so none is lost.
func (w *labRaw) Flush(c <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Flush, func(remote backend) (fuse.Status, int) {
		queued := w.tell(event{kind: drain, c: c, node: in.NodeId, report: true})
		remote.wait()
		st := w.RawFileSystem.Flush(c, in)
		// close() sends FLUSH and waits for it; RELEASE comes later and
		// asynchronously, too late for an open that follows at once.
		w.tell(event{kind: flushed, c: c, node: in.NodeId, fh: in.Fh})
		if queued == fuse.OK {
			return st, 0
		}
		return queued, 0
	})
}

func (w *labRaw) Fsync(c <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Fsync, func(remote backend) (fuse.Status, int) {
		queued := w.tell(event{kind: drain, c: c, node: in.NodeId, report: true})
		remote.wait()
		if st := w.RawFileSystem.Fsync(c, in); queued == fuse.OK {
			return st, 0
		}
		return queued, 0
	})
}

func (w *labRaw) Fallocate(c <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Fallocate, func(remote backend) (fuse.Status, int) {
		w.tell(event{kind: drain, c: c, node: in.NodeId})
		remote.wait()
		w.tell(event{kind: dataChanging, node: in.NodeId})
		st := w.RawFileSystem.Fallocate(c, in)
		w.tell(event{kind: dataChanged, node: in.NodeId})
		w.shrinks.Add(1) // FALLOC_FL_COLLAPSE_RANGE shortens
		return st, 0
	})
}

func (w *labRaw) OpenDir(c <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Opendir, func(remote backend) (fuse.Status, int) {
		return w.run(&request{op: fuseproto.Opendir, c: c, node: in.NodeId, openIn: in, open: out, remote: remote}), 0
	})
}

func (w *labRaw) ReadDir(c <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Readdir, func(remote backend) (fuse.Status, int) {
		before := len(out.Bytes())
		st := w.run(&request{op: fuseproto.Readdir, c: c, node: in.NodeId, fh: in.Fh, read: in, dirs: out, remote: remote})
		return st, len(out.Bytes()) - before
	})
}

func (w *labRaw) ReadDirPlus(c <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return w.serve(&in.InHeader, fuseproto.Readdirplus, func(remote backend) (fuse.Status, int) {
		before := len(out.Bytes())
		r := request{op: fuseproto.Readdirplus, c: c, node: in.NodeId, fh: in.Fh, read: in, dirs: out, remote: remote}
		st := w.run(&r)
		if st == fuse.OK && r.list != nil {
			w.tell(event{kind: listed, node: in.NodeId, list: r.list})
		}
		return st, len(out.Bytes()) - before
	})
}

// dirListing is a READDIRPLUS reply, parsed when a feature asks for its
// entries.
type dirListing struct {
	reply   []byte
	parsed  bool
	names   []string
	ids     []uint64
	entries []fuse.EntryOut
}

// lookedUp is what a LOOKUP of each entry would have taught: the entries
// with a node id (the kernel takes a reference to each, and skips "." and
// "..").
func (l *dirListing) lookedUp() (names []string, ids []uint64, outs []fuse.EntryOut) {
	if l.parsed {
		return l.names, l.ids, l.entries
	}
	l.parsed = true
	if len(l.reply) == 0 {
		return nil, nil, nil
	}
	entries, all, err := fuse.ParseDirLookupEntries(l.reply)
	if err != nil {
		return nil, nil, nil
	}
	for i, e := range entries {
		if all[i].NodeId == 0 || e.Name == "." || e.Name == ".." {
			continue
		}
		l.names, l.ids, l.entries = append(l.names, e.Name), append(l.ids, all[i].NodeId), append(l.entries, all[i])
	}
	return l.names, l.ids, l.entries
}

func (w *labRaw) ReleaseDir(in *fuse.ReleaseIn) {
	w.serve(&in.InHeader, fuseproto.Releasedir, func(remote backend) (fuse.Status, int) {
		remote.wait()
		w.tell(event{kind: dirReleased, node: in.NodeId, fh: in.Fh})
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

// backendCall is where a request that features may wrap reaches the
// backend (request.next, after the last of them).
func (w *labRaw) backendCall(r *request) fuse.Status {
	switch r.op {
	case fuseproto.Lookup:
		r.remote.wait()
		return w.RawFileSystem.Lookup(r.c, r.lookup.h, r.lookup.name, r.entry)
	case fuseproto.Getattr:
		r.remote.wait()
		return w.RawFileSystem.GetAttr(r.c, r.getattr, r.attr)
	case fuseproto.Open:
		r.remote.wait()
		return w.RawFileSystem.Open(r.c, r.openIn, r.open)
	case fuseproto.Opendir:
		r.remote.wait()
		return w.RawFileSystem.OpenDir(r.c, r.openIn, r.open)
	case fuseproto.Read:
		r.remote.wait()
		if r.read.Flags&syscall.O_DIRECT != 0 { // the kernel sends the caller's open flags
			defer markDirect(r.c)()
		}
		var st fuse.Status
		r.result, st = w.RawFileSystem.Read(r.c, r.read, r.buf)
		return st
	case fuseproto.Write:
		return w.writeBackend(r)
	case fuseproto.Readdir:
		if !r.local {
			r.remote.wait()
		}
		return w.RawFileSystem.ReadDir(r.c, r.read, r.dirs)
	case fuseproto.Readdirplus:
		if !r.local {
			r.remote.wait()
		}
		before := len(r.dirs.Bytes())
		st := w.RawFileSystem.ReadDirPlus(r.c, r.read, r.dirs)
		if st == fuse.OK && len(w.features.all) > 0 {
			r.list = &dirListing{reply: r.dirs.Bytes()[before:]}
		}
		return st
	}
	return fuse.ENOSYS
}
