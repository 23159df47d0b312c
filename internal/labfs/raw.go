package labfs

import (
	"syscall"
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
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
}

// serve runs one request: wait for a slot, the emulated network delay, then
// the operation; record the time from receipt to reply.
func (w *labRaw) serve(op fuseproto.Opcode, do func() (fuse.Status, int, int)) fuse.Status {
	start := time.Now()
	if w.slots != nil {
		w.slots <- struct{}{}
		defer func() { <-w.slots }()
	}
	if d := w.cfg.Latency.For(op); d > 0 {
		w.sleep.sleep(d)
	}
	st, in, out := do()
	errno := ""
	if st != fuse.OK {
		errno = unix.ErrnoName(syscall.Errno(st))
		if errno == "" {
			errno = st.String()
		}
	}
	w.stats.record(op, time.Since(start), errno, in, out)
	return st
}

func (w *labRaw) Lookup(c <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	return w.serve(fuseproto.Lookup, func() (fuse.Status, int, int) { return w.RawFileSystem.Lookup(c, h, name, out), 0, 0 })
}

func (w *labRaw) GetAttr(c <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	return w.serve(fuseproto.Getattr, func() (fuse.Status, int, int) { return w.RawFileSystem.GetAttr(c, in, out), 0, 0 })
}

func (w *labRaw) SetAttr(c <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	return w.serve(fuseproto.Setattr, func() (fuse.Status, int, int) {
		st := w.RawFileSystem.SetAttr(c, in, out)
		if st == fuse.OK && in.Valid&fuse.FATTR_KILL_SUIDGID != 0 && in.Valid&fuse.FATTR_MODE == 0 {
			w.killSuidgid(c, &in.InHeader, in.Fh, out)
		}
		return st, 0, 0
	})
}

func (w *labRaw) Mknod(c <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	return w.serve(fuseproto.Mknod, func() (fuse.Status, int, int) { return w.RawFileSystem.Mknod(c, in, name, out), 0, 0 })
}

func (w *labRaw) Mkdir(c <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	return w.serve(fuseproto.Mkdir, func() (fuse.Status, int, int) { return w.RawFileSystem.Mkdir(c, in, name, out), 0, 0 })
}

func (w *labRaw) Unlink(c <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return w.serve(fuseproto.Unlink, func() (fuse.Status, int, int) { return w.RawFileSystem.Unlink(c, h, name), 0, 0 })
}

func (w *labRaw) Rmdir(c <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return w.serve(fuseproto.Rmdir, func() (fuse.Status, int, int) { return w.RawFileSystem.Rmdir(c, h, name), 0, 0 })
}

func (w *labRaw) Rename(c <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	return w.serve(fuseproto.Rename, func() (fuse.Status, int, int) { return w.RawFileSystem.Rename(c, in, oldName, newName), 0, 0 })
}

func (w *labRaw) Link(c <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	return w.serve(fuseproto.Link, func() (fuse.Status, int, int) { return w.RawFileSystem.Link(c, in, name, out), 0, 0 })
}

func (w *labRaw) Symlink(c <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	return w.serve(fuseproto.Symlink, func() (fuse.Status, int, int) {
		return w.RawFileSystem.Symlink(c, h, target, name, out), len(target), 0
	})
}

func (w *labRaw) Readlink(c <-chan struct{}, h *fuse.InHeader) (out []byte, st fuse.Status) {
	w.serve(fuseproto.Readlink, func() (fuse.Status, int, int) {
		out, st = w.RawFileSystem.Readlink(c, h)
		return st, 0, len(out)
	})
	return out, st
}

func (w *labRaw) Access(c <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	return w.serve(fuseproto.Access, func() (fuse.Status, int, int) { return w.RawFileSystem.Access(c, in), 0, 0 })
}

func (w *labRaw) GetXAttr(c <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (sz uint32, st fuse.Status) {
	w.serve(fuseproto.Getxattr, func() (fuse.Status, int, int) {
		sz, st = w.RawFileSystem.GetXAttr(c, h, attr, dest)
		return st, 0, int(sz)
	})
	return sz, st
}

func (w *labRaw) ListXAttr(c <-chan struct{}, h *fuse.InHeader, dest []byte) (sz uint32, st fuse.Status) {
	w.serve(fuseproto.Listxattr, func() (fuse.Status, int, int) {
		sz, st = w.RawFileSystem.ListXAttr(c, h, dest)
		return st, 0, int(sz)
	})
	return sz, st
}

func (w *labRaw) SetXAttr(c <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	return w.serve(fuseproto.Setxattr, func() (fuse.Status, int, int) {
		return w.RawFileSystem.SetXAttr(c, in, attr, data), len(data), 0
	})
}

func (w *labRaw) RemoveXAttr(c <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	return w.serve(fuseproto.Removexattr, func() (fuse.Status, int, int) { return w.RawFileSystem.RemoveXAttr(c, h, attr), 0, 0 })
}

func (w *labRaw) Create(c <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	return w.serve(fuseproto.Create, func() (fuse.Status, int, int) {
		in.Flags = w.backingFlags(in.Flags)
		st := w.RawFileSystem.Create(c, in, name, out)
		if st == fuse.OK {
			w.openFlags(&out.OpenOut)
		}
		return st, 0, 0
	})
}

func (w *labRaw) Open(c <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return w.serve(fuseproto.Open, func() (fuse.Status, int, int) {
		in.Flags = w.backingFlags(in.Flags)
		st := w.RawFileSystem.Open(c, in, out)
		if st == fuse.OK {
			w.openFlags(out)
			// O_TRUNC by a caller without CAP_FSETID (FUSE_OPEN_KILL_SUIDGID).
			if in.Mode&1 != 0 && in.Flags&syscall.O_TRUNC != 0 {
				var a fuse.AttrOut
				w.killSuidgid(c, &in.InHeader, out.Fh, &a)
			}
		}
		return st, 0, 0
	})
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

// openFlags applies the page-cache mode to an open reply.
func (w *labRaw) openFlags(out *fuse.OpenOut) {
	if w.cfg.KeepCache {
		out.OpenFlags |= fuse.FOPEN_KEEP_CACHE
	}
	if w.cfg.DirectIO {
		out.OpenFlags |= fuse.FOPEN_DIRECT_IO
		// Direct I/O and a passthrough backing file exclude each other.
		out.OpenFlags &^= fuse.FOPEN_PASSTHROUGH
		out.BackingID = 0
	}
}

func (w *labRaw) Read(c <-chan struct{}, in *fuse.ReadIn, buf []byte) (res fuse.ReadResult, st fuse.Status) {
	w.serve(fuseproto.Read, func() (fuse.Status, int, int) {
		res, st = w.RawFileSystem.Read(c, in, buf)
		n := 0
		if st == fuse.OK && res != nil {
			n = res.Size()
			w.link.wait(n)
		}
		return st, 0, n
	})
	return res, st
}

func (w *labRaw) Write(c <-chan struct{}, in *fuse.WriteIn, data []byte) (n uint32, st fuse.Status) {
	w.serve(fuseproto.Write, func() (fuse.Status, int, int) {
		w.link.wait(len(data))
		n, st = w.RawFileSystem.Write(c, in, data)
		if st == fuse.OK && in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0 {
			var a fuse.AttrOut
			w.killSuidgid(c, &in.InHeader, in.Fh, &a)
		}
		return st, len(data), 0
	})
	return n, st
}

// killSuidgid clears set-user-ID, set-group-ID (when group-executable) and
// file capabilities after a write, truncate or chown by a caller without
// CAP_FSETID: what the kernel's file_remove_privs would have done had we not
// negotiated FUSE_HANDLE_KILLPRIV_V2. The daemon runs as root, so writing the
// backing file does not clear them by itself.
func (w *labRaw) killSuidgid(c <-chan struct{}, h *fuse.InHeader, fh uint64, out *fuse.AttrOut) {
	var a fuse.AttrOut
	if w.RawFileSystem.GetAttr(c, &fuse.GetAttrIn{InHeader: *h}, &a) != fuse.OK {
		return
	}
	mode := a.Mode &^ syscall.S_IFMT
	kill := uint32(syscall.S_ISUID)
	if mode&syscall.S_IXGRP != 0 {
		kill |= syscall.S_ISGID
	}
	if mode&kill != 0 {
		in := &fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{InHeader: *h, Valid: fuse.FATTR_MODE, Mode: mode &^ kill}}
		w.RawFileSystem.SetAttr(c, in, out)
	}
	w.RawFileSystem.RemoveXAttr(c, h, "security.capability")
}

func (w *labRaw) Lseek(c <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	return w.serve(fuseproto.Lseek, func() (fuse.Status, int, int) { return w.RawFileSystem.Lseek(c, in, out), 0, 0 })
}

func (w *labRaw) GetLk(c <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	return w.serve(fuseproto.Getlk, func() (fuse.Status, int, int) { return w.RawFileSystem.GetLk(c, in, out), 0, 0 })
}

func (w *labRaw) SetLk(c <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return w.serve(fuseproto.Setlk, func() (fuse.Status, int, int) { return w.RawFileSystem.SetLk(c, in), 0, 0 })
}

func (w *labRaw) SetLkw(c <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return w.serve(fuseproto.Setlkw, func() (fuse.Status, int, int) { return w.RawFileSystem.SetLkw(c, in), 0, 0 })
}

func (w *labRaw) Release(c <-chan struct{}, in *fuse.ReleaseIn) {
	w.serve(fuseproto.Release, func() (fuse.Status, int, int) { w.RawFileSystem.Release(c, in); return fuse.OK, 0, 0 })
}

func (w *labRaw) CopyFileRange(c <-chan struct{}, in *fuse.CopyFileRangeIn) (n uint32, st fuse.Status) {
	w.serve(fuseproto.CopyFileRange, func() (fuse.Status, int, int) {
		n, st = w.RawFileSystem.CopyFileRange(c, in)
		return st, 0, 0
	})
	return n, st
}

func (w *labRaw) Flush(c <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	return w.serve(fuseproto.Flush, func() (fuse.Status, int, int) { return w.RawFileSystem.Flush(c, in), 0, 0 })
}

func (w *labRaw) Fsync(c <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return w.serve(fuseproto.Fsync, func() (fuse.Status, int, int) { return w.RawFileSystem.Fsync(c, in), 0, 0 })
}

func (w *labRaw) Fallocate(c <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	return w.serve(fuseproto.Fallocate, func() (fuse.Status, int, int) { return w.RawFileSystem.Fallocate(c, in), 0, 0 })
}

func (w *labRaw) OpenDir(c <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return w.serve(fuseproto.Opendir, func() (fuse.Status, int, int) { return w.RawFileSystem.OpenDir(c, in, out), 0, 0 })
}

func (w *labRaw) ReadDir(c <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return w.serve(fuseproto.Readdir, func() (fuse.Status, int, int) { return w.RawFileSystem.ReadDir(c, in, out), 0, 0 })
}

func (w *labRaw) ReadDirPlus(c <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return w.serve(fuseproto.Readdirplus, func() (fuse.Status, int, int) { return w.RawFileSystem.ReadDirPlus(c, in, out), 0, 0 })
}

func (w *labRaw) ReleaseDir(in *fuse.ReleaseIn) {
	w.serve(fuseproto.Releasedir, func() (fuse.Status, int, int) { w.RawFileSystem.ReleaseDir(in); return fuse.OK, 0, 0 })
}

func (w *labRaw) FsyncDir(c <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return w.serve(fuseproto.Fsyncdir, func() (fuse.Status, int, int) { return w.RawFileSystem.FsyncDir(c, in), 0, 0 })
}

func (w *labRaw) StatFs(c <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	return w.serve(fuseproto.Statfs, func() (fuse.Status, int, int) { return w.RawFileSystem.StatFs(c, h, out), 0, 0 })
}

func (w *labRaw) Statx(c <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	return w.serve(fuseproto.Statx, func() (fuse.Status, int, int) { return w.RawFileSystem.Statx(c, in, out), 0, 0 })
}
