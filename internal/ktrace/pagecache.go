package ktrace

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/fusescope/fusescope/internal/bpf"
	"github.com/fusescope/fusescope/internal/profile"
)

// pageCachePrograms are --page-cache's programs (pagecache.bpf.h).
type pageCachePrograms struct {
	filemapPrograms
	// The readahead tracepoints' (Linux 6.18 on): nil before.
	ra *readaheadPrograms
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

func (p *pageCachePrograms) hooks() []struct {
	group, event string
	prog         *ebpf.Program
} {
	hooks := []struct {
		group, event string
		prog         *ebpf.Program
	}{
		{"filemap", "mm_filemap_add_to_page_cache", p.Add},
		{"filemap", "mm_filemap_delete_from_page_cache", p.Delete},
	}
	if p.ra != nil {
		hooks = append(hooks, struct {
			group, event string
			prog         *ebpf.Program
		}{"readahead", "page_cache_sync_ra", p.ra.SyncRA}, struct {
			group, event string
			prog         *ebpf.Program
		}{"readahead", "page_cache_async_ra", p.ra.AsyncRA})
	}
	return hooks
}

func (t *Tracer) loadPageCache(spec *ebpf.CollectionSpec) error {
	var p pageCachePrograms
	opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		"pc_conns": t.maps.PcConns, "page_cache": t.maps.PageCache, "pc_reads": t.maps.PcReads,
	}}
	if err := spec.LoadAndAssign(&p.filemapPrograms, opts); err != nil {
		return kernelLacks(err, "--page-cache")
	}
	if tracefs, err := EnsureTracefs(); err == nil && hasEvent(tracefs, "readahead", "page_cache_sync_ra") {
		var ra readaheadPrograms
		if err := spec.LoadAndAssign(&ra, opts); err != nil {
			p.Add.Close()
			p.Delete.Close()
			p.GetPages.Close()
			return kernelLacks(err, "--page-cache's read-ahead counts")
		}
		p.ra = &ra
	}
	t.pageCache = &p
	return nil
}

func (t *Tracer) attachPageCache() error {
	// tp_btf: the read's mapping gives its file's size (pagecache.bpf.h).
	l, err := link.AttachTracing(link.TracingOptions{Program: t.pageCache.GetPages})
	if err != nil {
		return fmt.Errorf("attaching to filemap:mm_filemap_get_pages (--page-cache): %w", err)
	}
	t.links = append(t.links, l)
	for _, h := range t.pageCache.hooks() {
		l, err := link.Tracepoint(h.group, h.event, h.prog, nil)
		if err != nil {
			return fmt.Errorf("attaching to %s:%s (--page-cache): %w", h.group, h.event, err)
		}
		t.links = append(t.links, l)
	}
	return nil
}

func (t *Tracer) closePageCache() error {
	if t.pageCache == nil {
		return nil
	}
	errs := []error{t.pageCache.GetPages.Close()}
	for _, h := range t.pageCache.hooks() {
		errs = append(errs, h.prog.Close())
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

// PageCache returns each counted connection's page-cache counters, summed
// over CPUs; nil without --page-cache.
func (t *Tracer) PageCache() ([]profile.PageCache, error) {
	if t.pageCache == nil {
		return nil, nil
	}
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
