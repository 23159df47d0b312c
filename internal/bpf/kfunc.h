/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Structs shared by kfunc.bpf.c, ufunc.bpf.c and their Go loaders,
 * internal/kfunc and internal/ufunc (bpf2go generates the Go side from this
 * file's BTF), and the histogram both programs keep. Included after
 * bpf_helpers.h. */
#ifndef FUSESCOPE_KFUNC_H
#define FUSESCOPE_KFUNC_H

#define KFUNC_MAX_FUNCS 1024 /* functions one run counts: kfunc refuses more */
#define KFUNC_MAX_TIMED 64   /* functions one run times (--latency) */
#define KFUNC_HIST_SLOTS 64  /* log2 buckets of ns, as libbpf-tools' log2l() */
#define KFUNC_MAX_NESTED 10240 /* calls being timed at once, all threads */

/* A function's index in the run's list is patched into each program loaded
 * for it: this 64-bit immediate marks the instruction to patch. */
#define KFUNC_INDEX_MARKER 0x6b66756e63696478ULL /* "kfuncidx" */

/* One timed function's calls on one CPU (--latency). */
struct func_hist {
	__u64 slots[KFUNC_HIST_SLOTS];
	__u64 count;
	__u64 sum_ns;
	__u64 min_ns;
	__u64 max_ns;
};

/* The log2 bucket of v (libbpf-tools' log2l). */
static __always_inline __u32 log2_slot(__u64 v)
{
	__u32 r = 0;
#pragma unroll
	for (int s = 32; s > 0; s >>= 1) {
		if (v >> s) {
			v >>= s;
			r += s;
		}
	}
	return r;
}

/* A call of ns into its function's histogram (kfunc's and ufunc's). */
static __always_inline void func_hist_add(struct func_hist *h, __u64 ns)
{
	__u32 slot = log2_slot(ns);
	if (slot >= KFUNC_HIST_SLOTS)
		slot = KFUNC_HIST_SLOTS - 1;
	h->slots[slot]++;
	if (h->count == 0 || ns < h->min_ns)
		h->min_ns = ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
	h->count++;
	h->sum_ns += ns;
}

/* A call being timed: the thread and the function (nested calls of other
 * functions are timed apart; a function that calls itself is timed from its
 * innermost call, as funclatency does). */
struct start_key {
	__u32 tid;
	__u32 index;
};

#endif
