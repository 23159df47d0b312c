//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* fusescope ufunc: calls of a program's or a library's functions counted
 * (bcc's funccount -p with uprobes) and timed (funclatency), in kernel
 * maps; nothing per call goes to user space. One program serves every
 * function: each uprobe's link carries the function's index as its BPF
 * cookie. */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "kfunc.h"
#include "held.h"

/* -p: the process whose calls are kept; 0 keeps every process's. */
volatile const __u32 filter_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KFUNC_MAX_FUNCS);
	__type(key, __u32);
	__type(value, __u64);
} ucounts SEC(".maps");

/* A timed call in progress: when it began and, under stage_join, the
 * request its thread held then (taken 0: none). */
struct ustart {
	__u64 t0;
	__u64 taken;
	__u32 conn;
	__u32 opcode;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KFUNC_MAX_NESTED);
	__type(key, struct start_key);
	__type(value, struct ustart);
} ustarts SEC(".maps");

/* ufunc --stages: the daemon stage by function. The time of each timed
 * function's calls within a request's hold (clipped to the hold: a call
 * that begins the reply counts up to it), by connection, opcode and
 * function; index UFUNC_IN_FUNCTIONS is the hold's time inside any of
 * them (the outermost calls'), so that nesting counts once. */
volatile const __u8 stage_join = 0;

#define UFUNC_IN_FUNCTIONS 0xffffffffu

struct stage_fn_key {
	__u32 conn;
	__u32 opcode;
	__u32 index;
	__u32 pad;
};

struct stage_fn {
	__u64 calls;
	__u64 ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct stage_fn_key);
	__type(value, struct stage_fn);
} ustage SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, KFUNC_MAX_TIMED);
	__type(key, __u32);
	__type(value, struct func_hist);
} uhists SEC(".maps");

/* Go: a call being timed, by goroutine (its g, in R14 under Go's register
 * ABI): goroutines move between threads, and a Go function is timed at
 * its RET instructions, not with a return probe (which would rewrite the
 * return address on a stack the Go runtime may move). LRU: a call that
 * ends in a panic never reaches a RET. */
struct go_key {
	__u64 g;
	__u32 index;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, KFUNC_MAX_NESTED);
	__type(key, struct go_key);
	__type(value, struct ustart);
} ustarts_go SEC(".maps");

/* The registers at a uprobe, relocated by CO-RE: only the field names
 * must match the kernel's. */
struct pt_regs {
	unsigned long r14;
} __attribute__((preserve_access_index));

/* Missed: timed calls whose start found the table of calls full. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} umissed SEC(".maps");

static __always_inline int kept(void)
{
	return !filter_tgid || (bpf_get_current_pid_tgid() >> 32) == filter_tgid;
}

static __always_inline void stage_add(__u32 conn, __u32 opcode, __u32 index, __u64 ns)
{
	struct stage_fn_key k = { .conn = conn, .opcode = opcode, .index = index };
	struct stage_fn *v = bpf_map_lookup_elem(&ustage, &k);
	if (!v) {
		struct stage_fn zero = {};
		bpf_map_update_elem(&ustage, &k, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&ustage, &k);
		if (!v)
			return;
	}
	v->calls++;
	v->ns += ns;
}

/* A call begins: within its holder's hold of a request, it is that
 * request's (and the outermost such call in progress marks the time from
 * which the hold is inside a function). */
static __always_inline void enter_hold(__u64 holder, struct ustart *st)
{
	if (!stage_join)
		return;
	struct held_request *h = bpf_map_lookup_elem(&daemon_held, &holder);
	if (!h || !h->taken_ns || h->replied_ns || st->t0 < h->taken_ns)
		return;
	st->taken = h->taken_ns;
	st->conn = h->conn;
	st->opcode = h->opcode;
	if (h->depth == 0)
		h->outer_ns = st->t0;
	h->depth++;
}

/* It returns at now: its time up to the reply's start, if that came
 * first, counts for the request. */
static __always_inline void exit_hold(__u64 holder, const struct ustart *st, __u32 index, __u64 now)
{
	if (!stage_join || !st->taken)
		return;
	struct held_request *h = bpf_map_lookup_elem(&daemon_held, &holder);
	__u64 end = now;
	int same = h && h->taken_ns == st->taken;
	if (same && h->replied_ns && h->replied_ns < end)
		end = h->replied_ns;
	if (!same && h && h->taken_ns > st->t0 && h->taken_ns < end)
		end = h->taken_ns; /* the holder took another request since */
	if (end < st->t0)
		end = st->t0;
	stage_add(st->conn, st->opcode, index, end - st->t0);
	if (same && h->depth > 0 && --h->depth == 0 && end >= h->outer_ns)
		stage_add(st->conn, st->opcode, UFUNC_IN_FUNCTIONS, end - h->outer_ns);
}

SEC("uprobe")
int ufunc_count(void *ctx)
{
	if (!kept())
		return 0;
	__u32 index = bpf_get_attach_cookie(ctx);
	__u64 *n = bpf_map_lookup_elem(&ucounts, &index);
	if (n)
		(*n)++;
	return 0;
}

/* --arg: a USDT probe's hits counted per value of one of its arguments
 * (bcc's argdist -C), by probe and value. */
struct arg_key {
	__u32 index;
	__u32 pad;
	__s64 value;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct arg_key);
	__type(value, __u64);
} uargs SEC(".maps");

/* Hits whose value found the table full. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} uargs_lost SEC(".maps");

/* The cookie's upper half says where the argument is (usdt.go's
 * ArgSpec.cookie): bits 0-1 the kind (1 a register, 2 memory at a
 * register plus an offset, 3 a constant), 2-5 its size, 6 signed, 7-11
 * the register's index in struct pt_regs, 12-31 the offset or constant. */
SEC("uprobe")
int ufunc_count_arg(void *ctx)
{
	if (!kept())
		return 0;
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 index = (__u32)cookie, spec = cookie >> 32;
	__u64 *n = bpf_map_lookup_elem(&ucounts, &index);
	if (n)
		(*n)++;
	__u32 kind = spec & 3, size = (spec >> 2) & 15, reg = (spec >> 7) & 31;
	__s64 off = ((__s32)spec) >> 12;
	__u64 raw = 0, r = 0;
	if (kind == 1 || kind == 2)
		bpf_probe_read_kernel(&r, sizeof(r), (void *)((__u64)ctx + reg * 8));
	if (kind == 1)
		raw = r;
	else if (kind == 2)
		bpf_probe_read_user(&raw, size > 8 ? 8 : size, (void *)(r + off));
	else
		raw = off;
	__s64 v;
	int sgn = (spec >> 6) & 1;
	switch (size) {
	case 1:
		v = sgn ? (__s64)(__s8)raw : (__s64)(__u8)raw;
		break;
	case 2:
		v = sgn ? (__s64)(__s16)raw : (__s64)(__u16)raw;
		break;
	case 4:
		v = sgn ? (__s64)(__s32)raw : (__s64)(__u32)raw;
		break;
	default:
		v = (__s64)raw;
	}
	struct arg_key k = { .index = index, .value = v };
	__u64 *c = bpf_map_lookup_elem(&uargs, &k);
	if (c) {
		__sync_fetch_and_add(c, 1);
		return 0;
	}
	__u64 one = 1;
	if (bpf_map_update_elem(&uargs, &k, &one, BPF_NOEXIST)) {
		c = bpf_map_lookup_elem(&uargs, &k);
		if (c) {
			__sync_fetch_and_add(c, 1); /* another CPU made it first */
			return 0;
		}
		__u32 zero = 0;
		__u64 *lost = bpf_map_lookup_elem(&uargs_lost, &zero);
		if (lost)
			(*lost)++;
	}
	return 0;
}

/* A timed function's entry: counted, and its start kept by thread. */
SEC("uprobe")
int ufunc_enter(void *ctx)
{
	if (!kept())
		return 0;
	__u32 index = bpf_get_attach_cookie(ctx);
	__u64 *n = bpf_map_lookup_elem(&ucounts, &index);
	if (n)
		(*n)++;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct start_key key = { .tid = tid, .index = index };
	struct ustart st = { .t0 = bpf_ktime_get_ns() };
	enter_hold(tid, &st);
	if (bpf_map_update_elem(&ustarts, &key, &st, BPF_ANY)) {
		__u32 zero = 0;
		__u64 *m = bpf_map_lookup_elem(&umissed, &zero);
		if (m)
			(*m)++;
	}
	return 0;
}

static __always_inline void record(__u32 timed, __u64 ns)
{
	struct func_hist *h = bpf_map_lookup_elem(&uhists, &timed);
	if (h)
		func_hist_add(h, ns);
}

/* Its return: the call's time into the function's histogram. The cookie
 * is the function's index, then its index among the timed ones. */
SEC("uretprobe")
int ufunc_exit(void *ctx)
{
	if (!kept())
		return 0;
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct start_key key = { .tid = tid, .index = (__u32)(cookie >> 32) };
	struct ustart *st = bpf_map_lookup_elem(&ustarts, &key);
	if (!st)
		return 0; /* entered before the probes were attached */
	__u64 now = bpf_ktime_get_ns();
	record((__u32)cookie, now - st->t0);
	exit_hold(tid, st, key.index, now);
	bpf_map_delete_elem(&ustarts, &key);
	return 0;
}

SEC("uprobe")
int ufunc_enter_go(struct pt_regs *ctx)
{
	if (!kept())
		return 0;
	__u32 index = bpf_get_attach_cookie(ctx);
	__u64 *n = bpf_map_lookup_elem(&ucounts, &index);
	if (n)
		(*n)++;
	struct go_key key = { .g = BPF_CORE_READ(ctx, r14), .index = index };
	struct ustart st = { .t0 = bpf_ktime_get_ns() };
	enter_hold(key.g, &st);
	bpf_map_update_elem(&ustarts_go, &key, &st, BPF_ANY);
	return 0;
}

/* A RET instruction of a timed Go function (a uprobe on each). */
SEC("uprobe")
int ufunc_ret_go(struct pt_regs *ctx)
{
	if (!kept())
		return 0;
	__u64 cookie = bpf_get_attach_cookie(ctx);
	struct go_key key = { .g = BPF_CORE_READ(ctx, r14), .index = (__u32)(cookie >> 32) };
	struct ustart *st = bpf_map_lookup_elem(&ustarts_go, &key);
	if (!st)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	record((__u32)cookie, now - st->t0);
	exit_hold(key.g, st, key.index, now);
	bpf_map_delete_elem(&ustarts_go, &key);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
