package labfs

import (
	"bytes"
	"maps"
	"slices"
	"sync"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/hanwen/go-fuse/v2/fuse"
)

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

func newWriteQueues(depth int, c *counters) *writeBehind {
	return &writeBehind{depth: depth, c: c, nodes: map[uint64]*wbQueue{}}
}

func newWriteBehind(w *labRaw) feature {
	if w.cfg.WriteBehind <= 0 {
		return nil
	}
	return &writeBehindFeature{writeBehind: newWriteQueues(w.cfg.WriteBehind, &counters{})}
}

// writeBehindFeature is --write-behind as a feature: it answers WRITE and
// queues it for the backend; requests that must see acknowledged writes
// drain the node's queue first.
type writeBehindFeature struct {
	*writeBehind
}

func (f *writeBehindFeature) wraps(op fuseproto.Opcode) bool { return op == fuseproto.Write }

// around acknowledges a WRITE: the request is copied (go-fuse reuses its
// buffers) and queued; the queue writes it in order, a direct write from a
// page-aligned copy.
func (f *writeBehindFeature) around(r *request) fuse.Status {
	size := 0
	for _, d := range r.data {
		size += len(d)
	}
	queued, in := *r, *r.write
	queued.write, queued.data = &in, [][]byte{bytes.Join(r.data, nil)}
	queued.c = nil
	if r.direct {
		aligned := alignedBuffer(size)
		copy(aligned, queued.data[0])
		queued.data[0] = aligned
		queued.c = make(chan struct{}) // names the request as direct I/O
	}
	f.submit(r.node, queued.next)
	r.written = uint32(size)
	return fuse.OK
}

func (f *writeBehindFeature) observe(e event) fuse.Status {
	switch e.kind {
	case drain:
		return f.drain(e.node, e.report)
	case forgotten:
		f.forget(e.node)
	case unmounting:
		f.drainAll()
	case stopped:
		f.stopAll()
	}
	return fuse.OK
}

func (f *writeBehindFeature) count(m map[string]uint64) {
	c := f.c
	m["write_behind_queued"], m["write_behind_drains"] = c.wbQueued.Load(), c.wbDrains.Load()
	m["write_behind_errors"], m["write_behind_max_depth"] = c.wbErrors.Load(), c.wbMaxDepth.Load()
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
