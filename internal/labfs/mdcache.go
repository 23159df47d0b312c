package labfs

import (
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// mdCache is a user-space attribute cache (gluster's md-cache): GETATTR is
// answered from memory for TTL after the backend last answered it.
//
// An answer is cached only if nothing dropped the node between the moment
// its backend call began and the put: a GETATTR that read the backend just
// before a WRITE, and put its answer just after the WRITE dropped the
// entry, would otherwise serve the size before the write for a whole TTL.
// So every drop moves a generation on, a put carries the generation seen
// before its backend call, and a dropped node keeps the generation of its
// drop until the kernel forgets it.
type mdCache struct {
	ttl time.Duration
	mu  sync.Mutex
	gen uint64 // moved on by every drop and clear
	// cleared is the generation of the last clear: no answer fetched
	// before it is put.
	cleared uint64
	m       map[uint64]mdEntry
	// writers counts the open passthrough files of a node that may be
	// written: their writes go to the backing file without a request, so
	// nothing would drop what the cache holds; such a node is not cached.
	writers map[uint64]int
}

type mdEntry struct {
	out     fuse.AttrOut
	until   time.Time
	dropped uint64 // > 0: no answer, dropped at this generation
}

func newMDCache(ttl time.Duration) *mdCache {
	if ttl <= 0 {
		return nil
	}
	return &mdCache{ttl: ttl, m: map[uint64]mdEntry{}, writers: map[uint64]int{}}
}

// begin is the generation to give put for an answer the backend is about
// to give.
func (c *mdCache) begin() uint64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

func (c *mdCache) get(node uint64, out *fuse.AttrOut) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	e, ok := c.m[node]
	c.mu.Unlock()
	if !ok || e.dropped > 0 || time.Now().After(e.until) {
		return false
	}
	*out = e.out
	return true
}

// put caches the backend's answer, fetched from generation since on,
// unless the node was dropped since or a passthrough writer has it open.
func (c *mdCache) put(node uint64, out *fuse.AttrOut, since uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if since < c.cleared || c.writers[node] > 0 || c.m[node].dropped > since {
		return
	}
	c.m[node] = mdEntry{out: *out, until: time.Now().Add(c.ttl)}
}

func (c *mdCache) drop(node uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.gen++
	c.m[node] = mdEntry{dropped: c.gen}
	c.mu.Unlock()
}

// forget is the kernel's FORGET: the node id may be given to another.
func (c *mdCache) forget(node uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	delete(c.m, node)
	c.mu.Unlock()
}

// clear forgets everything: after a change to the namespace, link counts
// and directory times of other nodes have changed too.
func (c *mdCache) clear() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.gen++
	c.cleared = c.gen
	clear(c.m)
	c.mu.Unlock()
}

// opened and closed count a node's passthrough files open for writing: the
// cache holds nothing for the node while one is open, and drops what it
// has at either end.
func (c *mdCache) opened(node uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.writers[node]++
	c.mu.Unlock()
	c.drop(node)
}

func (c *mdCache) closed(node uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.writers[node]--; c.writers[node] <= 0 {
		delete(c.writers, node)
	}
	c.mu.Unlock()
	c.drop(node)
}
