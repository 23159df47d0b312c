//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* fusereq.bpf.c for kernels without BPF's compare-and-swap (before 5.12:
 * Debian's 5.10). Their verifier checks every instruction of a program
 * for reserved fields before it follows any path, so a compare-and-swap
 * is refused even where a load-time constant makes it dead code: no
 * global or CO-RE guard can hide it, and the object is compiled a second
 * time with a load, a compare and a store in its place (and the atomic
 * OR's likewise). The loader uses it only there (ktrace/funcs.go), for
 * the kprobe programs, the only ones such a kernel runs.
 *
 * What the plain claim gives up: two CPUs could claim one in-flight slot
 * at the same instant. The kernel queues a connection's requests under its
 * input queue's lock, so that needs two connections' sends hashed to the
 * same slot within the few nanoseconds between the load and the store. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

static __always_inline __u64 plain_cas(__u64 *p, __u64 old, __u64 new)
{
	__u64 cur = *p;
	if (cur == old)
		*p = new;
	return cur;
}

static __always_inline void plain_or(__u64 *p, __u64 bits)
{
	*p |= bits;
}

#define __sync_val_compare_and_swap(p, old, new) plain_cas(p, old, new)
#define __sync_fetch_and_or(p, bits) plain_or(p, bits)

#include "fusereq.bpf.c"
