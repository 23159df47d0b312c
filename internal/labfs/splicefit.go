package labfs

import (
	"math/bits"
	"os"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// fileRead is a READ's reply of n bytes at off of the backing file fd: for
// go-fuse to splice into /dev/fuse where its pipe holds the reply, copied
// (pread) where it would not. go-fuse v2.12.1 sizes the pipe for the
// reply's bytes plus a page, but a pipe holds buffers, one per page the
// data spans: an unaligned read that rounds to the pipe's pages needs one
// more, the splice stops a page short, and go-fuse takes that for the end
// of the file and replies short (a direct_io pread of 0xfed8f bytes at
// 0x5688d9 returned 0xfe727; third_party/go-fuse/PATCHES.md).
func fileRead(fd uintptr, off int64, n int) fuse.ReadResult {
	res := fuse.ReadResultFd(fd, off, n)
	if spliceFits(off, n, os.Getpagesize()) {
		return res
	}
	return copiedRead{res}
}

// copiedRead hides the result's Seekable method, which go-fuse splices.
type copiedRead struct{ fuse.ReadResult }

// fuseOutHeader is the size of the header before a READ's data.
const fuseOutHeader = 16

// spliceFits says whether go-fuse's pipe surely holds the reply to a READ
// of n bytes at off: its header and each page of the file the data spans
// take a pipe buffer of their own. The pipe has at least what go-fuse asks
// for, header and data plus a page, which the kernel rounds up to a power
// of two pages (and at least the default 16); a pipe go-fuse cannot grow
// that far makes it copy by itself.
func spliceFits(off int64, n, page int) bool {
	need := 1 + (int(off%int64(page))+n+page-1)/page
	asked := (fuseOutHeader + n + page + page - 1) / page
	have := max(16, 1<<bits.Len(uint(asked-1)))
	return need <= have
}
