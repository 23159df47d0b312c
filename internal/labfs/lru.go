package labfs

import (
	"container/list"
	"sync"
	"time"
)

// inodeLRU remembers which inodes the kernel holds references to and, past
// max, asks the kernel to drop the least recently used ones
// (FUSE_NOTIFY_PRUNE, or FUSE_NOTIFY_INVAL_ENTRY on older kernels); the
// kernel then FORGETs them and the daemon frees them, like gluster's inode
// garbage collection. A prune of an inode that is busy at that moment does
// nothing, so victims are asked again after a pause, by the next lookup or
// the periodic check.
type inodeLRU struct {
	max    int
	c      *counters
	notify func(victims []lruNode)
	mu     sync.Mutex
	order  *list.List               // front: most recent
	nodes  map[uint64]*list.Element // of *lruNode
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
func newInodeLRU(max int, c *counters) *inodeLRU {
	if max <= 0 {
		return nil
	}
	return &inodeLRU{max: max, c: c, order: list.New(), nodes: map[uint64]*list.Element{}}
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
