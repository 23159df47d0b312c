//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* Per-opcode FUSE request latency from the fuse:fuse_request_send and
 * fuse:fuse_request_end tracepoints (Linux 6.12+, request ids from 6.18).
 * Everything is aggregated here; nothing per event goes to user space. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "fusereq.h"
#include "kernel.bpf.h"

/* The tracepoints' records and the kernel's request come from vmlinux.h
 * (the kernel's BTF, trimmed), relocated by CO-RE against the running
 * kernel: only the field names and kinds must match. */

/* Filters, set by the loader before the program is loaded. */
volatile const __u32 filter_tgid = 0;
volatile const __u8 filter_comm_on = 0;
volatile const char filter_comm[16] = {};
volatile const __u8 filter_conn_on = 0;
volatile const __u64 filter_op_mask = 0; /* bit n keeps opcode n; 0 keeps all */
volatile const __u64 reap_age_ns = 600000000000ULL;
/* --slower: requests at least this long are sent whole, by the *_slow
 * programs; the others are compiled without that code (a constant tested
 * at run time still cost loads and registers on the hot path). */
volatile const __u64 slower_ns = 0;

/* The interval being measured: user space moves it on at each interval
 * (struct op_stats's epoch). Starts at 1, so that a zeroed slot matches no
 * interval. */
volatile __u32 interval_epoch = 1;

/* In-flight requests in an array, not a hash: the verifier inlines array
 * lookups, so the hot path does no hash-table work. Each request has two
 * candidate slots; user space reads the array through mmap. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, INFLIGHT_SLOTS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct inflight_slot);
} inflight SEC(".maps");

/* Statistics indexed by (connection mod FAST_CONNS, opcode): an inlined
 * per-CPU array lookup. A (connection, opcode) whose index another
 * connection already holds on this CPU goes to the stats hash instead.
 * One array per half (fusereq.h, stats_key). */
#define STATS_FAST(name)                                               \
	struct {                                                       \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);               \
		__uint(max_entries, FAST_CONNS * FAST_OPS);            \
		__type(key, __u32);                                    \
		__type(value, struct op_stats);                        \
	} name SEC(".maps");
STATS_FAST(stats_fast0)
STATS_FAST(stats_fast1)

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_STATS_KEYS);
	__type(key, struct stats_key);
	__type(value, struct op_stats);
} stats SEC(".maps");

/* Sub-buckets, by (connection mod FINE_CONNS, opcode): a (connection,
 * opcode) whose index another connection holds on this CPU has none there,
 * and user space uses the log2 buckets for the octaves that misses. One
 * array per half; the stages' (stages.bpf.h) follow the same layout with
 * the stage as the last dimension. */
#define FINE_ARRAY(name, entries)                                      \
	struct {                                                       \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);               \
		__uint(max_entries, entries);                          \
		__type(key, __u32);                                    \
		__type(value, struct fine_stats);                      \
	} name SEC(".maps");
FINE_ARRAY(fine_fast0, FINE_CONNS * FAST_OPS)
FINE_ARRAY(fine_fast1, FINE_CONNS * FAST_OPS)

/* Counts delta in its sub-bucket of the copy f, if conn holds it. Two
 * lookups of one map pointer each, never one call on a pointer chosen at
 * run time: the verifier inlines a lookup only where its map is known. */
static __always_inline void count_fine_in(struct fine_stats *f, __u32 conn, __u64 delta, __u32 octave)
{
	if (!f)
		return;
	if (!f->used) {
		f->used = 1;
		f->conn = conn;
	} else if (f->conn != conn) {
		return;
	}
	__u32 sub = (delta >> (octave - 4)) & (FINE_SUBS - 1);
	f->slots[((octave - FINE_FIRST) * FINE_SUBS + sub) & (FINE_OCTAVES * FINE_SUBS - 1)]++;
}

static __always_inline int fine_octave(__u32 opcode, __u32 octave)
{
	return opcode < FAST_OPS && octave >= FINE_FIRST && octave < FINE_FIRST + FINE_OCTAVES;
}

static __always_inline void count_fine(__u32 conn, __u32 opcode, __u64 delta, __u32 octave, __u32 half)
{
	if (!fine_octave(opcode, octave))
		return;
	__u32 idx = (conn & (FINE_CONNS - 1)) * FAST_OPS + opcode;
	if (half)
		count_fine_in(bpf_map_lookup_elem(&fine_fast1, &idx), conn, delta, octave);
	else
		count_fine_in(bpf_map_lookup_elem(&fine_fast0, &idx), conn, delta, octave);
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_ERRNO_KEYS);
	__type(key, struct errno_key);
	__type(value, __u64);
} errnos SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DROP_REASONS);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

/* --slower only: the requests that took at least slower_ns, and the
 * command of each request in flight (by in-flight slot), taken at its send. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} slow_reqs SEC(".maps");

struct slow_comm {
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, INFLIGHT_SLOTS);
	__type(key, __u32);
	__type(value, struct slow_comm);
} inflight_comm SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} slow_lost SEC(".maps");

/* Keeps the event type in BTF for bpf2go (ring buffers name no value type). */
const struct slow_req *unused_slow_req __attribute__((unused));
/* And the enums the loader reads its counters by (bpf2go -type): Go gets
 * them generated, never copied. */
const enum drop_reason *unused_drop_reason __attribute__((unused));

/* Connections to trace, as a bitmap: an inlined array lookup, where a hash
 * lookup would cost more than everything else the send does. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CONN_BITMAP_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} filter_conns SEC(".maps");

static __always_inline int conn_wanted(__u32 conn)
{
	__u32 word = conn >> 6;
	__u64 *bits = bpf_map_lookup_elem(&filter_conns, &word);
	return bits && (*bits & (1ULL << (conn & 63)));
}

static const struct op_stats zero_stats;

static __always_inline void count_drop(enum drop_reason reason)
{
	__u32 idx = reason;
	__u64 *v = bpf_map_lookup_elem(&drops, &idx);
	if (v)
		(*v)++;
}

static __always_inline __u32 log2l(__u64 v)
{
	__u32 r = 0;
	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

static __always_inline int comm_matches(void)
{
	char comm[16];
	bpf_get_current_comm(comm, sizeof(comm));
#pragma unroll
	for (int i = 0; i < 16; i++) {
		if (comm[i] != filter_comm[i])
			return 0;
		if (comm[i] == 0)
			return 1;
	}
	return 1;
}

static __always_inline __u32 slot_index(__u32 conn, __u64 unique, __u32 tag, __u32 probe)
{
	/* Classic tracepoints (tag 0): request ids step by 2 per connection,
	 * so consecutive requests take consecutive slots, and the multiplier
	 * spreads connections apart. tp_btf: by the request's address, which
	 * no two requests in flight share. */
	__u32 h = tag ? (tag >> 6) * 2654435761u : (__u32)(unique >> 1) + conn * 2654435761u;
	return (h + probe * (INFLIGHT_SLOTS / 2)) & (INFLIGHT_SLOTS - 1);
}

static __always_inline struct inflight_slot *claim_slot(__u32 conn, __u64 unique, __u32 tag, __u64 now, __u32 *at)
{
#pragma unroll
	for (__u32 probe = 0; probe < 2; probe++) {
		__u32 idx = slot_index(conn, unique, tag, probe);
		struct inflight_slot *s = bpf_map_lookup_elem(&inflight, &idx);
		if (!s)
			return 0;
		*at = idx;
		__u64 old = s->unique;
		if (old == 0) {
			if (__sync_val_compare_and_swap(&s->unique, 0, unique) == 0)
				return s;
			continue;
		}
		/* A request that never ended (its daemon died, its connection
		 * was aborted) gives its slot up once it is older than the age,
		 * or at once on tp_btf when its request's memory is sent again. */
		__u64 started = s->start_ns;
		int stale = (tag && s->req_tag == tag && started) ||
			    (started && now > started && now - started > reap_age_ns);
		if (stale && __sync_val_compare_and_swap(&s->unique, old, unique) == old) {
			count_drop(DROP_REAPED_STALE);
			return s;
		}
	}
	return 0;
}

/* A request queued for the daemon, by thread pid. The current task's ids
 * are asked for only under -p: the helper call costs ~15 ns here, a tenth
 * of the send. */
static __always_inline int on_send(__u32 conn, __u64 unique, __u32 opcode, __u32 len, __u32 tag, __u32 pid, const int slow, const int stages)
{
	if (filter_op_mask && (opcode >= 64 || !(filter_op_mask & (1ULL << opcode))))
		return 0;
	if (filter_tgid && (__u32)(bpf_get_current_pid_tgid() >> 32) != filter_tgid)
		return 0;
	if (filter_conn_on && !conn_wanted(conn))
		return 0;
	if (filter_comm_on && !comm_matches())
		return 0;
	if (unique == 0) {
		count_drop(DROP_UNIQUE_ZERO);
		return 0;
	}

	__u64 now = bpf_ktime_get_ns();
	__u32 idx = 0;
	struct inflight_slot *s = claim_slot(conn, unique, tag, now, &idx);
	if (!s) {
		count_drop(DROP_INFLIGHT_FULL);
		return 0;
	}
	if (slow) {
		struct slow_comm *c = bpf_map_lookup_elem(&inflight_comm, &idx);
		if (c)
			bpf_get_current_comm(c->comm, sizeof(c->comm));
	}
	s->conn = conn;
	s->opcode = opcode;
	s->pid = pid;
	s->req_len = len;
	s->req_tag = tag;
	if (stages) {
		s->taken_ns = 0;
		s->replied_ns = 0;
	}
	s->start_ns = now;
	return 0;
}

/* Each program has twins compiled with --slower's code (_slow), --stages'
 * (_stages) or both; the loader puts the twin it needs in its place. */
#define SEND_TP(name, slow, stages)                                                                             \
	SEC("tracepoint/fuse/fuse_request_send")                                                                \
	int name(struct trace_event_raw_fuse_request_send *ctx)                                                 \
	{                                                                                                       \
		return on_send(ctx->connection, ctx->unique, ctx->opcode, ctx->len, 0,                          \
			       (__u32)bpf_get_current_pid_tgid(), slow, stages);                                \
	}
SEND_TP(fuse_send, 0, 0)
SEND_TP(fuse_send_slow, 1, 0)
SEND_TP(fuse_send_stages, 0, 1)
SEND_TP(fuse_send_slow_stages, 1, 1)

/* The low bits of a request's address, never 0: what tp_btf finds a
 * request's slot by. The verifier allows no arithmetic on the pointer, but
 * a 32-bit move of it gives a number to a program with CAP_PERFMON. */
static __always_inline __u32 req_tag(struct fuse_req *req)
{
	__u32 tag;
	asm volatile("r1 = %[req]; w1 = w1; %[tag] = r1" : [tag] "=r"(tag) : [req] "r"(req) : "r1");
	return tag | 1;
}

/* The same from the raw tracepoint: no record is filled in for it, which
 * is most of what attaching to the classic tracepoint costs. */
/* Under --stages a request's slot is found by (connection, id), as on the
 * classic tracepoints: the daemon's read and reply know those, not the
 * request's address. Where the send has no id yet (key_by_address), the
 * slot is found by the address alone, in both programs, and the stages'
 * stamps by (connection, id) in a table of their own (stages.bpf.h). */
#define SEND_BTF(name, slow, stages)                                                                            \
	SEC("tp_btf/fuse_request_send")                                                                         \
	int BPF_PROG(name, struct fuse_req *req)                                                                \
	{                                                                                                       \
		__u32 tag = req_tag(req);                                                                       \
		if (key_by_address)                                                                             \
			return on_send(req_conn(req), tag, req->in.h.opcode, req->in.h.len, tag, req->in.h.pid, \
				       slow, stages);                                                           \
		return on_send(req_conn(req), req->in.h.unique, req->in.h.opcode, req->in.h.len,                \
			       stages ? 0 : tag, req->in.h.pid, slow, stages);                                  \
	}
SEND_BTF(fuse_send_btf, 0, 0)
SEND_BTF(fuse_send_btf_slow, 1, 0)
SEND_BTF(fuse_send_btf_stages, 0, 1)
SEND_BTF(fuse_send_btf_slow_stages, 1, 1)

static __always_inline struct op_stats *fast_stats(__u32 conn, struct op_stats *s)
{
	if (!s)
		return 0;
	if (s->count == 0)
		s->conn = conn;
	return s->conn == conn ? s : 0;
}

static __always_inline struct op_stats *stats_for(__u32 conn, __u32 opcode, __u32 half)
{
	if (opcode < FAST_OPS) {
		__u32 idx = (conn & (FAST_CONNS - 1)) * FAST_OPS + opcode;
		struct op_stats *s = half ? fast_stats(conn, bpf_map_lookup_elem(&stats_fast1, &idx))
					  : fast_stats(conn, bpf_map_lookup_elem(&stats_fast0, &idx));
		if (s)
			return s;
	}
	struct stats_key sk = { .conn = conn, .opcode = opcode, .half = half };
	struct op_stats *s = bpf_map_lookup_elem(&stats, &sk);
	if (s)
		return s;
	/* NOEXIST may lose a race with another CPU; the lookup settles it. */
	bpf_map_update_elem(&stats, &sk, &zero_stats, BPF_NOEXIST);
	s = bpf_map_lookup_elem(&stats, &sk);
	if (s)
		s->conn = conn;
	return s;
}

#include "names.bpf.h"
#include "stages.bpf.h"
#include "uring.bpf.h"

/* A request's reply is complete (or it was aborted). With a tag (tp_btf),
 * conn is unknown and read from the slot: the connection's dev shares a
 * cache line with the counter of requests waiting, which the sending CPU
 * writes per request, so reading it on the daemon's CPU cost a transfer. */
/* Sends a request that took at least slower_ns. Its command is read from
 * its slot's entry after the slot was freed: only a request claiming the
 * same slot within that instant could have written another there. */
static __always_inline void send_slow(__u32 idx, __u32 pid, __u32 conn, __u32 opcode, __u64 start,
				      __u64 delta, __u32 req_len, __u32 reply_len, __s32 err, __u64 nodeid,
				      const __u64 *stage, __u32 epoch)
{
	struct slow_req *e = bpf_ringbuf_reserve(&slow_reqs, sizeof(*e), 0);
	if (!e) {
		__u32 zero = 0;
		__u64 *n = bpf_map_lookup_elem(&slow_lost, &zero);
		if (n)
			(*n)++;
		return;
	}
	e->end_ns = start + delta;
	e->lat_ns = delta;
	e->nodeid = nodeid;
	e->conn = conn;
	e->opcode = opcode;
	e->pid = pid;
	e->req_len = req_len;
	e->reply_len = reply_len;
	e->error = err;
	e->stage_ns[0] = stage[0];
	e->stage_ns[1] = stage[1];
	e->stage_ns[2] = stage[2];
	e->epoch = epoch;
	struct slow_comm *c = bpf_map_lookup_elem(&inflight_comm, &idx);
	if (c)
		__builtin_memcpy(e->comm, c->comm, sizeof(e->comm));
	else
		e->comm[0] = 0;
	/* User space reads on a timer: no wakeup (an interrupt) per request. */
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
}

static __always_inline void count_node(__u32 conn, __u64 node, __u64 delta, __s32 err);

/* --stages from the kernel's side of /dev/fuse (funcs.bpf.h): its
 * programs know the request's address, so they stamp the slot itself,
 * keyed by address too, and no table of stamps is needed. */
volatile const __u8 stamps_in_slot = 0;

/* unique is what the slot was claimed with (the request's id, or its tag
 * under key_by_address); id is the request's id, which its stamps are
 * found by. */
static __always_inline int on_end(__u32 conn, __u64 unique, __u32 reply_len, __s32 err, __u32 tag, __u64 nodeid,
				  __u64 id, __u32 ring, const int slow, const int stages, const int files)
{
	struct inflight_slot *slot = 0;
	__u32 slot_idx = 0;

#pragma unroll
	for (__u32 probe = 0; probe < 2; probe++) {
		__u32 idx = slot_index(conn, unique, tag, probe);
		struct inflight_slot *s = bpf_map_lookup_elem(&inflight, &idx);
		if (s && s->unique == unique && (tag ? s->req_tag == tag : s->conn == conn)) {
			slot = s;
			slot_idx = idx;
			break;
		}
	}
	if (!slot) {
		/* Sent before we attached, or filtered out at send. */
		if (!filter_tgid && !filter_comm_on && !filter_conn_on && !filter_op_mask)
			count_drop(DROP_UNMATCHED_END);
		return 0;
	}
	__u64 start = slot->start_ns;
	__u32 opcode = slot->opcode;
	conn = slot->conn;
	__u32 req_len = slot->req_len;
	__u32 pid = slow ? slot->pid : 0;
	__u64 taken = 0, replied = 0;
	if (stages && key_by_address && !stamps_in_slot)
		take_stamps(conn, id, &taken, &replied);
	else if (stages) {
		taken = slot->taken_ns;
		replied = slot->replied_ns;
	}
	slot->start_ns = 0;
	__sync_val_compare_and_swap(&slot->unique, unique, 0);
	if (!start)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 delta = now - start;
	/* Read once: the request's figures all go to its interval's half. */
	__u32 epoch = interval_epoch;
	__u32 half = epoch & 1;
	__u64 stage[STAGES] = {};
	int gap = stages ? stage_split(start, taken, replied, now, stage) : 0;
	if (slow && delta >= slower_ns)
		send_slow(slot_idx, pid, conn, opcode, start, delta, req_len, reply_len, err, nodeid, stage, epoch);

	struct op_stats *s = stats_for(conn, opcode, half);
	if (!s) {
		count_drop(DROP_STATS_FULL);
		return 0;
	}
	/* Per-CPU values: no other CPU writes this copy, so no atomics. */
	if (s->count == 0 || delta < s->min_ns)
		s->min_ns = delta;
	if (delta > s->max_ns)
		s->max_ns = delta;
	s->count++;
	s->sum_ns += delta;
	s->req_bytes += req_len;
	s->reply_bytes += reply_len;
	s->uring += ring;
	__u32 octave = log2l(delta);
	s->slots[octave & (HIST_SLOTS - 1)]++;
	count_fine(conn, opcode, delta, octave, half);
	if (s->epoch != epoch) {
		s->epoch = epoch;
		s->interval_min_ns = delta;
		s->interval_max_ns = delta;
	} else {
		if (delta < s->interval_min_ns)
			s->interval_min_ns = delta;
		if (delta > s->interval_max_ns)
			s->interval_max_ns = delta;
	}

	if (err) {
		s->errors++;
		struct errno_key ek = { .conn = conn, .opcode = opcode, .error = err, .half = half };
		__u64 *n = bpf_map_lookup_elem(&errnos, &ek);
		if (!n) {
			__u64 zero = 0;
			bpf_map_update_elem(&errnos, &ek, &zero, BPF_NOEXIST);
			n = bpf_map_lookup_elem(&errnos, &ek);
		}
		if (n)
			__sync_fetch_and_add(n, 1);
		else
			count_drop(DROP_ERRNO_FULL);
	}
	/* After the request's count: user space reads the stages first, so
	 * that a live snapshot's stages never count a request its totals do
	 * not. */
	if (stages)
		count_stages(conn, opcode, gap, stage, half, epoch);
	if (files)
		count_node(conn, nodeid, delta, err);
	return 0;
}

#define END_TP(name, slow, stages)                                                                              \
	SEC("tracepoint/fuse/fuse_request_end")                                                                 \
	int name(struct trace_event_raw_fuse_request_end *ctx)                                                  \
	{                                                                                                       \
		return on_end(ctx->connection, ctx->unique, ctx->len, ctx->error, 0, 0, ctx->unique, 0, slow,   \
			      stages, 0);                                                                       \
	}
END_TP(fuse_end, 0, 0)
END_TP(fuse_end_slow, 1, 0)
END_TP(fuse_end_stages, 0, 1)
END_TP(fuse_end_slow_stages, 1, 1)

/* Under --stages the end reads the connection (the slot is found by it);
 * --files' twins sum each node's requests (tp_btf only: the classic
 * tracepoints carry no node). */
#define END_BTF(name, slow, stages, files)                                                                      \
	SEC("tp_btf/fuse_request_end")                                                                          \
	int BPF_PROG(name, struct fuse_req *req)                                                                \
	{                                                                                                       \
		__u64 node = (slow || files) ? req->in.h.nodeid : 0;                                            \
		if (key_by_address) {                                                                           \
			__u32 tag = req_tag(req);                                                               \
			return on_end(0, tag, req->out.h.len, req->out.h.error, tag, node,                      \
				      req->in.h.unique, req_on_ring(req, 0), slow, stages, files);                 \
		}                                                                                               \
		return on_end(stages ? req_conn(req) : 0, req->in.h.unique, req->out.h.len,                     \
			      req->out.h.error, stages ? 0 : req_tag(req), node, req->in.h.unique,              \
			      req_on_ring(req, 0), slow, stages, files);                                           \
	}
END_BTF(fuse_end_btf, 0, 0, 0)
END_BTF(fuse_end_btf_slow, 1, 0, 0)
END_BTF(fuse_end_btf_stages, 0, 1, 0)
END_BTF(fuse_end_btf_slow_stages, 1, 1, 0)
END_BTF(fuse_end_btf_files, 0, 0, 1)
END_BTF(fuse_end_btf_slow_files, 1, 0, 1)
END_BTF(fuse_end_btf_stages_files, 0, 1, 1)
END_BTF(fuse_end_btf_slow_stages_files, 1, 1, 1)

#include "pagecache.bpf.h"
#include "calls.bpf.h"
#include "funcs.bpf.h"

static __always_inline void count_node(__u32 conn, __u64 node, __u64 delta, __s32 err)
{
	struct node_key k = { .conn = conn, .node = node };
	struct node_stats *s = bpf_map_lookup_elem(&node_table, &k);
	if (!s) {
		bpf_map_update_elem(&node_table, &k, &zero_node_stats, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&node_table, &k);
		if (!s) {
			count_drop(DROP_NODES_FULL);
			return;
		}
	}
	s->count++;
	s->sum_ns += delta;
	if (delta > s->max_ns)
		s->max_ns = delta;
	if (err)
		s->errors++;
}

char LICENSE[] SEC("license") = "GPL";
