package labfs

import (
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

type seekable interface {
	Seekable() (fd uintptr, off int64, sz int)
}

// go-fuse splices a READ reply from the backing file only when the result
// has a Seekable method; the timing wrapper must keep it, and must not
// claim it for results that have none.
func TestTimeReadKeepsSplice(t *testing.T) {
	done := 0
	res := timeRead(fuse.ReadResultFd(7, 4096, 131072), func() { done++ })
	s, ok := res.(seekable)
	if !ok {
		t.Fatal("a timed file-backed READ lost its Seekable method: go-fuse would copy instead of splicing")
	}
	if fd, off, sz := s.Seekable(); fd != 7 || off != 4096 || sz != 131072 {
		t.Errorf("Seekable() = %d, %d, %d; want 7, 4096, 131072", fd, off, sz)
	}
	if res.Size() != 131072 {
		t.Errorf("Size() = %d", res.Size())
	}
	res.Done()
	if done != 1 {
		t.Errorf("done ran %d times, want 1", done)
	}

	data := timeRead(fuse.ReadResultData([]byte("abc")), func() { done++ })
	if _, ok := data.(seekable); ok {
		t.Error("a timed in-memory READ claims to be seekable")
	}
	if b, st := data.Bytes(nil); st != fuse.OK || string(b) != "abc" {
		t.Errorf("Bytes() = %q, %v", b, st)
	}
	data.Done()
	if done != 2 {
		t.Errorf("done ran %d times, want 2", done)
	}
}
