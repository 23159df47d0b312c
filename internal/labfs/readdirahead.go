package labfs

import (
	"sync"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// readdirAhead emulates gluster's readdir-ahead: at OPENDIR the daemon
// starts fetching the whole listing from the backend in the background, as
// one large request, and answers every READDIR(PLUS) of that handle from
// what it fetched, with no round trip of its own. A READDIR that arrives
// before the fetch is done waits for it (a miss). The listing itself comes
// from the source directory, as without readdir-ahead; what the feature
// changes is when, and how many times, the backend's latency is paid.
type readdirAhead struct {
	w     *labRaw
	c     *counters
	mu    sync.Mutex
	fetch map[uint64]chan struct{} // by directory handle: closed when fetched
}

func newReaddirAhead(w *labRaw) feature {
	if !w.cfg.ReaddirAhead {
		return nil
	}
	return &readdirAhead{w: w, c: &counters{}, fetch: map[uint64]chan struct{}{}}
}

func (r *readdirAhead) wraps(op fuseproto.Opcode) bool {
	return op == fuseproto.Opendir || op == fuseproto.Readdir || op == fuseproto.Readdirplus
}

// around starts the prefetch when a directory is opened, and answers its
// listings from it.
func (r *readdirAhead) around(req *request) fuse.Status {
	if req.op == fuseproto.Opendir {
		st := req.next()
		if st == fuse.OK {
			r.start(req.open.Fh, backend{r.w, r.w.cfg.listingOp()}.wait)
		}
		return st
	}
	if r.wait(req.fh) {
		req.local = true
	}
	return req.next()
}

func (r *readdirAhead) observe(e event) fuse.Status {
	if e.kind == dirReleased {
		r.release(e.fh)
	}
	return fuse.OK
}

func (r *readdirAhead) count(m map[string]uint64) {
	m["readdir_ahead_fetches"], m["readdir_ahead_hits"] = r.c.rdaFetches.Load(), r.c.rdaHits.Load()
	m["readdir_ahead_misses"] = r.c.rdaMisses.Load()
}

// start begins the background fetch for handle fh; remote pays the
// backend's latency for one listing request.
func (r *readdirAhead) start(fh uint64, remote func()) {
	done := make(chan struct{})
	r.mu.Lock()
	r.fetch[fh] = done
	r.mu.Unlock()
	r.c.rdaFetches.Add(1)
	go func() {
		remote()
		close(done)
	}()
}

// wait reports whether fh's listing is served from the prefetch, waiting
// for the fetch if it is still under way.
func (r *readdirAhead) wait(fh uint64) bool {
	r.mu.Lock()
	done, ok := r.fetch[fh]
	r.mu.Unlock()
	if !ok {
		return false
	}
	select {
	case <-done:
		r.c.rdaHits.Add(1)
	default:
		r.c.rdaMisses.Add(1)
		<-done
	}
	return true
}

func (r *readdirAhead) release(fh uint64) {
	r.mu.Lock()
	delete(r.fetch, fh)
	r.mu.Unlock()
}

// listingOp is the request whose emulated latency a prefetch pays: the
// kind of READDIR the kernel will send.
func (c *Config) listingOp() fuseproto.Opcode {
	if c.Readdirplus == "off" {
		return fuseproto.Readdir
	}
	return fuseproto.Readdirplus
}
