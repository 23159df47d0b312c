package labfs

import (
	"math/bits"
	"testing"
)

// spliceFits against a count of the pipe's buffers made page by page: the
// header's, then one for each page of the file from off to off+n.
func TestSpliceFits(t *testing.T) {
	const page = 4096
	buffers := func(off int64, n int) int {
		b := 1
		for p := off / page; p*page < off+int64(n); p++ {
			b++
		}
		return b
	}
	pipePages := func(n int) int { // F_SETPIPE_SZ of go-fuse's request, rounded as the kernel does
		pages := (fuseOutHeader + n + page + page - 1) / page
		return max(16, 1<<bits.Len(uint(pages-1)))
	}
	for _, c := range []struct {
		off  int64
		n    int
		want bool
	}{
		{0x5688d9, 0xfed8f, false}, // the short pread PATCHES.md reports
		{0, 1 << 20, true},         // aligned: as many pages as asked for
		{0, 1<<20 - page, true},
		{100, 255*page - fuseOutHeader, false}, // 256 pages plus the header in a pipe of 256
		{100, 254 * page, true},
		{100, 128 << 10, true},
		{4095, 2, true},
		{0, 1, true},
	} {
		if got := spliceFits(c.off, c.n, page); got != c.want {
			t.Errorf("spliceFits(%#x, %#x) = %v, want %v", c.off, c.n, got, c.want)
		}
	}
	for n := 1; n <= 1<<20; n += 509 {
		for _, off := range []int64{0, 1, 2048, page - 1, 0x5688d9} {
			if got, want := spliceFits(off, n, page), buffers(off, n) <= pipePages(n); got != want {
				t.Fatalf("spliceFits(%#x, %#x) = %v; %d buffers in a pipe of %d pages", off, n, got, buffers(off, n), pipePages(n))
			}
		}
	}
}
