/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Structs shared by fusereq.bpf.c and its Go loader (bpf2go generates the Go
 * side from this file's BTF, so the two cannot drift). */
#ifndef FUSESCOPE_FUSEREQ_H
#define FUSESCOPE_FUSEREQ_H

#define HIST_SLOTS 64
#define INFLIGHT_SLOTS 65536 /* power of two */
#define FAST_CONNS 64        /* power of two: connection bits of the fast stats index */
#define FAST_OPS 64          /* opcodes below this use the fast stats array */
#define MAX_STATS_KEYS 2048 /* (connection, opcode) in each half, beyond the fast array */
#define MAX_ERRNO_KEYS 2048 /* (connection, opcode, errno) in each half */
#define CONN_BITMAP_WORDS 16384 /* one bit per connection number below 2^20 */
#define DAEMON_BITMAP_WORDS 65536 /* --stages: one bit per process id below 2^22 (PID_MAX_LIMIT) */
#define DAEMON_THREADS 4096     /* power of two: --stages' per-thread state, by thread id */
#define MAX_STAGE_KEYS 1024 /* (connection, opcode) in each half */
#define FINE_FIRST 10           /* sub-buckets from octave 2^10 ns (1 us) ... */
#define FINE_OCTAVES 32         /* ... to 2^42 ns (73 min) */
#define FINE_SUBS 16            /* per octave: 6.25% wide */
#define FINE_CONNS 4            /* power of two: connection bits of the fine index */
#define MAX_NODE_KEYS 8192    /* --files: (connection, node) pairs */
#define STAGES 3                /* queue, daemon, reply */

/* Indices of the drops counters: events the tracer could not account for. */
enum drop_reason {
	DROP_INFLIGHT_FULL = 0, /* a send found both of its in-flight slots busy */
	DROP_UNMATCHED_END = 1, /* an end with no send: sent before attach */
	DROP_STATS_FULL = 2,    /* no room for a new (connection, opcode) */
	DROP_UNIQUE_ZERO = 3,   /* kernel 6.12-6.17: send fired before the id was set */
	DROP_ERRNO_FULL = 4,    /* no room for a new (connection, opcode, errno) */
	DROP_REAPED_STALE = 5,  /* a send took over a slot in flight beyond the reap age */
	DROP_STAGES_FULL = 6,   /* --stages: no room for a new (connection, opcode) */
	DROP_NODES_FULL = 7,    /* --files: no room for a new (connection, node) */
	DROP_REASONS = 8,
};

/* One in-flight request. A slot is free when unique is 0; a send claims it
 * with a compare-and-swap on unique, its end frees it the same way. On the
 * classic tracepoints a request is found by (conn, unique); on tp_btf by
 * its address and unique, so that the end never reads the connection. */
struct inflight_slot {
	__u64 unique;
	__u64 start_ns; /* 0 while a claim is being filled in */
	__u32 conn;
	__u32 opcode;
	__u32 pid;     /* the requesting thread: on tp_btf the request header's (in the daemon's pid namespace), else the current task's */
	__u32 req_len;
	__u32 req_tag; /* tp_btf: the low bits of the request's address; 0 on the classic tracepoints */
	/* --stages: when a daemon thread took the request from /dev/fuse and
	 * when it began writing the reply; 0 until seen. */
	__u64 taken_ns;
	__u64 replied_ns;
	__u64 node; /* --stages: the request's node id, from the header the daemon read */
};

/* A request that took at least slower_ns (--slower): sent whole, as bcc's
 * *slower tools send theirs. */
struct slow_req {
	__u64 end_ns;  /* CLOCK_MONOTONIC */
	__u64 lat_ns;
	__u64 nodeid;  /* tp_btf only; 0 on the classic tracepoints */
	__u32 conn;
	__u32 opcode;
	__u32 pid;     /* the requesting thread, as inflight_slot's */
	__u32 req_len;
	__u32 reply_len;
	__s32 error;
	char comm[16]; /* the requesting thread's, taken at the send */
	/* --stages: the request's time in the kernel's queue, with the daemon
	 * and in the reply's delivery; 0 where the stage was not seen. */
	__u64 stage_ns[STAGES];
	__u32 epoch; /* the interval it ended in (interval_epoch) */
	__u32 pad;
};

/* The latencies of one (connection, opcode) in 16 linear sub-buckets per
 * octave, per CPU, for quantiles within 6.25% where the log2 buckets alone
 * would be up to 25% off (and of one stage of it, under --stages). The
 * CPU's copy belongs to conn once used. */
struct fine_stats {
	__u32 conn;
	__u32 used;
	__u64 slots[FINE_OCTAVES * FINE_SUBS];
};

/* The statistics are kept twice, by the parity of the interval a request
 * ended in (interval_epoch's low bit): the programs write one half while
 * user space reads the other, which no CPU writes any more once the epoch
 * has moved on. Each half is cumulative over the intervals of its parity,
 * so an interval's figures (its requests, their stages, their sub-buckets
 * and errnos) are all cut at the same moment, the epoch's move, and agree
 * with one another; a half is never cleared, so an end that ran late
 * still counts, in the next interval of its parity. The arrays are two
 * maps (the *0 and *1 twins), the hashes carry the half in their key. */
struct stats_key {
	__u32 conn;
	__u32 opcode;
	__u32 half;
	__u32 pad;
};

/* One per (connection, opcode) and CPU; user space sums the CPUs. In the
 * fast array, conn says which connection a CPU's copy belongs to. */
struct op_stats {
	__u32 conn;
	/* The last interval that wrote this copy, and its extremes: a
	 * snapshot's cumulative min_ns and max_ns cannot say which interval
	 * they happened in. */
	__u32 epoch;
	__u64 count;
	__u64 errors;
	__u64 req_bytes;
	__u64 reply_bytes;
	/* Of count, those FUSE over io_uring's ring carried (6.14+). */
	__u64 uring;
	__u64 sum_ns;
	__u64 min_ns;
	__u64 max_ns;
	__u64 interval_min_ns;
	__u64 interval_max_ns;
	__u64 slots[HIST_SLOTS];
};

struct errno_key {
	__u32 conn;
	__u32 opcode;
	__s32 error;
	__u32 half; /* the interval's parity, as stats_key's */
};

/* --stages: one (connection, opcode)'s stages, per CPU. A request ends with
 * all three stages (staged), or without its read from /dev/fuse seen
 * (not_taken: the ring transport, a daemon not watched, a request the kernel
 * ended itself), or read but without a reply write seen (not_replied). */
struct stage_stats {
	__u64 staged;
	__u64 not_taken;
	__u64 not_replied;
	__u64 sum_ns[STAGES];
	__u64 min_ns[STAGES];
	__u64 max_ns[STAGES];
	__u64 slots[STAGES][HIST_SLOTS];
	/* The last interval that staged a request here, and its extremes
	 * (op_stats's epoch). */
	__u32 epoch;
	/* In the fast array (stage_fast), the connection a CPU's copy
	 * belongs to. */
	__u32 conn;
	__u64 interval_min_ns[STAGES];
	__u64 interval_max_ns[STAGES];
};

#define MAX_CALL_NR 512 /* --calls: system call numbers (x86-64 uses < 470) */

/* --calls: one system call's counts on the traced mounts, per CPU. */
struct call_stats {
	__u64 count;
	__u64 errors;
	__u64 with_requests; /* calls that sent at least one FUSE request */
	__u64 requests;      /* the requests they sent */
	__u64 fuse_ns;       /* the time they waited for them */
	__u64 sum_ns;
	__u64 min_ns;
	__u64 max_ns;
	__u64 slots[HIST_SLOTS];
};

/* --page-cache: one FUSE connection's page cache, in pages, per CPU. */
struct page_cache_stats {
	__u64 reads;      /* buffered reads' lookups (mm_filemap_get_pages) */
	__u64 read_pages; /* the pages they asked for */
	__u64 added;      /* pages added: misses, read-ahead, writes to new pages */
	__u64 removed;    /* pages removed: eviction, truncation, invalidation */
	__u64 ra_sync;    /* read-ahead windows started by a miss */
	__u64 ra_async;   /* and by reaching a marked page */
	__u64 ra_pages;   /* the pages those windows asked for */
};

/* --files: one node of one connection. */
struct node_key {
	__u32 conn;
	__u32 pad;
	__u64 node;
};

/* --files: the requests about one node, per CPU. */
struct node_stats {
	__u64 count;
	__u64 sum_ns;
	__u64 max_ns;
	__u64 errors;
};

/* A node's name, as a reply that made its entry gave it (--slower, --files). */
struct node_name {
	__u32 conn;
	__u32 pad;
	__u64 node;
	__u64 parent;
	char name[256];
};

/* --stages: a daemon thread's system call in progress, and what a splice
 * from or to /dev/fuse left for its next call. A slot is the thread's while
 * its tid is stored in it. */
struct daemon_thread {
	__u32 tid;
	__u32 spliced_conn;
	__u64 spliced_ns;  /* a request was spliced from /dev/fuse into a pipe then */
	__u32 spliced_len;
	/* The thread's fd of /dev/fuse (plus 1; 0: none yet) and its
	 * connection, as the last lookup found them: a daemon thread reads and
	 * writes the same fd, and the walk from the task to the connection is
	 * most of a stage program's cost. */
	__u32 fuse_fd;
	__u32 fuse_conn;
	__u32 pad;
};

#endif
