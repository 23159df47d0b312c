/* SPDX-License-Identifier: GPL-2.0 */
/* --page-cache: the page cache of the traced FUSE mounts, from the filemap
 * and readahead tracepoints, filtered to the FUSE superblocks (an anonymous
 * device 0:conn, the connection's number) by a bitmap user space keeps:
 * pages the buffered reads asked the cache for, pages added (a read's miss,
 * read-ahead, a write to a page not cached) and removed, and the read-ahead
 * windows. Included by fusereq.bpf.c. */

/* The tracepoints' records (trace_event_raw_*) come from vmlinux.h. */

/* The FUSE connections whose pages are counted, one bit each. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CONN_BITMAP_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} pc_conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct page_cache_stats);
} page_cache SEC(".maps");

static const struct page_cache_stats zero_pc;

static __always_inline __u64 min_u64(__u64 a, __u64 b)
{
	return a < b ? a : b;
}

/* The counters of a FUSE superblock's device, if it is traced. */
static __always_inline struct page_cache_stats *pc_for(__u32 s_dev)
{
	if (s_dev >> 20) /* a real device: not FUSE */
		return 0;
	__u32 conn = s_dev & 0xfffff;
	__u32 word = conn >> 6;
	__u64 *bits = bpf_map_lookup_elem(&pc_conns, &word);
	if (!bits || !(*bits & (1ULL << (conn & 63))))
		return 0;
	struct page_cache_stats *s = bpf_map_lookup_elem(&page_cache, &conn);
	if (s)
		return s;
	bpf_map_update_elem(&page_cache, &conn, &zero_pc, BPF_NOEXIST);
	return bpf_map_lookup_elem(&page_cache, &conn);
}

/* A read's lookups so far, by thread: filemap_read asks the cache for a
 * batch of pages at a time, and each lookup's event names the pages from
 * where it stands to the end of the whole read. */
struct pc_read {
	__u64 ino;
	__u64 last_index;
	__u64 index;
	__u32 s_dev;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct pc_read);
} pc_reads SEC(".maps");

/* The mapping a read asks the cache of (tp_btf), for its file's size. */

/* The pages a buffered read asks the cache for: from index to last_index,
 * within the file. The event names the pages of the whole read, which a
 * read larger than its file (cat asks for 128 KiB) runs past the end of;
 * only the file's pages can be hits, so the rest are left out. */
SEC("tp_btf/mm_filemap_get_pages")
int BPF_PROG(pc_get_pages, struct address_space *mapping, unsigned long index, unsigned long last_index)
{
	struct inode *inode = mapping->host;
	__u32 s_dev = inode->i_sb->s_dev;
	struct page_cache_stats *s = pc_for(s_dev);
	if (!s || last_index < index)
		return 0;
	/* The same read's next batch: its pages were counted at its first. */
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 ino = inode->i_ino;
	struct pc_read cur = { .ino = ino, .last_index = last_index, .index = index, .s_dev = s_dev };
	struct pc_read *prev = bpf_map_lookup_elem(&pc_reads, &tid);
	int more = prev && prev->s_dev == cur.s_dev && prev->ino == cur.ino && prev->last_index == cur.last_index &&
		   cur.index > prev->index;
	bpf_map_update_elem(&pc_reads, &tid, &cur, BPF_ANY);
	if (more)
		return 0;
	long long size = inode->i_size;
	if (size <= 0 || (__u64)index > (__u64)(size - 1) >> 12)
		return 0; /* at or past the end: a read that returns nothing */
	__u64 last = min_u64(last_index, (__u64)(size - 1) >> 12);
	s->read_pages += last - index + 1;
	s->reads++;
	return 0;
}

SEC("tracepoint/filemap/mm_filemap_add_to_page_cache")
int pc_add(struct trace_event_raw_mm_filemap_op_page_cache *ctx)
{
	struct page_cache_stats *s = pc_for(ctx->s_dev);
	if (s)
		s->added += 1ULL << (ctx->order & 31);
	return 0;
}

SEC("tracepoint/filemap/mm_filemap_delete_from_page_cache")
int pc_delete(struct trace_event_raw_mm_filemap_op_page_cache *ctx)
{
	struct page_cache_stats *s = pc_for(ctx->s_dev);
	if (s)
		s->removed += 1ULL << (ctx->order & 31);
	return 0;
}

SEC("tracepoint/readahead/page_cache_sync_ra")
int pc_sync_ra(struct trace_event_raw_page_cache_ra_op *ctx)
{
	struct page_cache_stats *s = pc_for(ctx->s_dev);
	if (s) {
		s->ra_sync++;
		s->ra_pages += ctx->size;
	}
	return 0;
}

SEC("tracepoint/readahead/page_cache_async_ra")
int pc_async_ra(struct trace_event_raw_page_cache_ra_op *ctx)
{
	struct page_cache_stats *s = pc_for(ctx->s_dev);
	if (s) {
		s->ra_async++;
		s->ra_pages += ctx->size;
	}
	return 0;
}
