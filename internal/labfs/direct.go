package labfs

import (
	"context"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Direct I/O. A file the caller opened with O_DIRECT is opened so in SRC
// too, and the caller's direct reads and writes go to the backing file
// system as the kernel sent them: aligned where the caller's were, refused
// where a native file system refuses them (ext4: EINVAL for an unaligned
// offset or length). Everything else the kernel sends through that open
// file goes through a second descriptor without O_DIRECT: the page cache's
// write-back (with --writeback-cache, or a shared mapping), which chooses
// any open file of the inode and writes its last page only up to the end
// of the file, an unaligned length that an O_DIRECT descriptor refused
// (the data was lost, close said nothing); and the reads and writes of a
// caller that turned O_DIRECT off with fcntl.

// directIO holds the READs and WRITEs in flight that are a caller's direct
// I/O, by their cancel channel, which go-fuse hands to the file handle as
// its context's Done: the handle sees no more of the request.
var directIO sync.Map

// markDirect marks the request whose cancel channel is c as direct I/O
// until the returned function is called.
func markDirect(c <-chan struct{}) func() {
	if c == nil {
		return noop
	}
	directIO.Store(c, struct{}{})
	return func() { directIO.Delete(c) }
}

// isDirectIO says whether the request of ctx is a caller's direct I/O.
func isDirectIO(ctx context.Context) bool {
	c := ctx.Done()
	if c == nil {
		return false
	}
	_, ok := directIO.Load(c)
	return ok
}

// readDirect reads as the kernel asked, not cut at the end of the file as
// other reads are (a 4 KiB read of a 1,000-byte file then asked ext4 for
// 1,000 bytes and failed with EINVAL, where natively it returns 1,000),
// into a page-aligned buffer; the reply carries what pread returned, its
// exact size.
func (h *openHandle) readDirect(buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if !pageAligned(buf) {
		buf = alignedBuffer(len(buf))
	}
	n, err := unix.Pread(h.fd, buf, off)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return fuse.ReadResultData(buf[:n]), 0
}

func (h *openHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if !h.direct || isDirectIO(ctx) {
		return h.LoopbackFile.Write(ctx, data, off)
	}
	return h.Writev(ctx, [][]byte{data}, off)
}

func (h *openHandle) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	if !h.direct || isDirectIO(ctx) {
		return h.LoopbackFile.Writev(ctx, data, off)
	}
	fd, errno := h.bufferedFD()
	if errno != 0 {
		return 0, errno
	}
	n, err := unix.Pwritev(fd, data, off)
	return uint32(max(n, 0)), fs.ToErrno(err)
}

// bufferedFD returns the handle's descriptor without O_DIRECT, opened at
// its first use: the same file reopened through /proc/self/fd, which
// reaches it even once it has no name.
func (h *openHandle) bufferedFD() (int, syscall.Errno) {
	h.bufMu.Lock()
	defer h.bufMu.Unlock()
	if h.buffered > 0 {
		return h.buffered - 1, 0
	}
	flags := int(h.flags) &^ (unix.O_DIRECT | unix.O_CREAT | unix.O_EXCL | unix.O_TRUNC | unix.O_TMPFILE | unix.O_NOFOLLOW)
	fd, err := unix.Open(procFD(h.fd), flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fs.ToErrno(err)
	}
	h.buffered = fd + 1
	return fd, 0
}

func (h *openHandle) closeBuffered() {
	h.bufMu.Lock()
	defer h.bufMu.Unlock()
	if h.buffered > 0 {
		unix.Close(h.buffered - 1)
		h.buffered = 0
	}
}

// pageAligned says whether buf starts on a page boundary, as direct I/O
// needs (go-fuse's read buffers do: they are whole pages).
func pageAligned(buf []byte) bool {
	return len(buf) == 0 || uintptr(unsafe.Pointer(&buf[0]))%uintptr(os.Getpagesize()) == 0
}

// alignedBuffer returns n bytes that start on a page boundary.
func alignedBuffer(n int) []byte {
	page := os.Getpagesize()
	b := make([]byte, n+page)
	skip := (page - int(uintptr(unsafe.Pointer(&b[0]))%uintptr(page))) % page
	return b[skip : skip+n]
}
