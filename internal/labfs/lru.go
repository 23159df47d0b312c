package labfs

import (
	"container/list"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// inodeLRU remembers which inodes the kernel holds references to and, past
// max, asks the kernel to drop the least recently used ones
// (FUSE_NOTIFY_PRUNE, or FUSE_NOTIFY_INVAL_ENTRY on older kernels); the
// kernel then FORGETs them and the daemon frees them, like gluster's inode
// garbage collection. A prune of an inode that is busy at that moment does
// nothing, so victims are asked again after a pause, by the next lookup or
// the periodic check.
type inodeLRU struct {
	noHooks
	max    int
	c      *counters
	notify func(victims []lruNode)
	mu     sync.Mutex
	order  *list.List               // front: most recent
	nodes  map[uint64]*list.Element // of *lruNode
	// server is the mount's, to notify; set once it is up.
	server   atomic.Pointer[fuse.Server]
	stop     chan struct{} // closed when serving stops
	stopOnce sync.Once
}

type lruNode struct {
	id, parent uint64
	name       string
	lookups    uint64
	notified   time.Time
}

// retryAfter is how long a notified inode is left alone before it is asked
// again.
const retryAfter = 50 * time.Millisecond

// newInodeLRU returns nil without a limit: the inode count then comes from
// go-fuse's own inode tree when asked for (countInodes), and lookups pay
// nothing for it. Tracking every inode here cost each LOOKUP ~1 us, which
// made the default mode's lookups slower than go-fuse's loopback.
func newInodeLRU(w *labRaw) feature {
	if w.cfg.MaxInodes <= 0 {
		return nil
	}
	l := &inodeLRU{max: w.cfg.MaxInodes, c: &counters{}, order: list.New(), nodes: map[uint64]*list.Element{}, stop: make(chan struct{})}
	l.notify = l.prune
	return l
}

func (l *inodeLRU) observe(e event) fuse.Status {
	switch e.kind {
	case referenced:
		l.looked(e.parent, e.name, e.node)
	case listed:
		names, ids, _ := e.list.lookedUp()
		l.lookedAll(e.node, names, ids)
	case used:
		l.touch(e.node)
	case forgotten:
		l.forgot(e.node, e.n)
	case mounted:
		l.server.Store(e.server)
		go l.enforceEvery(4 * retryAfter)
	case stopped:
		l.stopOnce.Do(func() { close(l.stop) })
	}
	return fuse.OK
}

func (l *inodeLRU) count(m map[string]uint64) { m["inode_evictions"] = l.c.evictions.Load() }

// enforceEvery evicts what exceeds the limit every period, until serving
// stops: a prune of a busy inode did nothing, and nothing else may come to
// ask again.
func (l *inodeLRU) enforceEvery(period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			l.enforce()
		case <-l.stop:
			return
		}
	}
}

// prune asks the kernel to drop victims. FUSE_NOTIFY_PRUNE (Linux 6.16+)
// drops the inodes' unused dentries and the inodes, so their FORGETs
// follow. Invalidating a name alone only unhashes the dentry, which may
// linger until memory pressure.
func (l *inodeLRU) prune(victims []lruNode) {
	server := l.server.Load()
	if server == nil {
		return // not mounted yet: the periodic check asks again
	}
	ids := make([]uint64, len(victims))
	for i, v := range victims {
		ids[i] = v.id
	}
	if server.PruneNotify(ids) == fuse.ENOSYS {
		for _, v := range victims {
			server.EntryNotify(v.parent, v.name)
		}
	}
}

// looked records a reply that handed the kernel a reference to id.
func (l *inodeLRU) looked(parent uint64, name string, id uint64) {
	if l == nil || id == 0 {
		return
	}
	l.mu.Lock()
	l.recordLocked(parent, name, id)
	victims := l.victimsLocked(id)
	l.mu.Unlock()
	l.evict(victims)
}

// lookedAll records the references of one READDIRPLUS reply, and evicts
// once for all of them.
func (l *inodeLRU) lookedAll(parent uint64, names []string, ids []uint64) {
	if l == nil || len(ids) == 0 {
		return
	}
	l.mu.Lock()
	for i, id := range ids {
		l.recordLocked(parent, names[i], id)
	}
	victims := l.victimsLocked(0)
	l.mu.Unlock()
	l.evict(victims)
}

func (l *inodeLRU) recordLocked(parent uint64, name string, id uint64) {
	if e, ok := l.nodes[id]; ok {
		n := e.Value.(*lruNode)
		n.lookups++
		n.parent, n.name = parent, name
		l.order.MoveToFront(e)
		return
	}
	l.nodes[id] = l.order.PushFront(&lruNode{id: id, parent: parent, name: name, lookups: 1})
}

// enforce evicts whatever exceeds the limit now (the periodic check).
func (l *inodeLRU) enforce() {
	if l == nil {
		return
	}
	l.mu.Lock()
	victims := l.victimsLocked(0)
	l.mu.Unlock()
	l.evict(victims)
}

func (l *inodeLRU) victimsLocked(keep uint64) []lruNode {
	if len(l.nodes) <= l.max {
		return nil
	}
	excess := len(l.nodes) - l.max
	now := time.Now()
	var victims []lruNode
	for e := l.order.Back(); e != nil && excess > 0; e = e.Prev() {
		n := e.Value.(*lruNode)
		if n.id == keep || n.id == 1 {
			continue
		}
		excess--
		if now.Sub(n.notified) < retryAfter {
			continue // asked recently: its FORGET is on its way
		}
		n.notified = now
		victims = append(victims, *n)
	}
	return victims
}

func (l *inodeLRU) evict(victims []lruNode) {
	if len(victims) == 0 || l.notify == nil {
		return
	}
	l.c.evictions.Add(uint64(len(victims)))
	// Not from this request's goroutine: the kernel may hold the parent
	// directory's lock while it waits for our reply.
	go l.notify(victims)
}

// touch marks id as used.
func (l *inodeLRU) touch(id uint64) {
	if l == nil {
		return
	}
	l.mu.Lock()
	if e, ok := l.nodes[id]; ok {
		l.order.MoveToFront(e)
	}
	l.mu.Unlock()
}

// forgot records a FORGET of n references.
func (l *inodeLRU) forgot(id, n uint64) {
	if l == nil {
		return
	}
	l.mu.Lock()
	if e, ok := l.nodes[id]; ok {
		node := e.Value.(*lruNode)
		if node.lookups <= n {
			l.order.Remove(e)
			delete(l.nodes, id)
		} else {
			node.lookups -= n
		}
	}
	l.mu.Unlock()
}
