/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The request a daemon thread (or, in a Go daemon, a goroutine) holds:
 * read from /dev/fuse and not yet answered. The stage programs
 * (stages.bpf.h, under stage_holds) write it; ufunc's programs (ufunc.bpf.c,
 * under stage_join), loaded with the tracer's map in place of their own,
 * read it, so that a function called within the hold counts for that
 * request's opcode: the daemon stage by function. */
#ifndef FUSESCOPE_HELD_H
#define FUSESCOPE_HELD_H

#define HELD_HOLDERS 16384 /* threads and goroutines holding a request at once */

struct held_request {
	__u64 unique;
	__u64 taken_ns;   /* the daemon read it */
	__u64 replied_ns; /* the daemon began its reply; 0: not yet */
	__u64 outer_ns;   /* ufunc: the outermost matched call in the hold began */
	__u32 conn;
	__u32 opcode;
	__u32 depth; /* ufunc: matched calls in progress within the hold */
	__u32 pad;
};

/* By holder: the thread id, or a Go daemon's goroutine (its g, which
 * cannot be a thread id: Go's heap lies above 4 GiB). An LRU: a thread
 * that exits leaves its entry. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HELD_HOLDERS);
	__type(key, __u64);
	__type(value, struct held_request);
} daemon_held SEC(".maps");

#endif
