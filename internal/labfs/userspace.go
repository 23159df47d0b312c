package labfs

import (
	"container/list"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Counters of the user-space features, shown by fs stats.
type counters struct {
	mdHits, mdMisses             atomic.Uint64
	pipeHits, pipeMisses         atomic.Uint64
	pipeFetched, pipeWasted      atomic.Uint64 // bytes
	wbQueued, wbDrains, wbErrors atomic.Uint64
	wbMaxDepth                   atomic.Uint64
	invalidations                atomic.Uint64
	evictions                    atomic.Uint64
	rdaFetches, rdaHits          atomic.Uint64
	rdaMisses                    atomic.Uint64
}

func (c *counters) snapshot(cfg *Config) map[string]uint64 {
	m := map[string]uint64{}
	if cfg.MDCacheTTL > 0 {
		m["md_cache_hits"], m["md_cache_misses"] = c.mdHits.Load(), c.mdMisses.Load()
	}
	if cfg.ReadPipeline > 0 {
		m["read_pipeline_hits"], m["read_pipeline_misses"] = c.pipeHits.Load(), c.pipeMisses.Load()
		m["read_pipeline_fetched_bytes"], m["read_pipeline_wasted_bytes"] = c.pipeFetched.Load(), c.pipeWasted.Load()
	}
	if cfg.WriteBehind > 0 {
		m["write_behind_queued"], m["write_behind_drains"] = c.wbQueued.Load(), c.wbDrains.Load()
		m["write_behind_errors"], m["write_behind_max_depth"] = c.wbErrors.Load(), c.wbMaxDepth.Load()
	}
	if cfg.ReaddirAhead {
		m["readdir_ahead_fetches"], m["readdir_ahead_hits"] = c.rdaFetches.Load(), c.rdaHits.Load()
		m["readdir_ahead_misses"] = c.rdaMisses.Load()
	}
	if cfg.Invalidation == "cto" {
		m["cto_invalidations"] = c.invalidations.Load()
	}
	if cfg.MaxInodes > 0 {
		m["inode_evictions"] = c.evictions.Load()
	}
	return m
}

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

// writeBehind acknowledges WRITEs at once and writes them to the backend in
// order, per inode, with at most depth acknowledged but unwritten. Flush,
// fsync and release wait for an inode's queue to drain and report the first
// error there, so no error is lost; reads and attribute requests of the
// inode wait too, so nobody sees data older than what was acknowledged.
//
// Each inode written has a queue and a goroutine that writes it out; both
// go when the kernel forgets the inode (forget) and when serving stops
// (stopAll).
type writeBehind struct {
	depth   int
	c       *counters
	mu      sync.Mutex
	nodes   map[uint64]*wbQueue
	running sync.WaitGroup // the queues' goroutines
}

type wbQueue struct {
	jobs chan func() fuse.Status
	// slots holds one token per write acknowledged and not yet written:
	// a write takes one before it is acknowledged, the writer gives it
	// back once the write is done.
	slots   chan struct{}
	mu      sync.Mutex
	pending int
	idle    *sync.Cond
	err     fuse.Status
	closed  bool // jobs is closed: a submit must take a new queue
}

func newWriteBehind(depth int, c *counters) *writeBehind {
	if depth <= 0 {
		return nil
	}
	return &writeBehind{depth: depth, c: c, nodes: map[uint64]*wbQueue{}}
}

func (wb *writeBehind) queue(node uint64) *wbQueue {
	wb.mu.Lock()
	defer wb.mu.Unlock()
	q := wb.nodes[node]
	if q == nil {
		q = &wbQueue{jobs: make(chan func() fuse.Status, wb.depth), slots: make(chan struct{}, wb.depth)}
		q.idle = sync.NewCond(&q.mu)
		wb.nodes[node] = q
		wb.running.Add(1)
		go func() {
			defer wb.running.Done()
			q.run(wb.c)
		}()
	}
	return q
}

func (q *wbQueue) run(c *counters) {
	for job := range q.jobs {
		st := job()
		<-q.slots
		q.mu.Lock()
		if st != fuse.OK {
			c.wbErrors.Add(1)
			if q.err == fuse.OK {
				q.err = st
			}
		}
		q.pending--
		if q.pending == 0 {
			q.idle.Broadcast()
		}
		q.mu.Unlock()
	}
}

// submit queues a write; it blocks while depth writes are acknowledged
// and not yet written.
func (wb *writeBehind) submit(node uint64, job func() fuse.Status) {
	q := wb.queue(node)
	q.mu.Lock()
	for q.closed { // forgotten since: the node has a new queue
		q.mu.Unlock()
		q = wb.queue(node)
		q.mu.Lock()
	}
	q.pending++ // drain waits for a write blocked here too
	q.mu.Unlock()
	q.slots <- struct{}{}
	depth := uint64(len(q.slots))
	for {
		old := wb.c.wbMaxDepth.Load()
		if depth <= old || wb.c.wbMaxDepth.CompareAndSwap(old, depth) {
			break
		}
	}
	wb.c.wbQueued.Add(1)
	q.jobs <- job
}

// drain waits until the inode's writes are done and returns, and clears, the
// first error among them if report is set.
func (wb *writeBehind) drain(node uint64, report bool) fuse.Status {
	if wb == nil {
		return fuse.OK
	}
	wb.mu.Lock()
	q := wb.nodes[node]
	wb.mu.Unlock()
	if q == nil {
		return fuse.OK
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pending > 0 {
		wb.c.wbDrains.Add(1)
	}
	for q.pending > 0 {
		q.idle.Wait()
	}
	if !report {
		return fuse.OK
	}
	err := q.err
	q.err = fuse.OK
	return err
}

// forget writes out a node's queue and stops its goroutine: the kernel has
// forgotten the node, and sends nothing more for it (a node id it reuses
// gets a new queue).
func (wb *writeBehind) forget(node uint64) {
	if wb == nil {
		return
	}
	wb.mu.Lock()
	q := wb.nodes[node]
	delete(wb.nodes, node)
	wb.mu.Unlock()
	if q != nil {
		q.stop()
	}
}

// stop closes the queue once it is empty.
func (q *wbQueue) stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.pending > 0 {
		q.idle.Wait()
	}
	if !q.closed {
		q.closed = true
		close(q.jobs)
	}
}

// stopAll writes out every queue and stops the goroutines, once serving
// has stopped.
func (wb *writeBehind) stopAll() {
	if wb == nil {
		return
	}
	wb.mu.Lock()
	queues := slices.Collect(maps.Values(wb.nodes))
	clear(wb.nodes)
	wb.mu.Unlock()
	for _, q := range queues {
		q.stop()
	}
	wb.running.Wait()
}

// drainAll waits for every queued write (unmount, SIGTERM).
func (wb *writeBehind) drainAll() {
	if wb == nil {
		return
	}
	wb.mu.Lock()
	nodes := slices.Collect(maps.Keys(wb.nodes))
	wb.mu.Unlock()
	for _, n := range nodes {
		wb.drain(n, false)
	}
}

// pipeline keeps up to depth reads of chunk bytes in flight ahead of each
// open file's last read (GFFS's 4 x 32 MB), so a sequential reader finds its
// data already fetched from the (slow) backend. As the kernel's read-ahead
// does, it reads ahead only for a sequential stream: a read that starts
// where the file handle's last one ended (at 0 for the first). A random
// reader would otherwise fetch depth chunks per read and use few of them.
//
// No reader is served data older than a change that completed before its
// read began: a change (write, truncate, fallocate, copy into the file)
// drops the node's chunks when it starts and again when it is done, and no
// fetch starts in between, so a chunk fetched before the change reached
// the backend cannot be put back after it.
type pipeline struct {
	depth, chunk int
	c            *counters
	fetch        func(node, fh uint64, off int64, size int) ([]byte, bool)
	mu           sync.Mutex
	files        map[uint64]*pipeFile       // by file handle
	fetching     map[uint64]*sync.WaitGroup // fetches in flight, by file handle
	changing     map[uint64]int             // changes in flight, by node
}

type pipeFile struct {
	node   uint64
	next   int64                // where the last read ended
	chunks map[int64]*pipeChunk // by chunk offset
}

type pipeChunk struct {
	done chan struct{}
	data []byte
	ok   bool // false: the fetch failed; readers go to the backend themselves
	used bool // a reader took it (under pipeline.mu)
}

func newPipeline(depth, chunk int, c *counters, fetch func(node, fh uint64, off int64, size int) ([]byte, bool)) *pipeline {
	if depth <= 0 {
		return nil
	}
	if chunk <= 0 {
		chunk = 1 << 20
	}
	return &pipeline{depth: depth, chunk: chunk, c: c, fetch: fetch, files: map[uint64]*pipeFile{},
		fetching: map[uint64]*sync.WaitGroup{}, changing: map[uint64]int{}}
}

// read serves [off, off+size) from fetched chunks if it can, and schedules
// the chunks ahead of a sequential reader; ok is false when the caller must
// read it itself.
func (p *pipeline) read(node, fh uint64, off int64, size int) (data []byte, ok bool) {
	start := off - off%int64(p.chunk)
	p.mu.Lock()
	f := p.files[fh]
	if f == nil {
		f = &pipeFile{node: node, chunks: map[int64]*pipeChunk{}}
		p.files[fh] = f
	}
	c := f.chunks[start]
	if c != nil {
		// Taken under the lock that drops chunks: the drop's count of
		// wasted bytes, which reads this after the chunk left the map,
		// sees it.
		c.used = true
	}
	sequential := off == f.next // 0 for a file's first read
	f.next = off + int64(size)
	if sequential && p.changing[node] == 0 {
		// Chunks behind the reader will not be read again by a
		// sequential reader.
		for o, old := range f.chunks {
			if o < start {
				delete(f.chunks, o)
				p.wasted(old)
			}
		}
		wg := p.fetching[fh]
		if wg == nil {
			wg = &sync.WaitGroup{}
			p.fetching[fh] = wg
		}
		for i := 1; i <= p.depth; i++ {
			o := start + int64(i*p.chunk)
			if _, ok := f.chunks[o]; !ok {
				nc := &pipeChunk{done: make(chan struct{})}
				f.chunks[o] = nc
				wg.Add(1)
				go func() {
					defer wg.Done()
					nc.data, nc.ok = p.fetch(node, fh, o, p.chunk)
					p.c.pipeFetched.Add(uint64(len(nc.data)))
					close(nc.done)
				}()
			}
		}
	}
	p.mu.Unlock()
	if c == nil {
		p.c.pipeMisses.Add(1)
		return nil, false
	}
	<-c.done
	if !c.ok {
		p.c.pipeMisses.Add(1)
		return nil, false
	}
	rel := int(off - start)
	if rel >= len(c.data) {
		p.c.pipeHits.Add(1)
		return []byte{}, true // end of file
	}
	end := min(len(c.data), rel+size)
	if end-rel < size && len(c.data) == p.chunk {
		// The read spans into the next chunk: let the caller read it whole.
		p.c.pipeMisses.Add(1)
		return nil, false
	}
	p.c.pipeHits.Add(1)
	return c.data[rel:end], true
}

// wasted counts a dropped chunk's bytes once its fetch is done, unless a
// reader took it.
func (p *pipeline) wasted(c *pipeChunk) {
	go func() {
		<-c.done
		p.mu.Lock()
		used := c.used
		p.mu.Unlock()
		if !used {
			p.c.pipeWasted.Add(uint64(len(c.data)))
		}
	}()
}

// dropLocked drops the fetched and fetching chunks of a node.
func (p *pipeline) dropLocked(node uint64) {
	for _, f := range p.files {
		if f.node != node {
			continue
		}
		for o, c := range f.chunks {
			delete(f.chunks, o)
			p.wasted(c)
		}
	}
}

// change runs do, a change to node's data in the backend, so that no chunk
// fetched before it completed is served after it.
func (p *pipeline) change(node uint64, do func() fuse.Status) fuse.Status {
	p.begin(node)
	defer p.end(node)
	return do()
}

// begin and end bracket a change to node's data: from the moment a client
// may see it (a write-behind write is acknowledged before the backend has
// it) to the moment the backend has it.
func (p *pipeline) begin(node uint64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.changing[node]++
	p.dropLocked(node)
	p.mu.Unlock()
}

func (p *pipeline) end(node uint64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.changing[node]--; p.changing[node] <= 0 {
		delete(p.changing, node)
	}
	p.dropLocked(node) // fetched while the change was under way
	p.mu.Unlock()
}

// forget drops an open file's chunks and waits for its fetches: the file
// handle must not be used once the kernel has released it.
func (p *pipeline) forget(fh uint64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if f := p.files[fh]; f != nil {
		for _, c := range f.chunks {
			p.wasted(c)
		}
	}
	delete(p.files, fh)
	wg := p.fetching[fh]
	delete(p.fetching, fh)
	p.mu.Unlock()
	if wg != nil {
		wg.Wait()
	}
}

// forgetAll waits for every fetch in flight, as forget does for one file.
func (p *pipeline) forgetAll() {
	if p == nil {
		return
	}
	p.mu.Lock()
	fhs := slices.Collect(maps.Keys(p.fetching))
	p.mu.Unlock()
	for _, fh := range fhs {
		p.forget(fh)
	}
}

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
