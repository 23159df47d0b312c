package labfs

import (
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// serve runs one request: wait for a slot, run it, and record it: its time
// from receipt to reply, and its bytes as the kernel counts them (the
// request's in.h.len, the reply's out.h.len: headers included). The
// handler calls remote.wait() when it goes to the backend, which costs the
// emulated network delay; answers from the daemon's own caches do not. It
// returns the reply's status and the bytes the reply carries after the
// opcode's fixed structure (replyStruct) when it succeeds: data (READ,
// READDIR, READLINK...); or -1 when it records the request itself, later.
func (w *labRaw) serve(h *fuse.InHeader, op fuseproto.Opcode, do func(remote backend) (fuse.Status, int)) fuse.Status {
	return w.serveFrom(monotonic(), h, op, do)
}

// serveFrom is serve for a request received at start. The request is
// recorded under the opcode the kernel sent (RENAME2 as such), its delay
// is op's.
func (w *labRaw) serveFrom(start time.Duration, h *fuse.InHeader, op fuseproto.Opcode, do func(remote backend) (fuse.Status, int)) fuse.Status {
	if w.slots != nil {
		w.slots <- struct{}{}
		defer func() { <-w.slots }()
	}
	sent := op
	if h.Opcode != 0 {
		sent = fuseproto.Opcode(h.Opcode)
	}
	length := h.Length // go-fuse may reuse the request's buffer once it has replied
	st, data := do(backend{w, op})
	if data < 0 {
		return st
	}
	errno, reply := "", outHeaderSize+replyStruct(sent)+data
	if st != fuse.OK {
		// A failed request's reply is its header alone, whatever size
		// its handler returned (go-fuse's loopback passes on the
		// syscall's -1).
		errno, reply = kernel.ErrnoName(int64(st)), outHeaderSize
	}
	w.stats.record(sent, monotonic()-start, errno, length, reply)
	return st
}

// backend is a request's way to the emulated remote backend. It is a value,
// not a closure, so that serving a request allocates nothing for it.
type backend struct {
	w  *labRaw
	op fuseproto.Opcode
}

// wait pays the operation's emulated network delay.
func (b backend) wait() {
	if d := b.w.cfg.Latency.For(b.op); d > 0 {
		b.w.sleep.sleep(d)
	}
}

// epoch anchors monotonic.
var epoch = time.Now()

// monotonic reads the monotonic clock alone: time.Now reads the wall clock
// too, a second clock read per timestamp that the request timer does not
// need.
func monotonic() time.Duration { return time.Since(epoch) }
