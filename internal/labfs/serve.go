package labfs

import (
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// serve runs one request: wait for a slot, run it, and record the time from
// receipt to reply. The handler calls remote.wait() when it goes to the
// backend, which costs the emulated network delay; answers from the
// daemon's own caches do not.
func (w *labRaw) serve(op fuseproto.Opcode, do func(remote backend) (fuse.Status, int, int)) fuse.Status {
	return w.serveFrom(monotonic(), op, do)
}

// serveFrom is serve for a request received at start. A handler that
// returns in < 0 records the request itself, later.
func (w *labRaw) serveFrom(start time.Duration, op fuseproto.Opcode, do func(remote backend) (fuse.Status, int, int)) fuse.Status {
	if w.slots != nil {
		w.slots <- struct{}{}
		defer func() { <-w.slots }()
	}
	st, in, out := do(backend{w, op})
	if in < 0 {
		return st
	}
	errno := ""
	if st != fuse.OK {
		// A failed request carries no data, whatever size its handler
		// returned (go-fuse's loopback passes on the syscall's -1).
		in, out = 0, 0
		errno = kernel.ErrnoName(int64(st))
	}
	w.stats.record(op, monotonic()-start, errno, in, out)
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
