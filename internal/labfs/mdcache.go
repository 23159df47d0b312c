package labfs

import (
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
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

func newAttrCache(ttl time.Duration) *mdCache {
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

// mdCacheFeature is --md-cache as a feature: it answers GETATTR, caches
// what LOOKUP, GETATTR and READDIRPLUS fetch, and drops what a change makes
// stale.
type mdCacheFeature struct {
	*mdCache
	passthrough  bool
	hits, misses atomic.Uint64
}

func newMDCache(w *labRaw) feature {
	if w.cfg.MDCacheTTL <= 0 {
		return nil
	}
	return &mdCacheFeature{mdCache: newAttrCache(w.cfg.MDCacheTTL), passthrough: w.cfg.Passthrough}
}

func (f *mdCacheFeature) wraps(op fuseproto.Opcode) bool {
	return op == fuseproto.Lookup || op == fuseproto.Getattr || op == fuseproto.Readdirplus
}

func (f *mdCacheFeature) around(r *request) fuse.Status {
	if r.op == fuseproto.Getattr {
		if f.get(r.node, r.attr) {
			f.hits.Add(1)
			return fuse.OK
		}
		f.misses.Add(1)
	}
	since := f.begin()
	st := r.next()
	if st != fuse.OK {
		return st
	}
	switch r.op {
	case fuseproto.Getattr:
		f.put(r.node, r.attr, since)
	case fuseproto.Lookup:
		out := r.entry
		f.put(out.NodeId, &fuse.AttrOut{AttrValid: out.AttrValid, AttrValidNsec: out.AttrValidNsec, Attr: out.Attr}, since)
	case fuseproto.Readdirplus:
		if r.list != nil {
			_, ids, outs := r.list.lookedUp()
			for i, out := range outs {
				f.put(ids[i], &fuse.AttrOut{AttrValid: out.AttrValid, AttrValidNsec: out.AttrValidNsec, Attr: out.Attr}, since)
			}
		}
	}
	return st
}

func (f *mdCacheFeature) observe(e event) fuse.Status {
	switch e.kind {
	case forgotten:
		f.forget(e.node)
	case dataChanged, attrsChanged:
		f.drop(e.node)
	case namespaceChanged:
		f.clear()
	case opened:
		// A passthrough file open for writing: its writes go to the
		// backing file without a request to the daemon, so the cache
		// must not hold its attributes while it is open.
		if f.passthrough && e.flags&syscall.O_ACCMODE != syscall.O_RDONLY {
			f.opened(e.node)
		}
	case released:
		if f.passthrough && e.flags&syscall.O_ACCMODE != syscall.O_RDONLY {
			f.closed(e.node)
		}
	}
	return fuse.OK
}

func (f *mdCacheFeature) count(m map[string]uint64) {
	m["md_cache_hits"], m["md_cache_misses"] = f.hits.Load(), f.misses.Load()
}
