package ktrace

import (
	"errors"
	"fmt"
	"sort"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/fusescope/fusescope/internal/bpf"
	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/option"
	"github.com/fusescope/fusescope/internal/profile"
)

// pageCachePrograms are --page-cache's programs (pagecache.bpf.h): a feature.
type pageCachePrograms struct {
	filemapPrograms
	// The readahead tracepoints' (Linux 6.18 on): nil before.
	ra *readaheadPrograms
	// The counters at the previous interval, by connection.
	prev map[uint32]profile.PageCache
}

type filemapPrograms struct {
	GetPages *ebpf.Program `ebpf:"pc_get_pages"`
	Add      *ebpf.Program `ebpf:"pc_add"`
	Delete   *ebpf.Program `ebpf:"pc_delete"`
}

type readaheadPrograms struct {
	SyncRA  *ebpf.Program `ebpf:"pc_sync_ra"`
	AsyncRA *ebpf.Program `ebpf:"pc_async_ra"`
}

// tracepointHook is a program and the classic tracepoint it runs on.
type tracepointHook struct {
	group, event string
	prog         *ebpf.Program
}

func (p *pageCachePrograms) hooks() []tracepointHook {
	hooks := []tracepointHook{
		{"filemap", "mm_filemap_add_to_page_cache", p.Add},
		{"filemap", "mm_filemap_delete_from_page_cache", p.Delete},
	}
	if p.ra != nil {
		hooks = append(hooks, tracepointHook{"readahead", "page_cache_sync_ra", p.ra.SyncRA},
			tracepointHook{"readahead", "page_cache_async_ra", p.ra.AsyncRA})
	}
	return hooks
}

func (p *pageCachePrograms) configure(plan *loadPlan) (bool, error) {
	if !plan.opts.PageCache {
		plan.unused("page_cache", "pc_reads")
		if !plan.opts.Calls {
			plan.unused("pc_conns")
		}
		return false, nil
	}
	// The pages each read asks the cache for, which the hit ratio is of.
	if !hasEvent(plan.tracefs, "filemap", "mm_filemap_get_pages") {
		return false, option.Errorf("kernel %s has no filemap:mm_filemap_get_pages tracepoint, which {page-cache} counts the pages each read asks the cache for from: leave out {page-cache} and the rest of the trace works", kernel.Release())
	}
	return true, nil
}

// load loads the filemap programs, and the readahead ones where the kernel
// has those tracepoints (Linux 6.18 on).
func (p *pageCachePrograms) load(t *Tracer, spec *ebpf.CollectionSpec) error {
	opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		"pc_conns": t.maps.PcConns, "page_cache": t.maps.PageCache, "pc_reads": t.maps.PcReads,
	}}
	if err := spec.LoadAndAssign(&p.filemapPrograms, opts); err != nil {
		return kernelLacks(err, "{page-cache}")
	}
	if tracefs, err := EnsureTracefs(); err == nil && hasEvent(tracefs, "readahead", "page_cache_sync_ra") {
		var ra readaheadPrograms
		if err := spec.LoadAndAssign(&ra, opts); err != nil {
			p.filemapPrograms.close()
			return kernelLacks(err, "{page-cache}'s read-ahead counts")
		}
		p.ra = &ra
	}
	return nil
}

func (p *pageCachePrograms) attach() ([]link.Link, error) {
	// tp_btf: the read's mapping gives its file's size (pagecache.bpf.h).
	links, err := attachTracing("to filemap:mm_filemap_get_pages (--page-cache)", p.GetPages)
	if err != nil {
		return nil, err
	}
	for _, h := range p.hooks() {
		l, err := link.Tracepoint(h.group, h.event, h.prog, nil)
		if err != nil {
			closeLinks(links)
			return nil, option.Errorf("attaching to %s:%s ({page-cache}): %w", h.group, h.event, err)
		}
		links = append(links, l)
	}
	return links, nil
}

func (p *pageCachePrograms) programs() map[string]*ebpf.Program {
	out := map[string]*ebpf.Program{"page-cache:mm_filemap_get_pages": p.GetPages}
	for _, h := range p.hooks() {
		out["page-cache:"+h.event] = h.prog
	}
	return out
}

func (p *filemapPrograms) close() error {
	var errs []error
	for _, prog := range []*ebpf.Program{p.GetPages, p.Add, p.Delete} {
		if prog != nil {
			errs = append(errs, prog.Close())
		}
	}
	return errors.Join(errs...)
}

func (p *pageCachePrograms) close() error {
	errs := []error{p.filemapPrograms.close()}
	if p.ra != nil {
		errs = append(errs, p.ra.SyncRA.Close(), p.ra.AsyncRA.Close())
	}
	return errors.Join(errs...)
}

// SetCountedConns says whose pages --page-cache counts and whose files
// --calls counts calls on: the traced connections, or every FUSE
// connection when all are traced (user space tells FUSE's anonymous
// devices from other file systems').
func (t *Tracer) SetCountedConns(conns []uint32) error {
	if t.pageCache == nil && t.calls == nil {
		return nil
	}
	words := map[uint32]uint64{}
	for _, c := range conns {
		if c < connBitmapWords*64 {
			words[c/64] |= 1 << (c % 64)
		}
	}
	for w, bits := range words {
		if err := t.maps.PcConns.Put(w, bits); err != nil {
			return fmt.Errorf("choosing the page caches to count: %w", err)
		}
	}
	return nil
}

// read lists the counted page caches, labelled with their mounts: one
// for every traced connection and every connection the run has requests
// of, so that a mount whose reads never ask the cache (direct_io) shows,
// with nothing read from it; an interval's, as what changed since the
// previous interval.
func (p *pageCachePrograms) read(t *Tracer, rd *recordRead) error {
	pages, err := t.pageCounters()
	if err != nil {
		return err
	}
	have := map[uint32]bool{}
	for _, pc := range pages {
		have[pc.Conn] = true
	}
	want := append([]uint32(nil), rd.conns...)
	for _, op := range rd.whole.Profile.Ops {
		want = append(want, op.Conn)
	}
	for _, c := range want {
		if !have[c] {
			have[c] = true
			pages = append(pages, profile.PageCache{Conn: c})
		}
	}
	for i := range pages {
		pages[i].Mount = rd.labels.MountPoint(pages[i].Conn)
	}
	sort.Slice(pages, func(i, j int) bool { return pages[i].Conn < pages[j].Conn })
	rd.whole.PageCache = pages
	if rd.interval != nil {
		cur := map[uint32]profile.PageCache{}
		for _, pc := range pages {
			cur[pc.Conn] = pc
			rd.interval.PageCache = append(rd.interval.PageCache, pc.Sub(p.prev[pc.Conn]))
		}
		p.prev = cur
	}
	return nil
}

// pageCounters are the page-cache counters of each counted connection.
func (t *Tracer) pageCounters() ([]profile.PageCache, error) {
	out := []profile.PageCache{} // counted, if empty
	var conn uint32
	var perCPU []bpf.FuseReqPageCacheStats
	it := t.maps.PageCache.Iterate()
	for it.Next(&conn, &perCPU) {
		pc := profile.PageCache{Conn: conn, NoReadahead: t.pageCache.ra == nil}
		for _, c := range perCPU {
			pc.Reads += c.Reads
			pc.ReadPages += c.ReadPages
			pc.Added += c.Added
			pc.Removed += c.Removed
			pc.ReadaheadSync += c.RaSync
			pc.ReadaheadAsync += c.RaAsync
			pc.ReadaheadPages += c.RaPages
		}
		out = append(out, pc)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading the page-cache counters: %w", err)
	}
	return out, nil
}
