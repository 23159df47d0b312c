//go:build ignore

// SPDX-License-Identifier: GPL-2.0
/* System calls of a process tree, from the raw syscall tracepoints (tp_btf:
 * no per-call argument copying). Calls are counted in kernel maps; only rare
 * calls (those that create or name file descriptors, processes and programs)
 * and long calls (waits) travel to user space, whole. */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "systrace.h"

/* Kernel types, relocated by CO-RE: only the field names must match. */
struct pt_regs {
	unsigned long di, si, dx, r10, r8, r9, orig_ax;
} __attribute__((preserve_access_index));

struct mm_struct {
	unsigned long arg_start;
	unsigned long arg_end;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
	int exit_code;
	struct mm_struct *mm;
	__u64 utime; /* ns */
	__u64 stime;
	struct task_struct *real_parent;
} __attribute__((preserve_access_index));

struct linux_binprm {
	const char *filename;
} __attribute__((preserve_access_index));

/* A run's settings: set by the loader before each run, not frozen, so that
 * programs loaded once (syscalls --serve) trace one run after another. */
volatile __u32 follow_tgid = 0; /* -p: its threads are adopted on their first call */
/* -- CMD: the first exec, once set, by a child of this process (fusescope,
 * which starts the command once the programs are attached) is the
 * command's, traced from there on; the programs then clear it. */
volatile __u32 gate_parent = 0;
volatile __u64 detail_ns = 1000000;
volatile __u64 bin_ns = 0; /* timeline bin width; 0: no timeline */
volatile __u64 t0_ns = 0;
/* --since/--until: only calls that entered in [from_ns, to_ns] (CLOCK_MONOTONIC)
 * are counted; 0: no bound. Calls sent whole are kept or dropped in user space. */
volatile __u64 from_ns = 0;
volatile __u64 to_ns = 0;

/* Set by the loader before the programs are loaded. */
volatile const __u8 empty_programs = 0; /* benchmarks: the cost of attaching alone */
volatile const __u32 nr_cpus = 1;       /* possible CPUs: the per-CPU counters an exit sums */
volatile const __u8 rare[MAX_NR] = {};     /* 1: always sent whole; RARE_IF_DUP, RARE_IF_COUNTED: see is_rare */
volatile const __u8 io_kind[MAX_NR] = {};  /* 1 + index in fd_io counters; 0: none */
volatile const __u8 peer_arg[MAX_NR] = {}; /* 1 + argument holding a transfer call's second fd (splice's fd_out); 0: none */
volatile const __u8 peer_kind[MAX_NR] = {};/* 1 + index in fd_io counters of that second fd */
volatile const __u8 category[MAX_NR] = {};
volatile const __u8 str_arg[MAX_NR] = {};  /* 1 + argument holding a path; 0: none */
volatile const __u8 addr_arg[MAX_NR] = {}; /* 1 + argument holding a sockaddr (length in the next) */
volatile const __u8 word8_arg[MAX_NR] = {};/* 1 + argument pointing at 8 bytes to copy: an int[2] of new fds, a struct pollfd */
volatile const __u8 flush_arg[MAX_NR] = {};/* 1 + argument naming an fd whose counters end here; 7: the return value */

/* Keeps the event type in BTF for bpf2go (ring buffers name no value type). */
const struct sys_event *unused_sys_event __attribute__((unused));
const struct sys_calls *unused_sys_calls __attribute__((unused));

__u32 next_tslot = 0;
__u32 next_pslot = 1; /* 0: the traced command or -p process */

/* Per-thread state in an array indexed by the thread id's low bits, not in
 * task storage or a hash: the verifier inlines array lookups, and every
 * helper call is dear on kernels with return-thunk mitigations. A slot is
 * the thread's while its tid is stored in it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TASK_SLOTS);
	__uint(map_flags, BPF_F_MMAPABLE); /* cleared in one pass between runs */
	__type(key, __u32);
	__type(value, struct task_state);
} tasks SEC(".maps");

/* The counters below are per CPU, but plain arrays with a stripe per CPU
 * (key + cpu * stripe; user space sets max_entries to nr_cpus stripes)
 * rather than per-CPU arrays: the kernel allocates a per-CPU array's
 * elements one by one, which took 210 of the 250 ms that loading took,
 * a plain array in one piece (docs/performance.md, "Live set-up"). A
 * program runs on one CPU from start to end, so a stripe has one writer
 * at a time, as a per-CPU array's copy has. */
#define STRIPE(key, n) ((key) + bpf_get_smp_processor_id() * (n))

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_TSLOTS * MAX_NR); /* times nr_cpus, set at load */
	__uint(map_flags, BPF_F_MMAPABLE);        /* read at the end in one copy */
	__type(key, __u32);
	__type(value, struct sys_stats);
} sysstats SEC(".maps");

/* Shared, not per-CPU, so that a close can move an fd's counters into its
 * event; the adds are atomic. Read by user space through mmap. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_PSLOTS * MAX_FDS * IO_KINDS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fd_io);
} fdstats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_BINS * CATEGORIES); /* times nr_cpus */
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct bin_stats);
} bins SEC(".maps");

/* Failed calls by system call and errno, of every traced thread: key nr *
 * ERRNO_SLOTS + errno_slot(errno). Only failures touch it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_NR * ERRNO_SLOTS); /* times nr_cpus */
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
} errnos SEC(".maps");

/* Bit k of word k / 64: errnos' key k has a count on some CPU, so that the
 * end reads those keys only, not the whole 640 KiB per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_NR * ERRNO_SLOTS / 64);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
} used_errnos SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, RINGBUF_BYTES);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SDROP_REASONS);
	__type(key, __u32);
	__type(value, __u64);
} sdrops SEC(".maps");

static __always_inline void drop(__u32 reason)
{
	__u64 *n = bpf_map_lookup_elem(&sdrops, &reason);
	if (n)
		(*n)++;
}

/* Counts a call that failed with errno err (a call sent whole is counted
 * by user space from its event). */
static __always_inline void count_errno(__u32 nr, __s64 err)
{
	__u32 slot = 0;
	if (err < 144)
		slot = err;
	else if (err >= 512 && err < 528)
		slot = 144 + (err - 512);
	__u32 k = nr * ERRNO_SLOTS + slot;
	__u32 key = STRIPE(k, MAX_NR * ERRNO_SLOTS);
	__u64 *n = bpf_map_lookup_elem(&errnos, &key);
	if (n && (*n)++ == 0) {
		__u32 w = k / 64;
		__u64 *bits = bpf_map_lookup_elem(&used_errnos, &w);
		if (bits)
			__sync_fetch_and_or(bits, 1ULL << (k % 64));
	}
}

/* Slots of exited threads and processes: a slot is taken from here first.
 * An exit moves the slot's counters into the ring buffer and puts it back
 * here itself, so that a fork storm never waits for the reader; only when
 * the ring buffer is full does the reader read them and put it back. The
 * last tslot, shared by the threads beyond MAX_TSLOTS, and pslot 0, the
 * traced command's, never come back. */
struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, MAX_TSLOTS);
	__type(value, __u32);
} free_tslots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, MAX_PSLOTS);
	__type(value, __u32);
} free_pslots SEC(".maps");

/* Bit nr of word tslot * NR_WORDS + nr / 64: the thread in tslot has
 * counted system call nr, so that its exit hands over only those counters.
 * Set at a counter's first call on a CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_TSLOTS * NR_WORDS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
} used_nrs SEC(".maps");

/* Bit fd of word (pslot * MAX_FDS + fd) / 64: the process in pslot has
 * counted I/O on fd, so that its exit hands over only those counters. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FD_WORDS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
} used_fds SEC(".maps");

static __always_inline __u32 new_tslot(void)
{
	__u32 s;
	if (bpf_map_pop_elem(&free_tslots, &s) == 0 && s < MAX_TSLOTS - 1)
		return s;
	s = __sync_fetch_and_add(&next_tslot, 1);
	if (s >= MAX_TSLOTS - 1) {
		if (s > MAX_TSLOTS - 1)
			drop(SDROP_TSLOTS);
		s = MAX_TSLOTS - 1;
	}
	return s;
}

static __always_inline __u32 new_pslot(void)
{
	__u32 s;
	if (bpf_map_pop_elem(&free_pslots, &s) == 0 && s > 0 && s < MAX_PSLOTS)
		return s;
	return __sync_fetch_and_add(&next_pslot, 1);
}

/* Wakes the reader only when the ring is filling up: a wakeup per event
 * (an inter-processor interrupt) cost more than the rest of the tracing of
 * an open-heavy program. The reader also polls on a short timer. */
static __always_inline __u64 wakeup_flags(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > RINGBUF_BYTES / 4 ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

/* ts is the caller's: a syscall event has its entry time already, and a
 * clock read costs as much as the rest of the event on this kind of VM. */
static __always_inline struct sys_event *reserve(__u32 kind, __u64 ts)
{
	struct sys_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	e->kind = kind;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->str_len = 0;
	e->flushed_fd = -1;
	e->flushed_mask = 0;
	e->handed_over = 0;
	e->ts = ts;
	e->dur = 0;
	e->ret = 0;
	e->nr = 0;
	e->child_pid = 0;
	e->child_tid = 0;
	e->exit_code = 0;
	return e;
}

/* The key of fd's first counter in fdstats, or -1 when it has none. */
static __always_inline __s64 fd_key(__u32 pslot, __s64 fd)
{
	if (fd < 0 || fd >= MAX_FDS || pslot >= MAX_PSLOTS)
		return -1;
	return (pslot * MAX_FDS + (__u32)fd) * IO_KINDS;
}

/* Moves fd's counters into e: what the fd did under its previous name. */
static __always_inline void flush_fd(struct sys_event *e, __u32 pslot, __s64 fd)
{
	__s64 base = fd_key(pslot, fd);
	if (base < 0)
		return;
	e->flushed_fd = fd;
	for (__u32 k = 0; k < IO_KINDS; k++) {
		__u32 key = base + k;
		struct fd_io *f = bpf_map_lookup_elem(&fdstats, &key);
		/* The usual case: nothing to move, and nothing written, which
		 * keeps the event's untouched cache lines out of the store. */
		if (!f || !f->calls)
			continue;
		struct fd_io *o = &e->flushed[k];
		e->flushed_mask |= 1 << k;
		/* Subtracting what was read keeps adds racing with us. */
		o->calls = f->calls;
		o->errors = f->errors;
		o->bytes = f->bytes;
		o->ns = f->ns;
		__sync_fetch_and_add(&f->calls, -o->calls);
		__sync_fetch_and_add(&f->errors, -o->errors);
		__sync_fetch_and_add(&f->bytes, -o->bytes);
		__sync_fetch_and_add(&f->ns, -o->ns);
	}
}

/* Argument i of e (0-based). The empty asm hides what the compiler knows of
 * i, so that the bounds check stays right before the access, where the
 * verifier needs it. */
static __always_inline __u64 arg(struct sys_event *e, __u32 i)
{
	asm volatile("" : "+r"(i));
	if (i > 5)
		return 0;
	return e->args[i];
}

/* Whether any of the IO_KINDS counters from key base has a call. */
static __always_inline int has_counts(__s64 base)
{
	for (__u32 k = 0; k < IO_KINDS; k++) {
		__u32 key = base + k;
		struct fd_io *f = bpf_map_lookup_elem(&fdstats, &key);
		if (f && f->calls)
			return 1;
	}
	return 0;
}

/* Whether call nr is sent whole whatever its length. fcntl only when it
 * duplicates an fd (find dups every directory it opens), not for the flag
 * reads and writes that make most of its calls; close only when its fd has
 * counters to hand over (find closes every directory it only listed). */
static __always_inline int is_rare(struct pt_regs *regs, __u32 nr, __u32 pslot, long ret)
{
	__u8 r = rare[nr];
	if (r == RARE_IF_MISSING)
		return ret == -2; /* ENOENT */
	if (r == RARE_IF_DUP) {
		__u64 cmd = regs->si;
		return cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC;
	}
	if (r == RARE_IF_COUNTED) {
		__s64 base = fd_key(pslot, (int)regs->di);
		return base >= 0 && has_counts(base);
	}
	return r;
}

/* Adds one call to the fd counters at key. */
static __always_inline void count_io(__u32 key, __u64 dur, long ret)
{
	struct fd_io *f = bpf_map_lookup_elem(&fdstats, &key);
	if (!f)
		return;
	if (__sync_fetch_and_add(&f->calls, 1) == 0) {
		__u32 fdi = key / IO_KINDS, w = fdi / 64;
		__u64 *bits = bpf_map_lookup_elem(&used_fds, &w);
		if (bits)
			__sync_fetch_and_or(bits, 1ULL << (fdi % 64));
	}
	__sync_fetch_and_add(&f->ns, dur);
	if (ret < 0)
		__sync_fetch_and_add(&f->errors, 1);
	else
		__sync_fetch_and_add(&f->bytes, ret);
}

/* rare: is_rare's answer; a call sent only for its length creates no fd. */
static __always_inline int send_call(struct pt_regs *regs, struct task_state *s, __u32 nr, __u64 start, __u64 dur, long ret, int rare)
{
	struct sys_event *e = reserve(SEV_SYSCALL, start);
	if (!e) {
		drop(SDROP_RINGBUF);
		return 0;
	}
	e->dur = dur;
	e->ret = ret;
	e->nr = nr;
	e->tslot = s->tslot;
	e->pslot = s->pslot;
	e->args[0] = regs->di;
	e->args[1] = regs->si;
	e->args[2] = regs->dx;
	e->args[3] = regs->r10;
	e->args[4] = regs->r8;
	e->args[5] = regs->r9;

	__u8 a = str_arg[nr];
	if (a >= 1 && a <= 6) {
		long n = bpf_probe_read_user_str(e->str, sizeof(e->str), (void *)arg(e, a - 1));
		e->str_len = n > 0 ? n : 0;
	}
	a = addr_arg[nr];
	if (a >= 1 && a <= 5 && arg(e, a - 1)) {
		__u64 len = arg(e, a);
		if (nr == 43 || nr == 288) { /* accept, accept4: the length is an in/out pointer */
			__u32 l = 0;
			bpf_probe_read_user(&l, sizeof(l), (void *)len);
			len = l;
		}
		if (len > 128)
			len = 128;
		if (len > 0 && bpf_probe_read_user(e->str, len & 255, (void *)arg(e, a - 1)) == 0)
			e->str_len = len;
	}
	a = word8_arg[nr];
	if (a >= 1 && a <= 6 && arg(e, a - 1)) {
		if (bpf_probe_read_user(e->str, 8, (void *)arg(e, a - 1)) == 0)
			e->str_len = 8;
	}
	a = flush_arg[nr];
	if (a >= 1 && a <= 6)
		flush_fd(e, s->pslot, (__s64)(int)arg(e, a - 1));
	else if (a == 7 && ret >= 0 && rare)
		flush_fd(e, s->pslot, ret);
	bpf_ringbuf_submit(e, wakeup_flags());
	return 1;
}

/* The slot of thread tid, traced or not (0 when tid's slot is out of range). */
static __always_inline struct task_state *slot_of(__u32 tid)
{
	__u32 key = tid & (TASK_SLOTS - 1);
	return bpf_map_lookup_elem(&tasks, &key);
}

/* The calling thread's state, or 0 when it is not traced. */
static __always_inline struct task_state *current_state(__u32 tid)
{
	struct task_state *s = slot_of(tid);
	return s && s->tid == tid ? s : 0;
}

/* Claims tid's slot for a newly traced thread. */
static __always_inline struct task_state *claim(__u32 tid)
{
	struct task_state *s = slot_of(tid);
	if (!s)
		return 0;
	if (s->tid && s->tid != tid)
		drop(SDROP_NO_STORAGE); /* another traced thread shares the slot: it loses it */
	s->tid = tid;
	s->start_ns = 0;
	return s;
}

/* A thread of the -p process, seen for the first time. */
static __always_inline struct task_state *adopt(__u32 tid)
{
	struct task_state *s = claim(tid);
	if (!s)
		return 0;
	s->tslot = new_tslot();
	s->pslot = 0;
	struct sys_event *e = reserve(SEV_ADOPT, bpf_ktime_get_ns());
	if (e) {
		e->tslot = s->tslot;
		e->pslot = 0;
		bpf_ringbuf_submit(e, wakeup_flags());
	} else {
		drop(SDROP_RINGBUF);
	}
	return s;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long nr)
{
	if (empty_programs)
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tid = task->pid;
	struct task_state *s = current_state(tid);
	if (!s) {
		if (!follow_tgid || task->tgid != follow_tgid)
			return 0;
		s = adopt(tid);
		if (!s)
			return 0;
	}
	s->nr = nr;
	s->start_ns = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	if (empty_programs)
		return 0;
	struct task_state *s = current_state(bpf_get_current_task_btf()->pid);
	if (!s)
		return 0;
	__u64 start = s->start_ns;
	if (!start)
		return 0; /* entered before it was traced */
	s->start_ns = 0;
	__u64 dur = bpf_ktime_get_ns() - start;
	__u32 nr = s->nr;
	if (nr >= MAX_NR) {
		drop(SDROP_NR_RANGE);
		return 0;
	}
	int r = is_rare(regs, nr, s->pslot, ret);
	if ((r || dur >= detail_ns) && send_call(regs, s, nr, start, dur, ret, r))
		return 0;
	if ((from_ns && start < from_ns) || (to_ns && start > to_ns))
		return 0;

	if (ret < 0 && ret > -4096)
		count_errno(nr, -ret);

	__u8 k = io_kind[nr];
	__s64 base = k && k <= IO_KINDS ? fd_key(s->pslot, (int)regs->di) : -1;
	if (base >= 0) {
		count_io(base + k - 1, dur, ret);
		/* A transfer call (splice, sendfile...) moves the bytes to or
		 * from a second fd, counted apart: not as calls of its own. */
		__u8 pa = peer_arg[nr], pk = peer_kind[nr];
		if (pa && pk && pk <= IO_KINDS) {
			__s64 pbase = fd_key(s->pslot, (int)(pa == 2 ? regs->si : regs->dx));
			if (pbase >= 0)
				count_io(pbase + pk - 1, dur, ret);
			else
				drop(SDROP_FD_RANGE);
		}
	} else {
		if (k)
			drop(SDROP_FD_RANGE);
		__u32 key = STRIPE(s->tslot * MAX_NR + nr, MAX_TSLOTS * MAX_NR);
		struct sys_stats *st = bpf_map_lookup_elem(&sysstats, &key);
		if (st) {
			if (st->calls++ == 0) {
				__u32 w = s->tslot * NR_WORDS + nr / 64;
				__u64 *bits = bpf_map_lookup_elem(&used_nrs, &w);
				if (bits)
					__sync_fetch_and_or(bits, 1ULL << (nr % 64));
			}
			st->ns += dur;
			if (ret < 0 && ret > -4096)
				st->errors++;
		}
	}
	if (bin_ns) {
		__u64 b = (start - t0_ns) / bin_ns;
		if (b >= MAX_BINS) {
			drop(SDROP_BINS);
			b = MAX_BINS - 1;
		}
		__u32 key = STRIPE(b * CATEGORIES + (category[nr] & (CATEGORIES - 1)), MAX_BINS * CATEGORIES);
		struct bin_stats *bs = bpf_map_lookup_elem(&bins, &key);
		if (bs) {
			bs->calls++;
			bs->ns += dur;
		}
	}
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork, struct task_struct *parent, struct task_struct *child)
{
	struct task_state *s = current_state((__u32)bpf_get_current_pid_tgid());
	if (!s)
		return 0;
	int tgid = child->tgid, pid = child->pid;
	__u32 ppslot = s->pslot;
	struct task_state *c = claim(pid);
	if (!c)
		return 0;
	/* Its return from clone belongs to the parent's call: start_ns is 0. */
	c->tslot = new_tslot();
	c->pslot = tgid == parent->tgid ? ppslot : new_pslot();
	struct sys_event *e = reserve(SEV_FORK, bpf_ktime_get_ns());
	if (!e) {
		drop(SDROP_RINGBUF);
		return 0;
	}
	e->child_pid = tgid;
	e->child_tid = pid;
	e->tslot = c->tslot;
	e->pslot = c->pslot;
	bpf_ringbuf_submit(e, wakeup_flags());
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(sched_process_exec, struct task_struct *p, int old_pid, struct linux_binprm *bprm)
{
	__u32 tid = bpf_get_current_pid_tgid();
	struct task_state *s = current_state(tid);
	if (!s) {
		if (!gate_parent || p->real_parent->tgid != gate_parent)
			return 0;
		gate_parent = 0;
		s = claim(tid);
		if (!s)
			return 0;
		s->tslot = new_tslot();
		s->pslot = 0;
		s->nr = 59;                       /* the command's execve */
		s->start_ns = bpf_ktime_get_ns(); /* which returns from here */
	}
	struct sys_event *e = reserve(SEV_EXEC, bpf_ktime_get_ns());
	if (!e) {
		drop(SDROP_RINGBUF);
		return 0;
	}
	e->tslot = s->tslot;
	e->pslot = s->pslot;
	e->child_tid = old_pid;
	long n = bpf_probe_read_kernel_str(e->str, sizeof(e->str), bprm->filename);
	e->str_len = n > 0 ? n : 0;
	/* The new program's arguments, NUL-separated as the kernel laid them
	 * out on its stack, in place of the fd counters an exec never carries
	 * (flushed_mask 0): what make's cc lines or a shim's script need to be
	 * told apart. args[0]: their length, cut at ARGV_LEN. */
	struct mm_struct *mm = p->mm;
	e->args[0] = 0;
	if (mm) {
		unsigned long start = mm->arg_start, end = mm->arg_end;
		__u32 len = end > start ? end - start : 0;
		if (len > ARGV_LEN)
			len = ARGV_LEN;
		if (bpf_probe_read_user(e->flushed, len & (2 * ARGV_LEN - 1), (void *)start) == 0)
			e->args[0] = len;
	}
	bpf_ringbuf_submit(e, wakeup_flags());
	return 0;
}

/* What an exit hands over: bpf_loop's context. */
struct handover {
	__u32 tslot;
	__u32 pslot;
	__u64 ts;
	__u32 key;    /* sysstats key of the call being summed */
	__u32 failed; /* the ring buffer was full: the rest stays for the reader */
	struct sys_stats sum;
};

/* bpf_loop callback over the CPUs: moves one CPU's counters of h->key into
 * h->sum. The thread is dead, so nothing adds to them any more. */
static long sum_cpu(__u64 cpu, void *data)
{
	struct handover *h = data;
	__u32 key = h->key + cpu * (MAX_TSLOTS * MAX_NR);
	struct sys_stats *st = bpf_map_lookup_elem(&sysstats, &key);
	if (!st)
		return 1;
	h->sum.calls += st->calls;
	h->sum.errors += st->errors;
	h->sum.ns += st->ns;
	st->calls = 0;
	st->errors = 0;
	st->ns = 0;
	return 0;
}

/* bpf_loop callback over system call numbers: hands over the exited
 * thread's counters of nr, if it made that call. */
static long hand_over_calls(__u64 i, void *data)
{
	struct handover *h = data;
	__u32 nr = i;
	__u32 w = h->tslot * NR_WORDS + nr / 64;
	__u64 *bits = bpf_map_lookup_elem(&used_nrs, &w);
	if (!bits || !(*bits & (1ULL << (nr % 64))))
		return 0;
	/* Reserved first: a full ring buffer leaves the counters in place. */
	struct sys_calls *c = bpf_ringbuf_reserve(&events, sizeof(*c), 0);
	if (!c) {
		h->failed = 1;
		return 1;
	}
	h->key = h->tslot * MAX_NR + nr;
	h->sum.calls = 0;
	h->sum.errors = 0;
	h->sum.ns = 0;
	bpf_loop(nr_cpus, sum_cpu, h, 0);
	__u64 id = bpf_get_current_pid_tgid();
	c->kind = SEV_CALLS;
	c->nr = nr;
	c->pid = id >> 32;
	c->tid = (__u32)id;
	c->calls = h->sum.calls;
	c->errors = h->sum.errors;
	c->ns = h->sum.ns;
	bpf_ringbuf_submit(c, BPF_RB_NO_WAKEUP);
	return 0;
}

/* bpf_loop callback over fds: hands over the dead process's counters of
 * fd, if it has any left (a close hands them over already). */
static long hand_over_fd(__u64 i, void *data)
{
	struct handover *h = data;
	__u32 fd = i;
	__u32 w = (h->pslot * MAX_FDS + fd) / 64;
	__u64 *bits = bpf_map_lookup_elem(&used_fds, &w);
	if (!bits || !(*bits & (1ULL << (fd % 64))))
		return 0;
	__s64 base = fd_key(h->pslot, fd);
	if (base < 0 || !has_counts(base))
		return 0;
	struct sys_event *e = reserve(SEV_FD_IO, h->ts);
	if (!e) {
		h->failed = 1;
		return 1;
	}
	e->tslot = h->tslot;
	e->pslot = h->pslot;
	flush_fd(e, h->pslot, fd);
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}

/* Clears n words of a bitmap from word first. */
static __always_inline void clear_words(void *map, __u32 first, __u32 n)
{
	for (__u32 i = 0; i < n; i++) {
		__u32 w = first + i;
		__u64 *bits = bpf_map_lookup_elem(map, &w);
		if (bits)
			*bits = 0;
	}
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit, struct task_struct *p, _Bool group_dead)
{
	__u32 tid = bpf_get_current_pid_tgid();
	struct task_state *s = current_state(tid);
	if (!s)
		return 0;
	s->tid = 0; /* the slot is free: the tid may be reused by any task */
	struct handover h = {.tslot = s->tslot, .pslot = s->pslot, .ts = bpf_ktime_get_ns()};
	__u32 handed = 0;
	if (h.tslot < MAX_TSLOTS - 1) {
		bpf_loop(MAX_NR, hand_over_calls, &h, 0);
		if (!h.failed) {
			clear_words(&used_nrs, h.tslot * NR_WORDS, NR_WORDS);
			handed |= HANDED_TSLOT;
		}
	}
	/* group_dead: the process's last thread, so its fd counters are final. */
	if (group_dead && h.pslot > 0 && h.pslot < MAX_PSLOTS) {
		h.failed = 0;
		bpf_loop(MAX_FDS, hand_over_fd, &h, 0);
		if (!h.failed) {
			clear_words(&used_fds, h.pslot * MAX_FDS / 64, MAX_FDS / 64);
			handed |= HANDED_PSLOT;
		}
	}
	/* Reserved before the slots go back, so that the reader has this exit
	 * before the fork of any task that reuses them. */
	struct sys_event *e = reserve(SEV_EXIT, h.ts);
	if (handed & HANDED_TSLOT)
		bpf_map_push_elem(&free_tslots, &h.tslot, BPF_ANY);
	if (handed & HANDED_PSLOT)
		bpf_map_push_elem(&free_pslots, &h.pslot, BPF_ANY);
	if (!e) {
		drop(SDROP_RINGBUF);
		return 0;
	}
	e->tslot = h.tslot;
	e->pslot = h.pslot;
	e->exit_code = p->exit_code;
	e->ret = group_dead;
	e->args[0] = p->utime; /* the thread's CPU time, user and system */
	e->args[1] = p->stime;
	e->handed_over = handed;
	bpf_ringbuf_submit(e, wakeup_flags());
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
