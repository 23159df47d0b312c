//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* fusescope kfunc: calls of kernel functions counted (bcc's funccount) and
 * timed (libbpf-tools' funclatency), for many functions at once, in kernel
 * maps; nothing per call goes to user space. fentry/fexit programs are
 * loaded once per function, with the function's index patched in
 * (func_index); the kprobe counter is one program on every function, which
 * keys its counts by the probed address (user space names it). */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "kfunc.h"

/* The kernel's registers at a kprobe, relocated by CO-RE: only the name of
 * the field must match. */
struct pt_regs {
	unsigned long ip;
} __attribute__((preserve_access_index));

/* -p: the process whose calls are kept; 0 keeps every process's. */
volatile const __u32 filter_tgid = 0;

/* Calls by function index (fentry, and kprobe links that carry their own). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KFUNC_MAX_FUNCS);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

/* Calls by probed address (the kprobe counter: one program, every function). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, KFUNC_MAX_FUNCS);
	__type(key, __u64);
	__type(value, __u64);
} ip_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KFUNC_MAX_NESTED);
	__type(key, struct start_key);
	__type(value, __u64);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KFUNC_MAX_TIMED);
	__type(key, __u32);
	__type(value, struct func_hist);
} hists SEC(".maps");

/* Missed: calls whose start found the table of calls being timed full. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} missed SEC(".maps");

/* The index the loader patched into this copy of the program. */
static __always_inline __u32 func_index(void)
{
	__u64 index;
	asm volatile("%0 = 0x6b66756e63696478 ll" : "=r"(index));
	return index;
}

static __always_inline int kept(void)
{
	return !filter_tgid || (bpf_get_current_pid_tgid() >> 32) == filter_tgid;
}

static __always_inline void count_index(__u32 index)
{
	__u64 *n = bpf_map_lookup_elem(&counts, &index);
	if (n)
		(*n)++;
}

static __always_inline void start(__u32 index)
{
	struct start_key key = { .tid = (__u32)bpf_get_current_pid_tgid(), .index = index };
	__u64 now = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&starts, &key, &now, BPF_ANY)) {
		__u32 zero = 0;
		__u64 *m = bpf_map_lookup_elem(&missed, &zero);
		if (m)
			(*m)++;
	}
}

static __always_inline void finish(__u32 index)
{
	struct start_key key = { .tid = (__u32)bpf_get_current_pid_tgid(), .index = index };
	__u64 *t0 = bpf_map_lookup_elem(&starts, &key);
	if (!t0)
		return; /* entered before the probes were attached */
	__u64 ns = bpf_ktime_get_ns() - *t0;
	bpf_map_delete_elem(&starts, &key);
	struct func_hist *h = bpf_map_lookup_elem(&hists, &index);
	if (h)
		func_hist_add(h, ns);
}

SEC("kprobe")
int kfunc_count_kprobe(struct pt_regs *ctx)
{
	if (!kept())
		return 0;
	__u64 ip = ctx->ip;
	__u64 *n = bpf_map_lookup_elem(&ip_counts, &ip);
	if (n) {
		(*n)++;
	} else {
		__u64 one = 1;
		bpf_map_update_elem(&ip_counts, &ip, &one, BPF_NOEXIST);
	}
	return 0;
}

SEC("fentry")
int kfunc_count_fentry(void *ctx)
{
	if (kept())
		count_index(func_index());
	return 0;
}

SEC("kprobe")
int kfunc_enter_kprobe(void *ctx)
{
	if (kept())
		start(func_index());
	return 0;
}

SEC("kretprobe")
int kfunc_exit_kretprobe(void *ctx)
{
	if (kept())
		finish(func_index());
	return 0;
}

SEC("fentry")
int kfunc_enter_fentry(void *ctx)
{
	if (kept())
		start(func_index());
	return 0;
}

SEC("fexit")
int kfunc_exit_fexit(void *ctx)
{
	if (kept())
		finish(func_index());
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
