/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Structs shared by fusereq.bpf.c and its Go loader (bpf2go generates the Go
 * side from this file's BTF, so the two cannot drift). */
#ifndef FUSESCOPE_FUSEREQ_H
#define FUSESCOPE_FUSEREQ_H

#define HIST_SLOTS 64
#define MAX_INFLIGHT 16384
#define MAX_STATS_KEYS 2048
#define MAX_ERRNO_KEYS 1024
#define MAX_FILTER_CONNS 64

/* Indices of the drops counters: events the tracer could not account for. */
enum drop_reason {
	DROP_INFLIGHT_FULL = 0, /* a send found the in-flight map full */
	DROP_UNMATCHED_END = 1, /* an end with no send: sent before attach */
	DROP_STATS_FULL = 2,    /* no room for a new (connection, opcode) */
	DROP_UNIQUE_ZERO = 3,   /* kernel 6.12-6.17: send fired before the id was set */
	DROP_ERRNO_FULL = 4,    /* no room for a new (connection, opcode, errno) */
	DROP_REASONS = 5,
};

struct inflight_key {
	__u32 conn;
	__u32 pad;
	__u64 unique;
};

struct inflight_val {
	__u64 start_ns;
	__u32 opcode;
	__u32 tgid;
	__u32 tid;
	__u32 req_len;
};

struct stats_key {
	__u32 conn;
	__u32 opcode;
};

/* One per (connection, opcode) and CPU; user space sums the CPUs. */
struct op_stats {
	__u64 count;
	__u64 errors;
	__u64 req_bytes;
	__u64 reply_bytes;
	__u64 sum_ns;
	__u64 min_ns;
	__u64 max_ns;
	__u64 slots[HIST_SLOTS];
};

struct errno_key {
	__u32 conn;
	__u32 opcode;
	__s32 error;
	__u32 pad;
};

#endif
