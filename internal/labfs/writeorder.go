package labfs

import (
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// writeOrder makes a READ wait for the WRITEs of the same bytes that the
// kernel sent before it and the daemon has not yet applied.
//
// Without write-back caching the kernel copies a write into the page cache
// and unlocks the page before it sends the WRITE (fuse_fill_write_pages),
// so while the WRITE is in flight nothing stops the page from being
// dropped: by auto_inval_data when a GETATTR shows an earlier write's
// mtime, by an open without FOPEN_KEEP_CACHE (close-to-open), or by
// reclaim. A read of that page then sends a READ, queued after the WRITE;
// a daemon that serves requests concurrently may read the backend before
// it applies the WRITE and fill the page cache with the bytes the write
// replaced, which every reader then sees until the page is written again.
// Requests' unique ids grow in the order the kernel queues them, so a
// READ waits only for earlier WRITEs: a later one may itself be waiting
// for the page the READ keeps locked.
type writeOrder struct {
	noHooks
	mu      sync.Mutex
	applied *sync.Cond
	pending map[uint64][]pendingWrite // by node
	waiters int
}

type pendingWrite struct {
	unique     uint64
	start, end uint64 // bytes [start, end) of the file
}

// newWriteOrder returns nil where the kernel keeps the page locked or
// tracked until the WRITE is answered (write-back caching) or keeps no
// pages (direct_io): there is nothing to order.
func newWriteOrder(w *labRaw) feature {
	if w.cfg.DirectIO || w.cfg.WritebackCache {
		return nil
	}
	return newWriteOrdering()
}

func newWriteOrdering() *writeOrder {
	o := &writeOrder{pending: map[uint64][]pendingWrite{}}
	o.applied = sync.NewCond(&o.mu)
	return o
}

// observe holds a READ for the earlier WRITEs of its bytes, and follows
// WRITEs from their receipt to their answer (which, under write-behind, is
// when the queue has them).
func (o *writeOrder) observe(e event) fuse.Status {
	switch e.kind {
	case readReceived:
		o.wait(e.node, e.unique, e.off, e.size)
	case writeReceived:
		o.begin(e.node, e.unique, e.off, e.size) // done at writeAnswered
	case writeAnswered:
		o.done(e.node, pendingWrite{unique: e.unique, start: e.off, end: e.off + uint64(e.size)})
	}
	return fuse.OK
}

// begin notes a WRITE received; call done once the backend has its bytes.
func (o *writeOrder) begin(node, unique, off uint64, size int) (done func()) {
	w := pendingWrite{unique: unique, start: off, end: off + uint64(size)}
	o.mu.Lock()
	o.pending[node] = append(o.pending[node], w)
	o.mu.Unlock()
	return func() { o.done(node, w) }
}

func (o *writeOrder) done(node uint64, w pendingWrite) {
	o.mu.Lock()
	ws := o.pending[node]
	for i := range ws {
		if ws[i] == w {
			ws[i] = ws[len(ws)-1]
			ws = ws[:len(ws)-1]
			break
		}
	}
	if len(ws) == 0 {
		delete(o.pending, node)
	} else {
		o.pending[node] = ws
	}
	if o.waiters > 0 {
		o.applied.Broadcast()
	}
	o.mu.Unlock()
}

// wait returns once no WRITE of node sent before the READ unique and
// overlapping [off, off+size) is still to be applied.
func (o *writeOrder) wait(node, unique, off uint64, size int) {
	end := off + uint64(size)
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.blocked(node, unique, off, end) {
		o.waiters++
		o.applied.Wait()
		o.waiters--
	}
}

func (o *writeOrder) blocked(node, unique, start, end uint64) bool {
	for _, w := range o.pending[node] {
		if w.unique < unique && w.start < end && start < w.end {
			return true
		}
	}
	return false
}
