package labfs

import "github.com/hanwen/go-fuse/v2/fuse"

// timedRead records a READ when go-fuse has sent its reply: go-fuse reads
// the backing file (or splices it) only while it writes the reply, after the
// handler has returned, so the handler's own time would leave the read out.
// done gets the bytes the reply carried.
type timedRead struct {
	fuse.ReadResult
	done func(n int)
	n    int // the reply's data bytes
}

// Bytes is how go-fuse gets the data when it does not splice.
func (r *timedRead) Bytes(buf []byte) ([]byte, fuse.Status) {
	data, st := r.ReadResult.Bytes(buf)
	r.n = len(data)
	return data, st
}

func (r *timedRead) Done() {
	r.ReadResult.Done()
	r.done(r.n)
}

// timedSeekableRead keeps a file-backed result recognisable to go-fuse,
// which splices only results with a Seekable method into /dev/fuse: hiding
// it behind timedRead made every READ a pread plus a copy, and a 128 KiB
// READ took twice as long as go-fuse's loopback.
type timedSeekableRead struct {
	timedRead
	seekable interface {
		Seekable() (fd uintptr, off int64, sz int)
	}
}

func (r *timedSeekableRead) Seekable() (fd uintptr, off int64, sz int) { return r.seekable.Seekable() }

// timeRead wraps res so that done runs when go-fuse has sent the reply,
// keeping whatever lets go-fuse splice it. n is the reply's data bytes as
// the handler sized it (Bytes, when go-fuse copies, counts them again).
func timeRead(res fuse.ReadResult, n int, done func(n int)) fuse.ReadResult {
	t := timedRead{ReadResult: res, done: done, n: n}
	if s, ok := res.(interface {
		Seekable() (fd uintptr, off int64, sz int)
	}); ok {
		return &timedSeekableRead{timedRead: t, seekable: s}
	}
	return &t
}
