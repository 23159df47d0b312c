/* SPDX-License-Identifier: GPL-2.0 */
/* --calls: the application's file system calls on the traced mounts, each
 * joined to the FUSE requests its thread sent between the call's entry and
 * exit. Programs on the raw sys_enter and sys_exit tracepoints (a table of
 * the file calls, read-only, is the first test: every other call of every
 * process returns there), then the application's processes (a bitmap of
 * tgids: -p, the -- CMD command and the children it forks) or its command
 * name (--comm). A call counts when it touched a traced mount: it sent a
 * request on one, or its fd, its directory fd or the working directory its
 * relative path starts from is on one (the superblock's device is the
 * connection), or its absolute path starts with a traced mount point.
 * Included by fusereq.bpf.c. */

#define APP_THREADS 4096
#define APP_MOUNTS 8
#define APP_PATH 128

/* How a call names its file: the argument numbers. */
enum file_call {
	CALL_NONE = 0,
	CALL_FD = 1,       /* fd in arg 0: read, write, fstat, close, getdents64 ... */
	CALL_AT = 2,       /* dirfd in arg 0, path in arg 1: openat, statx, newfstatat, unlinkat ... */
	CALL_PATH = 3,     /* path in arg 0, relative to the working directory: stat, open, unlink ... */
	CALL_OPEN_AT = 4,  /* as CALL_AT, and the fd it returns names the file */
	CALL_OPEN = 5,     /* as CALL_PATH, and the fd it returns names the file */
};
const enum file_call *unused_file_call __attribute__((unused)); /* in BTF, for bpf2go -type */


volatile const __u8 call_kind[MAX_CALL_NR] = {};
volatile const __u8 app_comm_on = 0; /* --comm: the application by name, not by tgid */

struct app_thread {
	__u32 tid;
	__u32 nr;        /* the call in progress; MAX_CALL_NR: none */
	__u64 start_ns;
	__u64 arg0, arg1;
	__u64 requests;  /* FUSE requests sent on traced connections during it */
	__u64 fuse_ns;   /* the time its synchronous requests took */
	__u64 req_unique;/* the request in flight from this call, and its send */
	__u64 req_ns;
	__u32 req_conn;
	__u32 pad;
};

struct app_mount {
	__u32 len;
	__u32 conn;
	char path[APP_PATH];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DAEMON_BITMAP_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} app_tgids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, APP_THREADS);
	__type(key, __u32);
	__type(value, struct app_thread);
} app_threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, APP_MOUNTS);
	__type(key, __u32);
	__type(value, struct app_mount);
} app_mounts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_CALL_NR);
	__type(key, __u32);
	__type(value, struct call_stats);
} call_table SEC(".maps");

/* A scratch buffer for a path, per CPU (too large for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct app_mount);
} app_scratch SEC(".maps");

/* The task, its working directory and files: vmlinux.h's types. */

#define AT_FDCWD_ -100

static __always_inline int app_process(struct task_struct *task)
{
	if (app_comm_on) {
#pragma unroll
		for (int i = 0; i < 16; i++) {
			if (task->comm[i] != filter_comm[i])
				return 0;
			if (task->comm[i] == 0)
				return 1;
		}
		return 1;
	}
	__u32 tgid = task->tgid;
	__u32 word = tgid >> 6;
	__u64 *bits = bpf_map_lookup_elem(&app_tgids, &word);
	return bits && (*bits & (1ULL << (tgid & 63)));
}

/* Whether a superblock's device is a counted FUSE connection (pc_conns,
 * which user space keeps: the traced ones, or every FUSE connection). */
static __always_inline int dev_traced(__u32 s_dev)
{
	if (s_dev >> 20)
		return 0;
	__u32 conn = s_dev & 0xfffff;
	__u32 word = conn >> 6;
	__u64 *bits = bpf_map_lookup_elem(&pc_conns, &word);
	return bits && (*bits & (1ULL << (conn & 63)));
}

static __always_inline int fd_traced(int fd)
{
	struct file *f = fd_file(fd);
	if (!f)
		return 0;
	struct file *fc = (void *)f;
	return dev_traced(fc->f_inode->i_sb->s_dev);
}

static __always_inline int cwd_traced(void)
{
	struct task_struct *task = (void *)bpf_get_current_task_btf();
	return dev_traced(task->fs->pwd.mnt->mnt_sb->s_dev);
}

/* An absolute path that starts with a traced mount point. */
static __always_inline int path_traced(__u64 upath)
{
	__u32 zero = 0;
	struct app_mount *p = bpf_map_lookup_elem(&app_scratch, &zero);
	if (!p || bpf_probe_read_user_str(p->path, sizeof(p->path), (void *)upath) <= 1 || p->path[0] != '/')
		return 0;
	/* Eight bytes at a time, unrolled: a loop bounded by the mount
	 * point's length is one the verifier cannot prove ends. */
#pragma unroll
	for (__u32 m = 0; m < APP_MOUNTS; m++) {
		__u32 key = m;
		struct app_mount *mp = bpf_map_lookup_elem(&app_mounts, &key);
		if (!mp || !mp->len || mp->len >= APP_PATH)
			continue;
		__u32 len = mp->len;
		int same = 1;
#pragma unroll
		for (__u32 w = 0; w < APP_PATH / 8; w++) {
			if (w * 8 >= len)
				break;
			__u64 a = *(__u64 *)&p->path[w * 8], b = *(__u64 *)&mp->path[w * 8];
			__u32 rest = len - w * 8;
			if (rest < 8) {
				__u64 mask = (1ULL << (rest * 8)) - 1;
				a &= mask;
				b &= mask;
			}
			if (a != b) {
				same = 0;
				break;
			}
		}
		/* The mask in an instruction of its own: the compiler would drop
		 * it, knowing len < APP_PATH, and the verifier needs it. */
		__u32 at = len;
		asm volatile("%[at] &= 127" : [at] "+r"(at));
		char next = p->path[at];
		if (same && (next == '/' || next == 0))
			return 1;
	}
	return 0;
}

/* Whether a call that sent no request was about a traced mount. */
static __always_inline int call_traced(__u32 kind, struct app_thread *t, long ret)
{
	if ((kind == CALL_OPEN_AT || kind == CALL_OPEN) && ret >= 0)
		return fd_traced(ret);
	switch (kind) {
	case CALL_FD:
		return fd_traced(t->arg0);
	case CALL_AT:
	case CALL_OPEN_AT: {
		char first = 0;
		bpf_probe_read_user(&first, 1, (void *)t->arg1);
		if (first == '/')
			return path_traced(t->arg1);
		if ((int)t->arg0 == AT_FDCWD_)
			return cwd_traced();
		return fd_traced(t->arg0);
	}
	case CALL_PATH:
	case CALL_OPEN: {
		char first = 0;
		bpf_probe_read_user(&first, 1, (void *)t->arg0);
		return first == '/' ? path_traced(t->arg0) : cwd_traced();
	}
	}
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(app_enter, struct pt_regs *regs, long nr)
{
	if (nr < 0 || nr >= MAX_CALL_NR || !call_kind[nr])
		return 0;
	struct task_struct *task = (void *)bpf_get_current_task_btf();
	if (!app_process(task))
		return 0;
	__u32 tid = task->pid;
	__u32 idx = tid & (APP_THREADS - 1);
	struct app_thread *t = bpf_map_lookup_elem(&app_threads, &idx);
	if (!t)
		return 0;
	t->tid = tid;
	t->nr = nr;
	t->arg0 = regs->di;
	t->arg1 = regs->si;
	t->requests = 0;
	t->fuse_ns = 0;
	t->req_unique = 0;
	t->start_ns = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(app_exit, struct pt_regs *regs, long ret)
{
	__u32 nr = regs->orig_ax;
	if (nr >= MAX_CALL_NR || !call_kind[nr])
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u32 idx = tid & (APP_THREADS - 1);
	struct app_thread *t = bpf_map_lookup_elem(&app_threads, &idx);
	if (!t || t->tid != tid || t->nr != nr || !t->start_ns)
		return 0;
	__u64 dur = bpf_ktime_get_ns() - t->start_ns;
	t->start_ns = 0;
	t->nr = MAX_CALL_NR;
	if (!t->requests && !call_traced(call_kind[nr], t, ret))
		return 0;
	struct call_stats *s = bpf_map_lookup_elem(&call_table, &nr);
	if (!s)
		return 0;
	s->count++;
	if (ret < 0)
		s->errors++;
	s->sum_ns += dur;
	s->slots[log2l(dur) & (HIST_SLOTS - 1)]++;
	if (s->count == 1 || dur < s->min_ns)
		s->min_ns = dur;
	if (dur > s->max_ns)
		s->max_ns = dur;
	if (t->requests) {
		s->with_requests++;
		s->requests += t->requests;
		s->fuse_ns += t->fuse_ns < dur ? t->fuse_ns : dur;
	}
	return 0;
}

/* A request the application's thread sends during a call counts for it;
 * its time too, when the thread waits for it (the last one sent). */
SEC("tp_btf/fuse_request_send")
int BPF_PROG(app_send, struct fuse_req *req)
{
	__u32 conn = req_conn(req);
	if (filter_conn_on && !conn_wanted(conn))
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u32 idx = tid & (APP_THREADS - 1);
	struct app_thread *t = bpf_map_lookup_elem(&app_threads, &idx);
	if (!t || t->tid != tid || !t->start_ns)
		return 0;
	t->requests++;
	t->req_unique = key_by_address ? req_tag(req) : req->in.h.unique;
	t->req_conn = conn;
	t->req_ns = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/fuse_request_end")
int BPF_PROG(app_end, struct fuse_req *req)
{
	/* The requester, as the request's header names it (the daemon's pid
	 * namespace: the initial one for the daemons traced here). */
	__u32 tid = req->in.h.pid;
	__u32 idx = tid & (APP_THREADS - 1);
	struct app_thread *t = bpf_map_lookup_elem(&app_threads, &idx);
	if (!t || t->tid != tid || !t->start_ns || t->req_unique != (key_by_address ? req_tag(req) : req->in.h.unique) || !t->req_unique)
		return 0;
	t->fuse_ns += bpf_ktime_get_ns() - t->req_ns;
	t->req_unique = 0;
	return 0;
}

/* -- CMD and -p: the processes the application forks are its own. */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(app_fork, struct task_struct *parent, struct task_struct *child)
{
	if (app_comm_on)
		return 0;
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	if (ptgid == ctgid)
		return 0; /* a thread */
	__u32 word = ptgid >> 6;
	__u64 *bits = bpf_map_lookup_elem(&app_tgids, &word);
	if (!bits || !(*bits & (1ULL << (ptgid & 63))))
		return 0;
	__u32 cw = ctgid >> 6;
	__u64 *cbits = bpf_map_lookup_elem(&app_tgids, &cw);
	if (cbits)
		__sync_fetch_and_or(cbits, 1ULL << (ctgid & 63));
	return 0;
}
