package trace

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/test/e2e"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// countingFS wraps go-fuse's raw file system and counts, in the daemon, every
// request it serves: an oracle that shares no code with the kernel tracer.
type countingFS struct {
	fuse.RawFileSystem
	getattrDelay atomic.Int64 // ns; changed while mounted by TestTraceIntervalExtremes

	mu     sync.Mutex
	counts map[fuseproto.Opcode]uint64
}

// delay waits d: short delays spin, because Go's timers wake about 1 ms
// late here, which would move a 2 ms delay into the next log2 bucket.
func delay(d time.Duration) {
	if d >= 50*time.Millisecond {
		time.Sleep(d)
		return
	}
	for start := time.Now(); time.Since(start) < d; {
	}
}

func (c *countingFS) count(op fuseproto.Opcode) {
	c.mu.Lock()
	c.counts[op]++
	c.mu.Unlock()
}

// snapshot returns a copy of the daemon's counts.
func (c *countingFS) snapshot() map[fuseproto.Opcode]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[fuseproto.Opcode]uint64, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

func (c *countingFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	c.count(fuseproto.Lookup)
	return c.RawFileSystem.Lookup(cancel, h, name, out)
}

func (c *countingFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	c.count(fuseproto.Getattr)
	if d := time.Duration(c.getattrDelay.Load()); d > 0 {
		delay(d)
	}
	return c.RawFileSystem.GetAttr(cancel, in, out)
}

func (c *countingFS) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	c.count(fuseproto.Statx)
	return c.RawFileSystem.Statx(cancel, in, out)
}

func (c *countingFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	c.count(fuseproto.Open)
	return c.RawFileSystem.Open(cancel, in, out)
}

func (c *countingFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	c.count(fuseproto.Read)
	return c.RawFileSystem.Read(cancel, in, buf)
}

func (c *countingFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	c.count(fuseproto.Flush)
	return c.RawFileSystem.Flush(cancel, in)
}

func (c *countingFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	c.count(fuseproto.Release)
	c.RawFileSystem.Release(cancel, in)
}

func (c *countingFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	c.count(fuseproto.Opendir)
	return c.RawFileSystem.OpenDir(cancel, in, out)
}

func (c *countingFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c.count(fuseproto.Readdir)
	return c.RawFileSystem.ReadDir(cancel, in, out)
}

func (c *countingFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c.count(fuseproto.Readdirplus)
	return c.RawFileSystem.ReadDirPlus(cancel, in, out)
}

func (c *countingFS) ReleaseDir(in *fuse.ReleaseIn) {
	c.count(fuseproto.Releasedir)
	c.RawFileSystem.ReleaseDir(in)
}

func (c *countingFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	c.count(fuseproto.Getxattr)
	return c.RawFileSystem.GetXAttr(cancel, h, attr, dest)
}

func (c *countingFS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	c.count(fuseproto.Access)
	return c.RawFileSystem.Access(cancel, in)
}

func (c *countingFS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	c.count(fuseproto.Statfs)
	return c.RawFileSystem.StatFs(cancel, h, out)
}

// directFile is an in-memory file opened with FOPEN_DIRECT_IO, so every
// read() becomes READ requests of at most the read size.
type directFile struct {
	fs.MemRegularFile
}

var _ fs.NodeOpener = (*directFile)(nil)

func (f *directFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, _, errno := f.MemRegularFile.Open(ctx, flags)
	return fh, fuse.FOPEN_DIRECT_IO, errno
}

// labTree is the test's file system: files/fNNN (small), and big.bin of
// bigPages pages opened with direct_io.
type labTree struct {
	fs.Inode
	nFiles   int
	bigPages int
}

var _ fs.NodeOnAdder = (*labTree)(nil)

func (r *labTree) OnAdd(ctx context.Context) {
	dir := r.NewPersistentInode(ctx, &fs.Inode{}, fs.StableAttr{Mode: syscall.S_IFDIR})
	r.AddChild("files", dir, false)
	for i := 0; i < r.nFiles; i++ {
		f := &fs.MemRegularFile{Data: []byte(fmt.Sprintf("file %d\n", i)), Attr: fuse.Attr{Mode: 0o644}}
		dir.AddChild(fmt.Sprintf("f%03d", i), r.NewPersistentInode(ctx, f, fs.StableAttr{}), false)
	}
	big := &directFile{fs.MemRegularFile{Data: make([]byte, r.bigPages*4096), Attr: fuse.Attr{Mode: 0o644}}}
	r.AddChild("big.bin", r.NewPersistentInode(ctx, big, fs.StableAttr{}), false)
}

// mountLab mounts the test file system with entry and attr timeouts of 0, so
// every path walk reaches the daemon, and unmounts it when the test ends.
func mountLab(t *testing.T, nFiles, bigPages int, getattrDelay time.Duration) (string, *countingFS) {
	t.Helper()
	mnt := t.TempDir()
	zero := time.Duration(0)
	raw := fs.NewNodeFS(&labTree{nFiles: nFiles, bigPages: bigPages}, &fs.Options{EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero})
	cfs := &countingFS{RawFileSystem: raw, counts: map[fuseproto.Opcode]uint64{}}
	cfs.getattrDelay.Store(int64(getattrDelay))
	srv, err := e2e.NewServer(cfs, mnt, &fuse.MountOptions{
		FsName: "fusescope-testfs", Name: "testfs", DirectMount: true, MaxReadAhead: 4096,
	})
	if err != nil {
		t.Fatalf("mounting the test file system: %v", err)
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e2e.Unmount(t, mnt, srv.Unmount) })
	return mnt, cfs
}
