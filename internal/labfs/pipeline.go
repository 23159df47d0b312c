package labfs

import (
	"maps"
	"slices"
	"sync"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/hanwen/go-fuse/v2/fuse"
)

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

func newPipeline(w *labRaw) feature {
	if w.cfg.ReadPipeline <= 0 {
		return nil
	}
	chunk := w.cfg.ReadChunk
	if chunk == 0 {
		chunk = DefaultReadChunk
	}
	return &pipelineFeature{pipeline: newReadAhead(w.cfg.ReadPipeline, chunk, &counters{}, w.fetchChunk)}
}

// pipelineFeature is --read-pipeline as a feature: it answers READs from
// the chunks fetched ahead, and drops them when the file changes.
type pipelineFeature struct {
	*pipeline
}

func (f *pipelineFeature) wraps(op fuseproto.Opcode) bool { return op == fuseproto.Read }

func (f *pipelineFeature) around(r *request) fuse.Status {
	if data, ok := f.read(r.node, r.fh, int64(r.read.Offset), int(r.read.Size)); ok {
		r.reply = data
		return fuse.OK
	}
	return r.next()
}

func (f *pipelineFeature) observe(e event) fuse.Status {
	switch e.kind {
	case dataChanging:
		f.begin(e.node)
	case dataChanged:
		f.end(e.node)
	case releasing:
		f.forget(e.fh)
	case stopped:
		f.forgetAll()
	}
	return fuse.OK
}

func (f *pipelineFeature) count(m map[string]uint64) {
	c := f.c
	m["read_pipeline_hits"], m["read_pipeline_misses"] = c.pipeHits.Load(), c.pipeMisses.Load()
	m["read_pipeline_fetched_bytes"], m["read_pipeline_wasted_bytes"] = c.pipeFetched.Load(), c.pipeWasted.Load()
}

// fetchChunk reads one pipelined chunk from the backend, paying the emulated
// READ delay and bandwidth as a READ request would.
func (w *labRaw) fetchChunk(node, fh uint64, off int64, size int) ([]byte, bool) {
	if d := w.cfg.Latency.For(fuseproto.Read); d > 0 {
		w.sleep.sleep(d)
	}
	buf := make([]byte, size)
	res, st := w.RawFileSystem.Read(nil, &fuse.ReadIn{InHeader: fuse.InHeader{NodeId: node}, Fh: fh, Offset: uint64(off), Size: uint32(size)}, buf)
	if st != fuse.OK || res == nil {
		return nil, false
	}
	data, st := res.Bytes(buf)
	res.Done()
	if st != fuse.OK {
		return nil, false
	}
	w.link.wait(len(data))
	return data, true
}

func newReadAhead(depth, chunk int, c *counters, fetch func(node, fh uint64, off int64, size int) ([]byte, bool)) *pipeline {
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
