//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* Per-opcode FUSE request latency from the fuse:fuse_request_send and
 * fuse:fuse_request_end tracepoints (Linux 6.12+, request ids from 6.18).
 * Everything is aggregated here; nothing per event goes to user space. */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "fusereq.h"

/* The tracepoints' records, relocated by CO-RE against the running kernel's
 * trace_event_raw_* types: only the field names and kinds must match. */
enum fuse_opcode { FUSE_LOOKUP = 1 };

struct trace_event_raw_fuse_request_send {
	__u64 common;
	__u32 connection;
	__u64 unique;
	enum fuse_opcode opcode;
	__u32 len;
} __attribute__((preserve_access_index));

struct trace_event_raw_fuse_request_end {
	__u64 common;
	__u32 connection;
	__u64 unique;
	__u32 len;
	__s32 error;
} __attribute__((preserve_access_index));

/* Filters, set by the loader before the program is loaded. */
volatile const __u32 filter_tgid = 0;
volatile const __u8 filter_comm_on = 0;
volatile const char filter_comm[16] = {};
volatile const __u8 filter_conn_on = 0;
volatile const __u64 filter_op_mask = 0; /* bit n keeps opcode n; 0 keeps all */

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_INFLIGHT);
	__type(key, struct inflight_key);
	__type(value, struct inflight_val);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_STATS_KEYS);
	__type(key, struct stats_key);
	__type(value, struct op_stats);
} stats SEC(".maps");

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

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_FILTER_CONNS);
	__type(key, __u32);
	__type(value, __u8);
} filter_conns SEC(".maps");

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

SEC("tracepoint/fuse/fuse_request_send")
int fuse_send(struct trace_event_raw_fuse_request_send *ctx)
{
	struct inflight_key key = { .conn = ctx->connection, .unique = ctx->unique };
	__u32 opcode = ctx->opcode;
	__u64 id = bpf_get_current_pid_tgid();

	if (filter_op_mask && (opcode >= 64 || !(filter_op_mask & (1ULL << opcode))))
		return 0;
	if (filter_tgid && (__u32)(id >> 32) != filter_tgid)
		return 0;
	if (filter_conn_on && !bpf_map_lookup_elem(&filter_conns, &key.conn))
		return 0;
	if (filter_comm_on && !comm_matches())
		return 0;
	if (key.unique == 0) {
		count_drop(DROP_UNIQUE_ZERO);
		return 0;
	}

	struct inflight_val val = {
		.start_ns = bpf_ktime_get_ns(),
		.opcode = opcode,
		.tgid = id >> 32,
		.tid = (__u32)id,
		.req_len = ctx->len,
	};
	if (bpf_map_update_elem(&inflight, &key, &val, BPF_NOEXIST))
		count_drop(DROP_INFLIGHT_FULL);
	return 0;
}

SEC("tracepoint/fuse/fuse_request_end")
int fuse_end(struct trace_event_raw_fuse_request_end *ctx)
{
	struct inflight_key key = { .conn = ctx->connection, .unique = ctx->unique };
	struct inflight_val *start = bpf_map_lookup_elem(&inflight, &key);
	if (!start) {
		/* Sent before we attached, or filtered out at send. */
		if (!filter_tgid && !filter_comm_on && !filter_conn_on && !filter_op_mask)
			count_drop(DROP_UNMATCHED_END);
		return 0;
	}
	__u64 delta = bpf_ktime_get_ns() - start->start_ns;
	struct stats_key sk = { .conn = key.conn, .opcode = start->opcode };
	__u32 req_len = start->req_len;
	bpf_map_delete_elem(&inflight, &key);

	struct op_stats *s = bpf_map_lookup_elem(&stats, &sk);
	if (!s) {
		/* NOEXIST may lose a race with another CPU; the lookup settles it. */
		bpf_map_update_elem(&stats, &sk, &zero_stats, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&stats, &sk);
		if (!s) {
			count_drop(DROP_STATS_FULL);
			return 0;
		}
	}
	/* Per-CPU values: no other CPU writes this copy, so no atomics. */
	if (s->count == 0 || delta < s->min_ns)
		s->min_ns = delta;
	if (delta > s->max_ns)
		s->max_ns = delta;
	s->count++;
	s->sum_ns += delta;
	s->req_bytes += req_len;
	s->reply_bytes += ctx->len;
	s->slots[log2l(delta) & (HIST_SLOTS - 1)]++;

	__s32 err = ctx->error;
	if (err) {
		s->errors++;
		struct errno_key ek = { .conn = key.conn, .opcode = sk.opcode, .error = err };
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
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
