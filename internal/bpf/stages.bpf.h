/* SPDX-License-Identifier: GPL-2.0 */
/* --stages: a request's time split into queue (sent -> taken by the daemon
 * from /dev/fuse), daemon (taken -> the daemon begins writing its reply)
 * and reply (-> the request ends in the kernel), for any daemon, from the
 * per-call system-call tracepoints of the daemon's threads. Included by
 * fusereq.bpf.c, whose in-flight table the stamps go into.
 *
 * How an fd is tied to a connection: an fd of /dev/fuse (the misc device
 * 10:229) has a struct fuse_dev as its file's private_data (its low bit a
 * flag since 6.18's synchronous INIT), and fuse_dev->fc is the connection,
 * whose dev is the number the tracepoints carry. libfuse's clone_fd opens
 * /dev/fuse again per thread and ties the new fd to the connection with
 * FUSE_DEV_IOC_CLONE: another fuse_dev, the same fuse_conn. So each call's
 * fd is resolved in the kernel, per call, and clones need no bookkeeping. */

/* The per-call tracepoints' records: the arguments, each in 8 bytes. */
struct syscall_enter {
	__u64 common;
	__s32 nr;
	__u32 pad;
	__u64 args[6];
};

struct syscall_exit {
	__u64 common;
	__s32 nr;
	__u32 pad;
	__s64 ret;
};

/* The kernel's task, files and /dev/fuse device (vmlinux.h), relocated by
 * CO-RE; the device's connection by dev_conn (kernel.bpf.h). The
 * registers of a raw system-call tracepoint: */
struct iovec___user {
	__u64 base;
	__u64 len;
};

#define FUSE_DEV_RDEV ((10u << 20) | 229u) /* MKDEV(MISC_MAJOR, FUSE_MINOR) */
#define S_IFMT_ 00170000
#define S_IFIFO_ 0010000
#define FUSE_IN_HEADER_LEN 40
#define FUSE_OUT_HEADER_LEN 16

#include "held.h"

/* Benchmarks: every stage program returns at once (the floor of attaching
 * them). */
volatile const __u8 stages_empty = 0;

/* The processes holding a traced connection's /dev/fuse, by tgid: a bitmap
 * in an array, so that every other process's calls cost one inlined
 * lookup. User space adds daemons it finds later. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DAEMON_BITMAP_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} daemon_tgids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DAEMON_THREADS);
	__type(key, __u32);
	__type(value, struct daemon_thread);
} daemon_threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_STAGE_KEYS);
	__type(key, struct stats_key);
	__type(value, struct stage_stats);
} stage_table SEC(".maps");

static const struct stage_stats zero_stage_stats;

/* The same by (connection mod FINE_CONNS, opcode), one array per half: an
 * inlined per-CPU array lookup where the table's is a helper call hashing
 * the key (a third of what the stages' accounting cost a request). A
 * (connection, opcode) whose index another connection holds on this CPU
 * goes to stage_table, as the totals' fast array does. */
#define STAGE_FAST(name)                                               \
	struct {                                                       \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);               \
		__uint(max_entries, FINE_CONNS * FAST_OPS);            \
		__type(key, __u32);                                    \
		__type(value, struct stage_stats);                     \
	} name SEC(".maps");
STAGE_FAST(stage_fast0)
STAGE_FAST(stage_fast1)

/* Benchmarks: the end program splits each request and counts nothing (the
 * floor of the stages' accounting). */
volatile const __u8 stages_uncounted = 0;

/* The stages' sub-buckets (fine_fast's, per stage), one array per half:
 * their quantiles as precise as the totals'. */
FINE_ARRAY(stage_fine0, FINE_CONNS * FAST_OPS * STAGES)
FINE_ARRAY(stage_fine1, FINE_CONNS * FAST_OPS * STAGES)

static __always_inline void count_stage_fine(__u32 conn, __u32 opcode, __u32 stage, __u64 d, __u32 octave, __u32 half)
{
	if (!fine_octave(opcode, octave))
		return;
	__u32 idx = ((conn & (FINE_CONNS - 1)) * FAST_OPS + opcode) * STAGES + stage;
	if (half)
		count_fine_in(bpf_map_lookup_elem(&stage_fine1, &idx), conn, d, octave);
	else
		count_fine_in(bpf_map_lookup_elem(&stage_fine0, &idx), conn, d, octave);
}

/* The calling thread's state if its process is a watched daemon. */
static __always_inline struct daemon_thread *daemon_thread(int claim)
{
	if (stages_empty)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	__u32 word = tgid >> 6;
	__u64 *bits = bpf_map_lookup_elem(&daemon_tgids, &word);
	if (!bits || !(*bits & (1ULL << (tgid & 63))))
		return 0;
	__u32 idx = tid & (DAEMON_THREADS - 1);
	struct daemon_thread *t = bpf_map_lookup_elem(&daemon_threads, &idx);
	if (!t)
		return 0;
	if (t->tid != tid) {
		if (!claim)
			return 0;
		__builtin_memset(t, 0, sizeof(*t));
		t->tid = tid;
	}
	return t;
}

/* bpf_rdonly_cast (a kfunc the verifier inlines): a kernel address read
 * as a number becomes a pointer of a type the program may load through
 * directly, as it may through the current task's. Those loads are plain
 * loads with an exception table entry, where each bpf_probe_read_kernel
 * was a helper call (the chain from the task to the connection took ten). */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;
#define kernel_cast(ptr, type) ((type *)bpf_rdonly_cast((void *)(ptr), bpf_core_type_id_kernel(type)))

static __always_inline struct file *fd_file(int fd)
{
	struct task_struct *task = (void *)bpf_get_current_task_btf();
	struct fdtable *fdt = task->files->fdt;
	if (fd < 0 || (unsigned int)fd >= fdt->max_fds)
		return 0;
	/* An element of the array of pointers: the one read a helper makes. */
	struct file *f = 0;
	bpf_probe_read_kernel(&f, sizeof(f), &fdt->fd[fd]);
	if (!f)
		return 0;
	return kernel_cast(f, struct file);
}

/* The connection of an fd of /dev/fuse, in *conn; 0 if it is none. */
static __always_inline int fuse_fd_conn(int fd, __u32 *conn)
{
	struct file *f = fd_file(fd);
	if (!f || f->f_inode->i_rdev != FUSE_DEV_RDEV)
		return 0;
	__u64 fud = (__u64)f->private_data & ~1ULL;
	if (fud < 4096)
		return 0; /* not yet tied to a connection */
	*conn = dev_conn(kernel_cast(fud, struct fuse_dev));
	return 1;
}

/* The same through the thread's cache. An fd closed and reused for another
 * file would pass for /dev/fuse, so what is read through it must still name
 * a request in flight on that connection, with its opcode and length. */
static __always_inline int thread_fd_conn(struct daemon_thread *t, int fd, __u32 *conn)
{
	if (t->fuse_fd == (__u32)fd + 1) {
		*conn = t->fuse_conn;
		return 1;
	}
	if (!fuse_fd_conn(fd, conn))
		return 0;
	t->fuse_fd = (__u32)fd + 1;
	t->fuse_conn = *conn;
	return 1;
}

/* The pipe an fd is an end of, by its inode number; 0 if it is no pipe. */
static __always_inline __u64 fd_pipe(int fd)
{
	struct file *f = fd_file(fd);
	if (!f || (f->f_inode->i_mode & S_IFMT_) != S_IFIFO_)
		return 0;
	return f->f_inode->i_ino;
}

/* A reply header written into a pipe, by the pipe, for the splice that
 * carries it to /dev/fuse: the process may splice it from another thread
 * (go-fuse does, ~0.7% of its READ replies), and the splice reads the
 * pipe's other end, so neither the thread nor the fd finds it. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u64);
} pipe_headers SEC(".maps");

/* The in-flight slot of (conn, unique), as on_send claimed it. */
static __always_inline struct inflight_slot *find_slot(__u32 conn, __u64 unique)
{
#pragma unroll
	for (__u32 probe = 0; probe < 2; probe++) {
		__u32 idx = slot_index(conn, unique, 0, probe);
		struct inflight_slot *s = bpf_map_lookup_elem(&inflight, &idx);
		if (s && s->unique == unique && s->conn == conn && s->start_ns)
			return s;
	}
	return 0;
}

/* Under key_by_address (6.12 to 6.17) the slot cannot be found by (conn,
 * id), which the send did not know: the stamps go into a table of their
 * own, by (conn, id), which the end takes them from. An LRU: stamps of a
 * request filtered out at its send are never taken. */
struct stamp_key {
	__u32 conn;
	__u32 pad;
	__u64 unique;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct stamp_key);
	__type(value, struct inflight_slot);
} stage_stamps SEC(".maps");

static __always_inline struct inflight_slot *find_stamps(__u32 conn, __u64 unique, __u32 opcode, int create)
{
	struct stamp_key k = { .conn = conn, .unique = unique };
	struct inflight_slot *s = bpf_map_lookup_elem(&stage_stamps, &k);
	if (s || !create)
		return s;
	struct inflight_slot fresh = { .unique = unique, .start_ns = 1, .conn = conn, .opcode = opcode };
	bpf_map_update_elem(&stage_stamps, &k, &fresh, BPF_NOEXIST);
	return bpf_map_lookup_elem(&stage_stamps, &k);
}

static __always_inline void take_stamps(__u32 conn, __u64 unique, __u64 *taken, __u64 *replied)
{
	struct stamp_key k = { .conn = conn, .unique = unique };
	struct inflight_slot *s = bpf_map_lookup_elem(&stage_stamps, &k);
	if (!s)
		return;
	*taken = s->taken_ns;
	*replied = s->replied_ns;
	bpf_map_delete_elem(&stage_stamps, &k);
}

/* ufunc --stages: each daemon thread's request, in daemon_held (held.h).
 * Off, the code is removed at load. */
volatile const __u8 stage_holds = 0;

/* The Go daemons, by tgid: their requests are held by goroutine, since a
 * goroutine that read one may run its handler on another thread. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u8);
} held_by_goroutine SEC(".maps");

/* Who holds what the current thread reads or answers: its goroutine (R14
 * holds g at a Go program's system call) or the thread. */
static __always_inline __u64 holder(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	if (bpf_map_lookup_elem(&held_by_goroutine, &tgid)) {
		struct pt_regs *regs = (void *)bpf_task_pt_regs(bpf_get_current_task_btf());
		return regs->r14;
	}
	return (__u32)id;
}

static __always_inline void hold(__u32 conn, __u32 opcode, __u64 unique, __u64 ts)
{
	__u64 k = holder();
	struct held_request h = { .unique = unique, .taken_ns = ts, .conn = conn, .opcode = opcode };
	bpf_map_update_elem(&daemon_held, &k, &h, BPF_ANY);
}

static __always_inline void hold_replied(__u32 conn, __u64 unique, __u64 ts)
{
	__u64 k = holder();
	struct held_request *h = bpf_map_lookup_elem(&daemon_held, &k);
	if (h && h->unique == unique && h->conn == conn && !h->replied_ns)
		h->replied_ns = ts;
}

/* The FORGET and BATCH_FORGET requests the daemons read, per connection,
 * and the nodes they forget: the kernel queues them apart from the other
 * requests, and no fuse tracepoint sees them. */
struct forget_count {
	__u64 requests;
	__u64 nodes;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct forget_count);
} forgets SEC(".maps");

static __always_inline void count_forget(__u32 conn, __u64 buf, __u32 opcode)
{
	__u32 nodes = 1;
	/* fuse_batch_forget_in's count follows the header. */
	if (opcode == FUSE_BATCH_FORGET && bpf_probe_read_user(&nodes, sizeof(nodes), (void *)(buf + FUSE_IN_HEADER_LEN)))
		return;
	struct forget_count *c = bpf_map_lookup_elem(&forgets, &conn);
	if (!c) {
		struct forget_count zero = {};
		bpf_map_update_elem(&forgets, &conn, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&forgets, &conn);
	}
	if (c) {
		__sync_fetch_and_add(&c->requests, 1);
		__sync_fetch_and_add(&c->nodes, nodes);
	}
}

/* A daemon thread read a request at ts: its header is at buf. */
static __always_inline void mark_taken(__u32 conn, __u64 buf, __u64 ts, __u32 want_len)
{
	struct fuse_in_header h;
	if (bpf_probe_read_user(&h, sizeof(h), (void *)buf))
		return;
	if (want_len && h.len != want_len)
		return;
	if (h.opcode == FUSE_FORGET || h.opcode == FUSE_BATCH_FORGET) {
		count_forget(conn, buf, h.opcode);
		return;
	}
	struct inflight_slot *s = key_by_address ? find_stamps(conn, h.unique, h.opcode, 1) : find_slot(conn, h.unique);
	if (s && s->opcode == h.opcode && !s->taken_ns) {
		s->node = h.nodeid;
		s->taken_ns = ts;
		if (stage_holds)
			hold(conn, h.opcode, h.unique, ts);
	}
}

/* Where the kernel has fuse:fuse_request_sent (7.3), it fires when a
 * daemon takes the request, from /dev/fuse or its io_uring ring: the end
 * of the queue stage, with no program on the daemons' reads. */
SEC("tp_btf/fuse_request_sent")
int BPF_PROG(stage_sent, struct fuse_req *req)
{
	struct inflight_slot *s = find_slot(req_conn(req), req->in.h.unique);
	if (s && !s->taken_ns) {
		s->node = req->in.h.nodeid;
		s->taken_ns = bpf_ktime_get_ns();
		if (stage_holds)
			hold(s->conn, s->opcode, s->unique, s->taken_ns);
	}
	return 0;
}

static __always_inline __u64 iov_base(__u64 iov, __u64 *len)
{
	struct iovec___user v = {};
	if (bpf_probe_read_user(&v, sizeof(v), (void *)iov))
		return 0;
	if (len)
		*len = v.len;
	return v.base;
}

/* The request a reply answers, if it is in flight. */
static __always_inline struct inflight_slot *mark_replied(__u32 conn, __u64 unique, __u64 ts)
{
	if (!unique)
		return 0; /* a notification, not a reply */
	struct inflight_slot *s = key_by_address ? find_stamps(conn, unique, 0, 0) : find_slot(conn, unique);
	if (s && !s->replied_ns)
		s->replied_ns = ts;
	if (stage_holds)
		hold_replied(conn, unique, ts);
	return s;
}

/* --stages with names (--slower, --files): the entries of a READDIRPLUS
 * reply name their nodes, which the kernel then uses without a LOOKUP.
 * Their names are read from the reply the daemon writes: fuse_direntplus
 * records, each a fuse_entry_out (the node id first) and a fuse_dirent
 * (the name's length at 16, the name at 24), 8-byte aligned. */
volatile const __u8 stage_names = 0;

#define FUSE_READDIRPLUS 44
#define DIRENTPLUS_NAME 152 /* sizeof(fuse_entry_out) + the name's offset in fuse_dirent */
#define MAX_DIRENTS 64      /* entries named per reply */

static __always_inline void learn_dirents(__u32 conn, __u64 dir, __u64 buf, __u64 len)
{
	__u64 off = 0;
	for (int i = 0; i < MAX_DIRENTS; i++) {
		if (off + DIRENTPLUS_NAME > len)
			return;
		__u64 node = 0;
		__u32 namelen = 0;
		if (bpf_probe_read_user(&node, sizeof(node), (void *)(buf + off)) ||
		    bpf_probe_read_user(&namelen, sizeof(namelen), (void *)(buf + off + 144)))
			return;
		if (namelen == 0 || namelen > 255 || off + DIRENTPLUS_NAME + namelen > len)
			return;
		char dot[3] = {};
		bpf_probe_read_user(dot, namelen < 3 ? namelen : 2, (void *)(buf + off + DIRENTPLUS_NAME));
		int dots = (namelen == 1 && dot[0] == '.') || (namelen == 2 && dot[0] == '.' && dot[1] == '.');
		struct node_key k = { .conn = conn, .node = node };
		__u64 *sent = node ? bpf_map_lookup_elem(&names_sent, &k) : 0;
		if (node && !dots && !(sent && *sent == dir)) {
			struct node_name *e = bpf_ringbuf_reserve(&node_names, sizeof(*e), 0);
			if (!e)
				return;
			e->conn = conn;
			e->node = node;
			e->parent = dir;
			if (bpf_probe_read_user(e->name, namelen & 255, (void *)(buf + off + DIRENTPLUS_NAME))) {
				bpf_ringbuf_discard(e, 0);
				return;
			}
			e->name[namelen & 255] = 0;
			bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
			bpf_map_update_elem(&names_sent, &k, &dir, BPF_ANY);
		}
		off += (DIRENTPLUS_NAME + namelen + 7) & ~7ULL;
	}
}

/* Opens the daemon answered with FOPEN_PASSTHROUGH, per connection: their
 * files' reads and writes go to the backing file in the kernel, and are no
 * FUSE requests at all. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} passthrough_opens SEC(".maps");

#define FUSE_OPEN 14
#define FUSE_CREATE 35
#define FOPEN_PASSTHROUGH (1u << 7)
#define FUSE_ENTRY_OUT_LEN 128

/* A successful OPEN or CREATE reply: its fuse_open_out's open_flags, after
 * the header in the same buffer (write), or in the next iovec (writev, as
 * libfuse and go-fuse send replies). */
static __always_inline void count_passthrough(__u32 conn, __u32 opcode, __u64 buf, __u64 len, __u64 iov, __u64 iovcnt)
{
	__u64 payload = 0;
	if (len > FUSE_OUT_HEADER_LEN)
		payload = buf + FUSE_OUT_HEADER_LEN;
	else if (iov && iovcnt >= 2)
		payload = iov_base(iov + sizeof(struct iovec___user), 0);
	if (!payload)
		return;
	if (opcode == FUSE_CREATE)
		payload += FUSE_ENTRY_OUT_LEN;
	__u32 flags = 0;
	if (bpf_probe_read_user(&flags, sizeof(flags), (void *)(payload + 8)) || !(flags & FOPEN_PASSTHROUGH))
		return;
	__u64 *n = bpf_map_lookup_elem(&passthrough_opens, &conn);
	if (!n) {
		__u64 zero = 0;
		bpf_map_update_elem(&passthrough_opens, &conn, &zero, BPF_NOEXIST);
		n = bpf_map_lookup_elem(&passthrough_opens, &conn);
	}
	if (n)
		__sync_fetch_and_add(n, 1);
}


/* A request read from /dev/fuse is taken now; a read from a pipe right
 * after a splice from /dev/fuse (libfuse's splice mode reads the header
 * back out of its pipe) names the request that splice took. */
static __always_inline int on_read_exit(struct syscall_exit *ctx, int vector)
{
	if (ctx->ret < FUSE_IN_HEADER_LEN)
		return 0;
	struct daemon_thread *t = daemon_thread(1);
	if (!t)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	/* The arguments from the registers the call was made with, which the
	 * kernel keeps until it returns: no program on the entry, so a call
	 * that began before the trace is seen whole, and other processes'
	 * entries run nothing. */
	struct pt_regs *regs = (void *)bpf_task_pt_regs(bpf_get_current_task_btf());
	int fd = regs->di;
	__u64 buf = regs->si;
	if (vector)
		buf = iov_base(buf, 0);
	if (!buf)
		return 0;
	__u32 conn = 0;
	if (thread_fd_conn(t, fd, &conn)) {
		mark_taken(conn, buf, now, vector ? 0 : ctx->ret);
		return 0;
	}
	if (t->spliced_ns) {
		if (fd_pipe(fd))
			mark_taken(t->spliced_conn, buf, t->spliced_ns, t->spliced_len);
		t->spliced_ns = 0;
	}
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_read")
int stage_exit_read(struct syscall_exit *ctx)
{
	return on_read_exit(ctx, 0);
}

SEC("tracepoint/syscalls/sys_exit_readv")
int stage_exit_readv(struct syscall_exit *ctx)
{
	return on_read_exit(ctx, 1);
}

/* splice(fd_in, off_in, fd_out, off_out, len, flags): from /dev/fuse, a
 * request taken (its header read from the pipe next); to /dev/fuse, a reply
 * whose header the thread wrote into the pipe before (write or vmsplice). */
SEC("tracepoint/syscalls/sys_enter_splice")
int stage_enter_splice(struct syscall_enter *ctx)
{
	struct daemon_thread *t = daemon_thread(1);
	if (!t)
		return 0;
	__u64 pipe = fd_pipe(ctx->args[0]);
	__u64 *unique = pipe ? bpf_map_lookup_elem(&pipe_headers, &pipe) : 0;
	__u32 conn = 0;
	if (unique && *unique && thread_fd_conn(t, ctx->args[2], &conn)) {
		mark_replied(conn, *unique, bpf_ktime_get_ns());
		bpf_map_delete_elem(&pipe_headers, &pipe);
	}
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_splice")
int stage_exit_splice(struct syscall_exit *ctx)
{
	if (ctx->ret < FUSE_IN_HEADER_LEN)
		return 0;
	struct daemon_thread *t = daemon_thread(1);
	if (!t)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	struct pt_regs *regs = (void *)bpf_task_pt_regs(bpf_get_current_task_btf());
	__u32 conn = 0;
	if (thread_fd_conn(t, regs->di, &conn)) {
		t->spliced_ns = now;
		t->spliced_conn = conn;
		t->spliced_len = ctx->ret;
	}
	return 0;
}

/* A reply header: to /dev/fuse, the reply begins now; to a pipe, it is
 * remembered for the splice that will carry it to /dev/fuse. */
static __always_inline void on_reply_header(struct daemon_thread *t, int fd, __u64 buf, __u64 len, __u64 iov, __u64 iovcnt)
{
	if (!buf || len < FUSE_OUT_HEADER_LEN)
		return;
	__u64 now = bpf_ktime_get_ns();
	__u32 conn = 0;
	int to_fuse = thread_fd_conn(t, fd, &conn);
	__u64 pipe = to_fuse || len > 4096 ? 0 : fd_pipe(fd);
	if (!to_fuse && !pipe)
		return;
	struct fuse_out_header___stages {
		__u32 len;
		__s32 error;
		__u64 unique;
	} h;
	if (bpf_probe_read_user(&h, sizeof(h), (void *)buf) || h.len < FUSE_OUT_HEADER_LEN)
		return;
	if (!to_fuse) {
		bpf_map_update_elem(&pipe_headers, &pipe, &h.unique, BPF_ANY);
		return;
	}
	struct inflight_slot *s = mark_replied(conn, h.unique, now);
	if (!s || h.error != 0)
		return;
	__u32 opcode = s->opcode;
	if (opcode == FUSE_OPEN || opcode == FUSE_CREATE)
		count_passthrough(conn, opcode, buf, len, iov, iovcnt);
	if (stage_names && opcode == FUSE_READDIRPLUS) {
		/* The entries follow the header in the same buffer (write), or
		 * in the next non-empty iovec (libfuse: the second; go-fuse: the
		 * third, after its empty fixed part). */
		__u64 dir = s->node, plen = h.len - FUSE_OUT_HEADER_LEN;
		if (len > FUSE_OUT_HEADER_LEN) {
			learn_dirents(conn, dir, buf + FUSE_OUT_HEADER_LEN, plen);
			return;
		}
		for (__u64 v = 1; v < 3 && v < iovcnt; v++) {
			__u64 vlen = 0;
			__u64 base = iov_base(iov + v * sizeof(struct iovec___user), &vlen);
			if (base && vlen) {
				learn_dirents(conn, dir, base, vlen < plen ? vlen : plen);
				return;
			}
		}
	}
}

SEC("tracepoint/syscalls/sys_enter_write")
int stage_enter_write(struct syscall_enter *ctx)
{
	struct daemon_thread *t = daemon_thread(1);
	if (t)
		on_reply_header(t, ctx->args[0], ctx->args[1], ctx->args[2], 0, 0);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_writev")
int stage_enter_writev(struct syscall_enter *ctx)
{
	struct daemon_thread *t = daemon_thread(1);
	if (!t || !ctx->args[2])
		return 0;
	__u64 len = 0;
	__u64 base = iov_base(ctx->args[1], &len);
	on_reply_header(t, ctx->args[0], base, len, ctx->args[1], ctx->args[2]);
	return 0;
}

/* libfuse's splice replies put the header into the pipe with vmsplice. */
SEC("tracepoint/syscalls/sys_enter_vmsplice")
int stage_enter_vmsplice(struct syscall_enter *ctx)
{
	struct daemon_thread *t = daemon_thread(1);
	if (!t || !ctx->args[2])
		return 0;
	__u64 len = 0;
	__u64 base = iov_base(ctx->args[1], &len);
	on_reply_header(t, ctx->args[0], base, len, 0, 0);
	return 0;
}

/* The floor the stage programs are measured against: programs that
 * return at once, on the raw system-call tracepoints (every call of every
 * process runs them) for the comparison the benchmark makes. */
SEC("tp_btf/sys_enter")
int BPF_PROG(stage_floor_raw_enter)
{
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(stage_floor_raw_exit)
{
	return 0;
}

/* A request's stages, at its end, from its stamps: 0 with stage[] filled
 * in, or which stamp is missing. */
enum stage_gap { STAGED = 0, NOT_TAKEN = 1, NOT_REPLIED = 2 };

static __always_inline int stage_split(__u64 start, __u64 taken, __u64 replied, __u64 now, __u64 *stage)
{
	if (!taken || taken < start || taken > now)
		return NOT_TAKEN;
	if (!replied || replied < taken || replied > now)
		return NOT_REPLIED;
	stage[0] = taken - start;
	stage[1] = replied - taken;
	stage[2] = now - replied;
	return STAGED;
}

static __always_inline struct stage_stats *fast_stage_stats(__u32 conn, struct stage_stats *s)
{
	if (!s)
		return 0;
	if (!s->staged && !s->not_taken && !s->not_replied)
		s->conn = conn;
	return s->conn == conn ? s : 0;
}

static __always_inline struct stage_stats *stage_stats_for(__u32 conn, __u32 opcode, __u32 half)
{
	if (opcode < FAST_OPS) {
		__u32 idx = (conn & (FINE_CONNS - 1)) * FAST_OPS + opcode;
		struct stage_stats *s = half ? fast_stage_stats(conn, bpf_map_lookup_elem(&stage_fast1, &idx))
					     : fast_stage_stats(conn, bpf_map_lookup_elem(&stage_fast0, &idx));
		if (s)
			return s;
	}
	struct stats_key sk = { .conn = conn, .opcode = opcode, .half = half };
	struct stage_stats *s = bpf_map_lookup_elem(&stage_table, &sk);
	if (s)
		return s;
	bpf_map_update_elem(&stage_table, &sk, &zero_stage_stats, BPF_NOEXIST);
	return bpf_map_lookup_elem(&stage_table, &sk);
}

static __always_inline void count_stages(__u32 conn, __u32 opcode, int gap, const __u64 *stage, __u32 half, __u32 epoch)
{
	if (stages_uncounted)
		return;
	struct stage_stats *s = stage_stats_for(conn, opcode, half);
	if (!s) {
		count_drop(DROP_STAGES_FULL);
		return;
	}
	if (gap == NOT_TAKEN) {
		s->not_taken++;
		return;
	}
	if (gap == NOT_REPLIED) {
		s->not_replied++;
		return;
	}
	int first = s->staged == 0;
	int new_interval = s->epoch != epoch;
	s->epoch = epoch;
#pragma unroll
	for (int i = 0; i < STAGES; i++) {
		__u64 d = stage[i];
		if (first || d < s->min_ns[i])
			s->min_ns[i] = d;
		if (d > s->max_ns[i])
			s->max_ns[i] = d;
		if (new_interval || d < s->interval_min_ns[i])
			s->interval_min_ns[i] = d;
		if (new_interval || d > s->interval_max_ns[i])
			s->interval_max_ns[i] = d;
		s->sum_ns[i] += d;
		__u32 octave = log2l(d);
		s->slots[i][octave & (HIST_SLOTS - 1)]++;
		count_stage_fine(conn, opcode, i, d, octave, half);
	}
	s->staged++;
}
