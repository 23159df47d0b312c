package labfs

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// confinedNode is go-fuse's loopback node with every path resolved inside
// the source directory. go-fuse's loopback names files by their full path,
// which the kernel walks following symlinks: a directory of the source
// replaced by a symlink while the mount knows it (a process inside it, a
// cached dentry) would make the daemon (root, usually) list, create,
// delete, chmod or truncate files wherever the symlink points. Here a
// directory is reached through a descriptor opened from the source's with
// RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS, and everything in it through
// *at calls that never follow its last component.
//
// A directory node keeps its descriptor (up to maxDirFDs of them) until the
// kernel forgets it, so an operation costs the same single system call as
// go-fuse's path-based one, with a shorter walk.
type confinedNode struct {
	fs.LoopbackNode
	src    int          // O_PATH descriptor of the source directory, shared by all nodes
	held   *heldFDs     // what the mount's nodes keep open, shared by all nodes
	cached atomic.Int64 // 1 + this directory's O_PATH descriptor; 0: none

	// orphan is 1 + an O_PATH descriptor of this file or directory, kept
	// from when its last name the mount knew went (unlink, rmdir, a rename
	// over it) until the kernel forgets it; 0: none. The kernel may still
	// ask about it: write-back caching sends the times it kept in a
	// SETATTR at syncfs, after the file was closed and removed (which
	// failed with ENOENT, and `sync -f` with it); a shell inside a removed
	// directory stats it. A native file system answers; so does this one,
	// on the very inode, which another name (one the mount never looked
	// up) may still reach.
	orphan atomic.Int64

	// The descriptors of this file's open handles: a file with no name
	// left (unlinked while open, or made with O_TMPFILE) is reached
	// through one of them, as a native file system reaches it through
	// the open file (fchmod, fsetxattr, futimens, linkat of a tmpfile).
	openMu sync.Mutex
	opens  []int

	size atomic.Pointer[fileSize] // the file's size when a read last asked

	// shrinks counts the requests of this mount that may have shortened a
	// file (truncate, O_TRUNC, fallocate), shared by all its nodes: a size
	// a node learnt before the last of them no longer says how much a
	// read can carry. Per mount: one mount's truncates say nothing of
	// another's files.
	shrinks *atomic.Uint64
}

// fileSize is a file's size, and shrinks when it was read.
type fileSize struct {
	shrinks uint64
	size    int64
}

// readable is how many of want bytes at off a read of the node's file,
// open as fd, carries: all of them where the file was at least that long
// when last asked and nothing since may have shortened it, else what fstat
// says is left. The READ's reply then has its exact size, which the
// daemon's byte counts use, without an fstat per READ (which cost go-fuse's
// loopback nothing, and the lab file system 4% of its 4 KiB random reads).
// A file shortened in SRC by others is not seen: the splice then carries
// less, go-fuse replies with what it read, and the counts say more.
func (n *confinedNode) readable(fd int, off int64, want int) int {
	epoch := n.shrinks.Load()
	if k := n.size.Load(); k != nil && k.shrinks == epoch && off+int64(want) <= k.size {
		return want
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return want
	}
	n.size.Store(&fileSize{epoch, st.Size})
	return int(max(0, min(int64(want), st.Size-off)))
}

// maxDirFDs bounds the directory descriptors kept open (this machine's
// open-file limit is 20,000, and the files users open count too).
const maxDirFDs = 4096

var dirFDs atomic.Int64 // directory descriptors kept open, all mounts

// heldFDs is what a mount's nodes keep open until the kernel says it is done
// with them: open files until RELEASE, directories until FORGET. The kernel
// drops the RELEASEs and FORGETs still pending when the mount goes away, so
// the rest is closed when serving stops; a daemon embedded in a longer
// process (the tests, a library user) would otherwise keep SRC busy.
type heldFDs struct {
	mu      sync.Mutex
	handles map[*openHandle]struct{}
	nodes   map[*confinedNode]struct{} // with a directory's or an orphan's descriptor
}

func newHeldFDs() *heldFDs {
	return &heldFDs{handles: map[*openHandle]struct{}{}, nodes: map[*confinedNode]struct{}{}}
}

// closeAll closes what the kernel never released; no request may be served
// any more.
func (h *heldFDs) closeAll() {
	h.mu.Lock()
	handles, nodes := h.handles, h.nodes
	h.handles, h.nodes = map[*openHandle]struct{}{}, map[*confinedNode]struct{}{}
	h.mu.Unlock()
	for fh := range handles {
		fh.close()
	}
	for n := range nodes {
		n.closeKept()
	}
}

var (
	_ fs.NodeLookuper       = (*confinedNode)(nil)
	_ fs.NodeGetattrer      = (*confinedNode)(nil)
	_ fs.NodeStatxer        = (*confinedNode)(nil)
	_ fs.NodeSetattrer      = (*confinedNode)(nil)
	_ fs.NodeReadlinker     = (*confinedNode)(nil)
	_ fs.NodeOpener         = (*confinedNode)(nil)
	_ fs.NodeOpendirHandler = (*confinedNode)(nil)
	_ fs.NodeReaddirer      = (*confinedNode)(nil)
	_ fs.NodeMknoder        = (*confinedNode)(nil)
	_ fs.NodeMkdirer        = (*confinedNode)(nil)
	_ fs.NodeSymlinker      = (*confinedNode)(nil)
	_ fs.NodeCreater        = (*confinedNode)(nil)
	_ fs.NodeTmpfiler       = (*confinedNode)(nil)
	_ fs.NodeLinker         = (*confinedNode)(nil)
	_ fs.NodeUnlinker       = (*confinedNode)(nil)
	_ fs.NodeRmdirer        = (*confinedNode)(nil)
	_ fs.NodeRenamer        = (*confinedNode)(nil)
	_ fs.NodeGetxattrer     = (*confinedNode)(nil)
	_ fs.NodeSetxattrer     = (*confinedNode)(nil)
	_ fs.NodeRemovexattrer  = (*confinedNode)(nil)
	_ fs.NodeListxattrer    = (*confinedNode)(nil)
	_ fs.NodeStatfser       = (*confinedNode)(nil)
	_ fs.NodeOnForgetter    = (*confinedNode)(nil)
)

// newConfinedRoot returns the root node of a loopback of src.
func newConfinedRoot(src string) (*confinedNode, error) {
	fd, err := unix.Open(src, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	root := &fs.LoopbackRoot{Path: src, Dev: st.Dev}
	n := &confinedNode{LoopbackNode: fs.LoopbackNode{RootData: root}, src: fd, held: newHeldFDs(), shrinks: new(atomic.Uint64)}
	root.RootNode = n
	return n, nil
}

func (n *confinedNode) child() *confinedNode {
	return &confinedNode{LoopbackNode: fs.LoopbackNode{RootData: n.RootData}, src: n.src, held: n.held, shrinks: n.shrinks}
}

// OnForget closes the directory's descriptor: no request can use it any more.
func (n *confinedNode) OnForget() {
	n.held.mu.Lock()
	delete(n.held.nodes, n)
	n.held.mu.Unlock()
	n.closeKept()
}

// closeKept closes the descriptors n keeps: its own as a directory, and
// the one it keeps as an orphan.
func (n *confinedNode) closeKept() {
	if v := n.cached.Swap(0); v > 0 {
		unix.Close(int(v - 1))
		dirFDs.Add(-1)
	}
	if v := n.orphan.Swap(0); v > 0 {
		unix.Close(int(v - 1))
	}
}

// keepIfRemoved prepares for the removal of name from the directory dir of
// n: if the mount knows the child by that name, it opens the child with
// O_PATH, and the returned function, told whether the removal happened,
// keeps the descriptor as the child's orphan or closes it.
func (n *confinedNode) keepIfRemoved(dir int, name string) func(removed bool) {
	ch := n.GetChild(name)
	if ch == nil {
		return func(bool) {}
	}
	c, ok := ch.Operations().(*confinedNode)
	kind := ch.StableAttr().Mode & unix.S_IFMT
	// Not a symlink: a /proc path of its descriptor, which calls without
	// an AT_EMPTY_PATH form use, could lead on to its target.
	if !ok || kind == unix.S_IFLNK || c.orphan.Load() > 0 {
		return func(bool) {}
	}
	fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return func(bool) {}
	}
	// The name may have been replaced in SRC since the kernel looked it
	// up; then it is not the child's.
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != kind {
		unix.Close(fd)
		return func(bool) {}
	}
	return func(removed bool) {
		if !removed || !c.orphan.CompareAndSwap(0, int64(fd)+1) {
			unix.Close(fd)
			return
		}
		c.held.mu.Lock()
		c.held.nodes[c] = struct{}{}
		c.held.mu.Unlock()
	}
}

// open resolves rel beneath the source without following any symlink.
func (n *confinedNode) open(rel string, flags int, mode uint32) (int, error) {
	if rel == "" {
		rel = "."
	}
	for {
		fd, err := unix.Openat2(n.src, rel, &unix.OpenHow{
			Flags:   uint64(flags | unix.O_CLOEXEC),
			Mode:    uint64(mode),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != unix.EAGAIN && err != unix.EINTR { // EAGAIN: a rename raced the walk
			return fd, err
		}
	}
}

func noop() {}

// dir returns the descriptor of n, a directory, and what to call when done
// with it.
func (n *confinedNode) dir() (int, func(), error) {
	if n.IsRoot() {
		return n.src, noop, nil
	}
	if v := n.cached.Load(); v > 0 {
		return int(v - 1), noop, nil
	}
	if v := n.orphan.Load(); v > 0 { // removed: it has no path
		return int(v - 1), noop, nil
	}
	fd, err := n.open(n.Path(n.Root()), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, nil, err
	}
	if dirFDs.Add(1) <= maxDirFDs && n.cached.CompareAndSwap(0, int64(fd)+1) {
		n.held.mu.Lock()
		n.held.nodes[n] = struct{}{}
		n.held.mu.Unlock()
		return fd, noop, nil
	}
	dirFDs.Add(-1)
	return fd, func() { unix.Close(fd) }, nil
}

// inDir runs f on n, a directory, to create, find or remove its child
// name: one component, never "." or ".." (the kernel sends no others).
func (n *confinedNode) inDir(name string, f func(dir int) error) syscall.Errno {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return syscall.EINVAL
	}
	dir, done, err := n.dir()
	if err != nil {
		return fs.ToErrno(err)
	}
	defer done()
	return fs.ToErrno(f(dir))
}

// self runs f on the directory holding n and n's name in it; for the root,
// on the source's descriptor and "" (use AT_EMPTY_PATH).
func (n *confinedNode) self(f func(dir int, name string) error) syscall.Errno {
	if n.IsRoot() {
		return fs.ToErrno(f(n.src, ""))
	}
	name, parent := n.Parent()
	p, ok := parentNode(parent)
	if !ok {
		return n.viaOpen(func(fd int) error { return f(fd, "") })
	}
	return p.inDir(name, func(dir int) error { return f(dir, name) })
}

// viaOpen runs f, for n with no name the mount knows, on the descriptor of
// one of n's open handles, which stays open until f returns, or else on
// the O_PATH descriptor n keeps as an orphan; ENOENT if it has neither.
func (n *confinedNode) viaOpen(f func(fd int) error) syscall.Errno {
	n.openMu.Lock()
	defer n.openMu.Unlock()
	if len(n.opens) > 0 {
		return fs.ToErrno(f(n.opens[0]))
	}
	if v := n.orphan.Load(); v > 0 {
		return fs.ToErrno(f(int(v - 1))) // closed at FORGET: after every request about n
	}
	return syscall.ENOENT
}

// openHandle is a loopback file handle that its node knows while it is open.
type openHandle struct {
	*fs.LoopbackFile
	node *confinedNode
	fd   int

	// A file the caller opened with O_DIRECT keeps it for the caller's
	// direct I/O, and a second descriptor without it for the rest
	// (direct.go).
	direct   bool
	flags    uint32
	bufMu    sync.Mutex
	buffered int // 1 + the descriptor without O_DIRECT; 0: not opened yet
}

// handle makes the file handle of fd, a file of n's opened with flags for a
// request.
func (n *confinedNode) handle(fd int, flags uint32) fs.FileHandle {
	n.openMu.Lock()
	n.opens = append(n.opens, fd)
	n.openMu.Unlock()
	h := &openHandle{LoopbackFile: fs.NewLoopbackFile(fd).(*fs.LoopbackFile), node: n, fd: fd, direct: flags&syscall.O_DIRECT != 0, flags: flags}
	n.held.mu.Lock()
	n.held.handles[h] = struct{}{}
	n.held.mu.Unlock()
	return h
}

// Read answers with the part of the file that is there, for go-fuse to
// splice (fileRead): a result as long as the reply, never longer.
func (h *openHandle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	fd := h.fd
	if h.direct {
		if isDirectIO(ctx) {
			return h.readDirect(buf, off)
		}
		var errno syscall.Errno
		if fd, errno = h.bufferedFD(); errno != 0 {
			return nil, errno
		}
	}
	n := h.node.readable(fd, off, len(buf))
	if n == 0 {
		return fuse.ReadResultData(nil), 0
	}
	return fileRead(uintptr(fd), off, n), 0
}

func (h *openHandle) Release(ctx context.Context) syscall.Errno {
	n := h.node
	n.openMu.Lock()
	if i := slices.Index(n.opens, h.fd); i >= 0 {
		n.opens = slices.Delete(n.opens, i, i+1)
	}
	n.openMu.Unlock()
	n.held.mu.Lock()
	delete(n.held.handles, h)
	n.held.mu.Unlock()
	return h.close()
}

// close closes the handle's descriptors, once, whoever asks first.
func (h *openHandle) close() syscall.Errno {
	h.closeBuffered()
	return h.LoopbackFile.Release(context.Background())
}

// procFD names what fd refers to: opening it opens that very file, as
// linkat with AT_SYMLINK_FOLLOW and utimensat link or touch it.
func procFD(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

func parentNode(parent *fs.Inode) (*confinedNode, bool) {
	if parent == nil {
		return nil, false
	}
	p, ok := parent.Operations().(*confinedNode)
	return p, ok
}

// openSelf opens n itself, never following it if it is a symlink.
func (n *confinedNode) openSelf(flags int, mode uint32) (fd int, errno syscall.Errno) {
	errno = n.self(func(dir int, name string) (err error) {
		if name == "" { // the root, or a file with no name: open dir's file again
			fd, err = unix.Open(procFD(dir), flags|unix.O_CLOEXEC, mode)
			return err
		}
		fd, err = unix.Openat(dir, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
		return err
	})
	return fd, errno
}

// viaProc runs f on a /proc path naming n itself, for the calls that have
// no *at form that leaves a symlink unfollowed (chmod, truncate, xattrs):
// the magic link leads to the very inode opened with O_PATH. A directory
// uses the descriptor it keeps.
func (n *confinedNode) viaProc(f func(p string) error) syscall.Errno {
	var fd int
	if n.IsDir() {
		dir, done, err := n.dir()
		if err != nil {
			return fs.ToErrno(err)
		}
		defer done()
		fd = dir
	} else {
		var errno syscall.Errno
		if fd, errno = n.openSelf(unix.O_PATH, 0); errno != 0 {
			return errno
		}
		defer unix.Close(fd)
	}
	return fs.ToErrno(f(procFD(fd)))
}

// statAt is statx(dir, name) without following a symlink, with the birth
// time that go-fuse's loopback makes the generation number of.
func statAt(dir int, name string, st *syscall.Stat_t) (gen uint64, err error) {
	var x unix.Statx_t
	if err := unix.Statx(dir, name, unix.AT_SYMLINK_NOFOLLOW|emptyPath(name), unix.STATX_BASIC_STATS|unix.STATX_BTIME, &x); err != nil {
		return 0, err
	}
	*st = syscall.Stat_t{
		Dev: unix.Mkdev(x.Dev_major, x.Dev_minor), Ino: x.Ino, Nlink: uint64(x.Nlink), Mode: uint32(x.Mode),
		Uid: x.Uid, Gid: x.Gid, Rdev: unix.Mkdev(x.Rdev_major, x.Rdev_minor), Size: int64(x.Size),
		Blksize: int64(x.Blksize), Blocks: int64(x.Blocks),
		Atim: syscall.Timespec{Sec: x.Atime.Sec, Nsec: int64(x.Atime.Nsec)},
		Mtim: syscall.Timespec{Sec: x.Mtime.Sec, Nsec: int64(x.Mtime.Nsec)},
		Ctim: syscall.Timespec{Sec: x.Ctime.Sec, Nsec: int64(x.Ctime.Nsec)},
	}
	gen = 1
	if x.Mask&unix.STATX_BTIME != 0 && (x.Btime.Sec != 0 || x.Btime.Nsec != 0) {
		gen = uint64(x.Btime.Sec)*1e9 + uint64(x.Btime.Nsec)
	}
	return gen, nil
}

// stableAttr numbers inodes as go-fuse's loopback does: the backing inode
// number, with the device mixed in for files on other mounts in the source.
func (n *confinedNode) stableAttr(st *syscall.Stat_t, gen uint64) fs.StableAttr {
	swap := func(d uint64) uint64 { return d<<32 | d>>32 }
	return fs.StableAttr{Mode: st.Mode, Gen: gen, Ino: swap(st.Dev) ^ swap(n.RootData.Dev) ^ st.Ino}
}

// newEntry stats name in dir and returns its node.
func (n *confinedNode) newEntry(ctx context.Context, dir int, name string, out *fuse.EntryOut) (*fs.Inode, error) {
	var st syscall.Stat_t
	gen, err := statAt(dir, name, &st)
	if err != nil {
		return nil, err
	}
	out.Attr.FromStat(&st)
	return n.NewInode(ctx, n.child(), n.stableAttr(&st, gen)), nil
}

// owner gives name in dir (dir itself for "") the caller's ownership, as
// go-fuse's loopback does when it runs as root. In a set-group-ID parent
// directory the group stays the parent's, which the backing file system
// gave it, as a native directory does.
func owner(ctx context.Context, parent, dir int, name string) {
	c, ok := fuse.FromContext(ctx)
	if !ok || syscall.Geteuid() != 0 {
		return
	}
	gid := int(c.Gid)
	var st unix.Stat_t
	if unix.Fstat(parent, &st) == nil && st.Mode&unix.S_ISGID != 0 {
		gid = -1
	}
	unix.Fchownat(dir, name, int(c.Uid), gid, unix.AT_SYMLINK_NOFOLLOW|emptyPath(name))
}

func (n *confinedNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (ch *fs.Inode, errno syscall.Errno) {
	errno = n.inDir(name, func(dir int) (err error) {
		ch, err = n.newEntry(ctx, dir, name, out)
		return err
	})
	return ch, errno
}

func (n *confinedNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if fga, ok := f.(fs.FileGetattrer); ok && f != nil {
		return fga.Getattr(ctx, out)
	}
	return n.self(func(dir int, name string) error {
		var st syscall.Stat_t
		if _, err := statAt(dir, name, &st); err != nil {
			return err
		}
		out.FromStat(&st)
		return nil
	})
}

func (n *confinedNode) Statx(ctx context.Context, f fs.FileHandle, flags, mask uint32, out *fuse.StatxOut) syscall.Errno {
	if fsx, ok := f.(fs.FileStatxer); ok && f != nil {
		return fsx.Statx(ctx, flags, mask, out)
	}
	return n.self(func(dir int, name string) error {
		var x unix.Statx_t
		if err := unix.Statx(dir, name, int(flags)|unix.AT_SYMLINK_NOFOLLOW|emptyPath(name), int(mask), &x); err != nil {
			return err
		}
		out.FromStatx(&x)
		return nil
	})
}

// setsAttr are the attributes a SETATTR may set; one that sets none of
// them (at most FATTR_CTIME, with write-back caching) is a chown(f, -1, -1).
const setsAttr = fuse.FATTR_MODE | fuse.FATTR_UID | fuse.FATTR_GID | fuse.FATTR_SIZE |
	fuse.FATTR_ATIME | fuse.FATTR_MTIME | fuse.FATTR_ATIME_NOW | fuse.FATTR_MTIME_NOW

func (n *confinedNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if in.Valid&setsAttr == 0 {
		// chown(f, -1, -1) changes nothing but ctime, which a native file
		// system moves: so does the same chown of the backing file (the
		// kernel moved it in its cache with write-back caching only, and
		// until it read the attributes again).
		if errno := n.self(func(dir int, name string) error {
			return unix.Fchownat(dir, name, -1, -1, unix.AT_SYMLINK_NOFOLLOW|emptyPath(name))
		}); errno != 0 {
			return errno
		}
		return n.Getattr(ctx, f, out)
	}
	if fsa, ok := f.(fs.FileSetattrer); ok && f != nil {
		if errno := fsa.Setattr(ctx, in, out); errno != 0 {
			return errno
		}
		return n.Getattr(ctx, f, out)
	}
	if m, ok := in.GetMode(); ok {
		if errno := n.viaProc(func(p string) error { return unix.Chmod(p, m) }); errno != 0 {
			return errno
		}
	}
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	if uok || gok {
		u, g := -1, -1
		if uok {
			u = int(uid)
		}
		if gok {
			g = int(gid)
		}
		if errno := n.self(func(dir int, name string) error {
			return unix.Fchownat(dir, name, u, g, unix.AT_SYMLINK_NOFOLLOW|emptyPath(name))
		}); errno != 0 {
			return errno
		}
	}
	// Truncate before setting times, so an explicit mtime is not clobbered.
	if sz, ok := in.GetSize(); ok {
		if errno := n.viaProc(func(p string) error { return unix.Truncate(p, int64(sz)) }); errno != 0 {
			return errno
		}
	}
	mtime, mok := in.GetMTime()
	atime, aok := in.GetATime()
	if mok || aok {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		if aok {
			ts[0] = unix.NsecToTimespec(atime.UnixNano())
		}
		if mok {
			ts[1] = unix.NsecToTimespec(mtime.UnixNano())
		}
		if errno := n.self(func(dir int, name string) error {
			if name == "" { // the root or a file with no name: utimensat has no AT_EMPTY_PATH
				return unix.UtimesNanoAt(unix.AT_FDCWD, procFD(dir), ts, 0)
			}
			return unix.UtimesNanoAt(dir, name, ts, unix.AT_SYMLINK_NOFOLLOW)
		}); errno != 0 {
			return errno
		}
	}
	return n.Getattr(ctx, nil, out)
}

// emptyPath is the flag that makes an *at call act on dir itself, for the
// root, which self names "".
func emptyPath(name string) int {
	if name == "" {
		return unix.AT_EMPTY_PATH
	}
	return 0
}

func (n *confinedNode) Readlink(ctx context.Context) (target []byte, errno syscall.Errno) {
	errno = n.self(func(dir int, name string) error {
		for size := 256; ; size *= 2 {
			buf := make([]byte, size)
			k, err := unix.Readlinkat(dir, name, buf)
			if err != nil {
				return err
			}
			if k < size {
				target = buf[:k]
				return nil
			}
		}
	})
	return target, errno
}

func (n *confinedNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	flags &^= syscall.O_APPEND | fuse.FMODE_EXEC
	fd, errno := n.openSelf(int(flags), 0)
	if errno != 0 {
		return nil, 0, errno
	}
	return n.handle(fd, flags), 0, 0
}

func (n *confinedNode) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	ds, errno := n.Readdir(ctx)
	if errno != 0 {
		return nil, 0, errno
	}
	return ds, 0, 0
}

func (n *confinedNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	fd, errno := n.openSelf(unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if errno != 0 {
		return nil, errno
	}
	return fs.NewLoopbackDirStreamFd(fd)
}

// make creates name with mk, gives it the caller's ownership, and returns
// its node; one that cannot be stat'ed is removed again (unlinkat with
// removeFlags).
func (n *confinedNode) make(ctx context.Context, name string, out *fuse.EntryOut, mk func(dir int) error, removeFlags int) (ch *fs.Inode, errno syscall.Errno) {
	errno = n.inDir(name, func(dir int) (err error) {
		if err := mk(dir); err != nil {
			return err
		}
		owner(ctx, dir, dir, name)
		if ch, err = n.newEntry(ctx, dir, name, out); err != nil {
			unix.Unlinkat(dir, name, removeFlags)
		}
		return err
	})
	return ch, errno
}

func (n *confinedNode) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.make(ctx, name, out, func(dir int) error { return unix.Mknodat(dir, name, mode, int(rdev)) }, 0)
}

func (n *confinedNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.make(ctx, name, out, func(dir int) error { return unix.Mkdirat(dir, name, mode) }, unix.AT_REMOVEDIR)
}

func (n *confinedNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.make(ctx, name, out, func(dir int) error { return unix.Symlinkat(target, dir, name) }, 0)
}

func (n *confinedNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (ch *fs.Inode, fh fs.FileHandle, fuseFlags uint32, errno syscall.Errno) {
	flags &^= syscall.O_APPEND
	errno = n.inDir(name, func(dir int) error {
		fd, err := unix.Openat(dir, name, int(flags)|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
		if err != nil {
			return err
		}
		owner(ctx, dir, fd, "")
		if ch, err = n.newEntry(ctx, fd, "", out); err != nil {
			unix.Close(fd)
			return err
		}
		fh = ch.Operations().(*confinedNode).handle(fd, flags)
		return nil
	})
	return ch, fh, 0, errno
}

func (n *confinedNode) Tmpfile(ctx context.Context, flags, mode uint32, out *fuse.EntryOut) (ch *fs.Inode, fh fs.FileHandle, fuseFlags uint32, errno syscall.Errno) {
	dir, done, err := n.dir()
	if err != nil {
		return nil, nil, 0, fs.ToErrno(err)
	}
	defer done()
	fd, err := unix.Openat(dir, ".", int(flags&^syscall.O_APPEND)|unix.O_TMPFILE|unix.O_CLOEXEC, mode)
	if err != nil {
		return nil, nil, 0, fs.ToErrno(err)
	}
	owner(ctx, dir, fd, "")
	if ch, err = n.newEntry(ctx, fd, "", out); err != nil {
		unix.Close(fd)
		return nil, nil, 0, fs.ToErrno(err)
	}
	return ch, ch.Operations().(*confinedNode).handle(fd, flags), 0, 0
}

func (n *confinedNode) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (ch *fs.Inode, errno syscall.Errno) {
	t, ok := target.(*confinedNode)
	if !ok || t.src != n.src {
		return nil, syscall.EXDEV
	}
	errno = t.self(func(tdir int, tname string) error {
		if errno := n.inDir(name, func(dir int) (err error) {
			// A file with no name (made with O_TMPFILE) is linked
			// from its open file, as linkat(2) shows.
			if tname == "" {
				err = unix.Linkat(unix.AT_FDCWD, procFD(tdir), dir, name, unix.AT_SYMLINK_FOLLOW)
			} else {
				err = unix.Linkat(tdir, tname, dir, name, 0)
			}
			if err != nil {
				return err
			}
			if ch, err = n.newEntry(ctx, dir, name, out); err != nil {
				unix.Unlinkat(dir, name, 0)
			}
			return err
		}); errno != 0 {
			return errno
		}
		return nil
	})
	return ch, errno
}

func (n *confinedNode) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.inDir(name, func(dir int) error { return n.remove(dir, name, 0) })
}

func (n *confinedNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.inDir(name, func(dir int) error { return n.remove(dir, name, unix.AT_REMOVEDIR) })
}

// remove unlinks name from dir, keeping what the kernel may still ask
// about it.
func (n *confinedNode) remove(dir int, name string, flags int) error {
	keep := n.keepIfRemoved(dir, name)
	err := unix.Unlinkat(dir, name, flags)
	keep(err == nil)
	return err
}

func (n *confinedNode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	p, ok := newParent.(*confinedNode)
	if !ok || p.src != n.src {
		return syscall.EXDEV
	}
	return n.inDir(name, func(dir int) error {
		if errno := p.inDir(newName, func(newDir int) error {
			keep := func(bool) {}
			if flags&unix.RENAME_EXCHANGE == 0 { // a rename over newName removes it
				keep = p.keepIfRemoved(newDir, newName)
			}
			err := unix.Renameat2(dir, name, newDir, newName, uint(flags))
			keep(err == nil)
			return err
		}); errno != 0 {
			return errno
		}
		return nil
	})
}

func (n *confinedNode) Getxattr(ctx context.Context, attr string, dest []byte) (size uint32, errno syscall.Errno) {
	errno = n.xattr(func(dir int, name string) error {
		k, err := getxattrat(dir, name, attr, dest)
		size = uint32(k)
		return err
	}, func(p string) error {
		k, err := unix.Getxattr(p, attr, dest)
		size = uint32(k)
		return err
	})
	return size, errno
}

func (n *confinedNode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return n.xattr(func(dir int, name string) error { return setxattrat(dir, name, attr, data, int(flags)) },
		func(p string) error { return unix.Setxattr(p, attr, data, int(flags)) })
}

func (n *confinedNode) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return n.xattr(func(dir int, name string) error { return removexattrat(dir, name, attr) },
		func(p string) error { return unix.Removexattr(p, attr) })
}

func (n *confinedNode) Listxattr(ctx context.Context, dest []byte) (size uint32, errno syscall.Errno) {
	errno = n.xattr(func(dir int, name string) error {
		k, err := listxattrat(dir, name, dest)
		size = uint32(k)
		return err
	}, func(p string) error {
		k, err := unix.Listxattr(p, dest)
		size = uint32(k)
		return err
	})
	return size, errno
}

func (n *confinedNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	fd, errno := n.openSelf(unix.O_PATH, 0)
	if errno != 0 {
		return errno
	}
	defer unix.Close(fd)
	var s syscall.Statfs_t
	if err := syscall.Fstatfs(fd, &s); err != nil {
		return fs.ToErrno(err)
	}
	out.FromStatfsT(&s)
	return 0
}
