/* SPDX-License-Identifier: GPL-2.0 */
/* Kernels without the fuse tracepoints (before 6.12), or --attach fentry
 * and --attach kprobe: the same record from the kernel functions that
 * queue and end a request, and --stages from the kernel's side of
 * /dev/fuse. Included by fusereq.bpf.c: the programs call its on_send and
 * on_end and share its maps, and the loader loads only those it picks
 * (ktrace/funcs.go), so a kernel without fentry never loads the fentry
 * ones.
 *
 * Each program comes twice: fentry (BTF pointers, read directly, as tp_btf
 * reads them; the end and the names programs are tp_btf's own, attached at
 * fuse_request_end's entry, but under --stages) and kprobe (the arguments
 * from the registers, the fields read through bpf_probe_read_kernel with
 * CO-RE, for kernels whose fuse has no BTF to attach fentry by: Debian's
 * 5.10). A kprobe program's CO-RE relocations need the fuse types all the
 * same: the loader gives them from the module's BTF, or, where the module
 * has none, from BTF generated from its debug information
 * (ktrace/fusebtf). The section names the function of the oldest kernel
 * each program was written against; the loader sets the one the running
 * kernel has (the send's differs by version). */

/* The send: the request is queued for the daemon, under the input queue's
 * lock, before a daemon can read it (so its end never precedes it):
 * queue_request_and_unlock(fiq, req) on 5.10 to 6.9 (its id set by the
 * caller, its length not yet), fuse_dev_queue_req(fiq, req) from 6.10 (its
 * length set, its id not: the function sets it). Whether a version's entry
 * has the id does not matter: the loader keys every request by its address
 * (key_by_address), which is also what the stage programs find it by. */
#define FUNCS_SEND_FN "queue_request_and_unlock"
/* The end, every version: fuse_request_end(req). */
#define FUNCS_END_FN "fuse_request_end"

/* A field of the request: a direct load where the program has a BTF
 * pointer (fentry), a probed read where it has an address (kprobe). The
 * choice is a constant of each program, so the other never reaches the
 * verifier. */
#define REQ_READ(probed, ptr, field) ((probed) ? BPF_CORE_READ(ptr, field) : (ptr)->field)

/* req_conn (kernel.bpf.h) through probed reads. */
static __always_inline __u32 req_conn_probed(struct fuse_req *req)
{
	if (bpf_core_field_exists(struct fuse_req___v73, chan))
		return BPF_CORE_READ((struct fuse_req___v73 *)req, chan, conn, dev);
	return BPF_CORE_READ(req, fm, fc, dev);
}

static __always_inline __u32 func_req_conn(struct fuse_req *req, const int probed)
{
	return probed ? req_conn_probed(req) : req_conn(req);
}

/* The request's length where the send runs before the kernel sets it
 * (queue_request_and_unlock sets it itself): the header and the
 * arguments, as fuse_len_args sums them. The arguments by constant index:
 * a BTF pointer takes no variable offset. The fourth exists from 6.2. */
static __always_inline __u32 func_in_len(struct fuse_req *req, const int probed)
{
	struct fuse_args *args = REQ_READ(probed, req, args);
	if (!args)
		return FUSE_IN_HEADER_LEN;
	__u32 n = REQ_READ(probed, args, in_numargs);
	__u32 len = FUSE_IN_HEADER_LEN;
	if (n > 0)
		len += REQ_READ(probed, args, in_args[0].size);
	if (n > 1)
		len += REQ_READ(probed, args, in_args[1].size);
	if (n > 2)
		len += REQ_READ(probed, args, in_args[2].size);
	if (n > 3 && bpf_core_field_size(args->in_args) >= 4 * sizeof(args->in_args[0]))
		len += REQ_READ(probed, args, in_args[3].size);
	return len;
}

/* The request's headers, which the uapi lays out (include/uapi/linux/fuse.h):
 * a kprobe reads each in one probed read, where a read a field made the
 * kprobe programs cost 2.2x tp_btf's per request in the 6.12 guest. */
static __always_inline void req_in_header(struct fuse_req *req, struct fuse_in_header *h, const int probed)
{
	if (!probed) {
		h->len = req->in.h.len;
		h->opcode = req->in.h.opcode;
		h->unique = req->in.h.unique;
		h->nodeid = req->in.h.nodeid;
		h->pid = req->in.h.pid;
	} else if (bpf_core_read(h, sizeof(*h), &req->in.h)) {
		__builtin_memset(h, 0, sizeof(*h));
	}
}

static __always_inline void req_out_header(struct fuse_req *req, struct fuse_out_header *h, const int probed)
{
	if (!probed) {
		h->len = req->out.h.len;
		h->error = req->out.h.error;
	} else if (bpf_core_read(h, sizeof(*h), &req->out.h)) {
		__builtin_memset(h, 0, sizeof(*h));
	}
}

/* Both headers, in one probed read where the request holds them side by
 * side (every layout Debian's kernels have: 5.10 to 7.3): the end's second
 * read was a helper call per request. */
static __always_inline void req_headers(struct fuse_req *req, struct fuse_in_header *in, struct fuse_out_header *out,
					const int probed)
{
	__u32 in_off = bpf_core_field_offset(struct fuse_req, in.h);
	if (probed && bpf_core_field_offset(struct fuse_req, out.h) == in_off + sizeof(*in)) {
		struct {
			struct fuse_in_header in;
			struct fuse_out_header out;
		} both;
		if (bpf_probe_read_kernel(&both, sizeof(both), (void *)req + in_off))
			__builtin_memset(&both, 0, sizeof(both));
		*in = both.in;
		*out = both.out;
		return;
	}
	req_in_header(req, in, probed);
	req_out_header(req, out, probed);
}

/* The send, as SEND_BTF's under key_by_address (fusereq.bpf.c). */
static __always_inline int func_send(struct fuse_req *req, const int probed, const int slow, const int stages)
{
	__u32 tag = req_tag(req);
	struct fuse_in_header in;
	req_in_header(req, &in, probed);
	__u32 len = in.len;
	if (!len)
		len = func_in_len(req, probed);
	return on_send(func_req_conn(req, probed), tag, in.opcode, len, tag, in.pid, slow, stages);
}

static __always_inline void stamp_reply(struct fuse_req *req, const int probed);

/* The end, as END_BTF's under key_by_address; under --stages, after the
 * reply's start is stamped. */
static __always_inline int func_end(struct fuse_req *req, const int probed, const int slow, const int stages,
				    const int files)
{
	if (stages)
		stamp_reply(req, probed);
	struct fuse_in_header in;
	struct fuse_out_header out;
	req_headers(req, &in, &out, probed);
	__u32 tag = req_tag(req);
	return on_end(0, tag, out.len, out.error, tag, (slow || files) ? in.nodeid : 0, in.unique, req_on_ring(req, probed), slow,
		      stages, files);
}

/* x86-64's argument registers, as the kprobes read them. */
#define KPROBE_ARG1(ctx) ((ctx)->di)
#define KPROBE_ARG2(ctx) ((ctx)->si)

#define FUNC_SEND(name, slow, stages)                                                                           \
	SEC("fentry/" FUNCS_SEND_FN)                                                                            \
	int BPF_PROG(name##_fentry, struct fuse_iqueue *fiq, struct fuse_req *req)                              \
	{                                                                                                       \
		return func_send(req, 0, slow, stages);                                                         \
	}                                                                                                       \
	SEC("kprobe/" FUNCS_SEND_FN)                                                                            \
	int name##_kprobe(struct pt_regs *ctx)                                                                  \
	{                                                                                                       \
		return func_send((struct fuse_req *)KPROBE_ARG2(ctx), 1, slow, stages);                         \
	}
FUNC_SEND(fuse_send, 0, 0)
FUNC_SEND(fuse_send_slow, 1, 0)
FUNC_SEND(fuse_send_stages, 0, 1)
FUNC_SEND(fuse_send_slow_stages, 1, 1)

/* Without --stages the end needs no fentry program of its own:
 * fuse_request_end(req) hands its program the request as the
 * tp_btf/fuse_request_end programs are handed it (ctx[0]), so the loader
 * attaches those (END_BTF's, and names.bpf.h's fuse_names) at the
 * function's entry instead. With --stages the end first stamps the reply's
 * start (stamp_reply, below): fentry programs of its own. The kprobe
 * programs read the request from a register. */
#define FUNC_END(name, slow, stages, files)                                                                     \
	SEC("kprobe/" FUNCS_END_FN)                                                                             \
	int name##_kprobe(struct pt_regs *ctx)                                                                  \
	{                                                                                                       \
		return func_end((struct fuse_req *)KPROBE_ARG1(ctx), 1, slow, stages, files);                   \
	}
#define FUNC_END_FENTRY(name, slow, stages, files)                                                              \
	SEC("fentry/" FUNCS_END_FN)                                                                             \
	int BPF_PROG(name##_fentry, struct fuse_req *req)                                                       \
	{                                                                                                       \
		return func_end(req, 0, slow, stages, files);                                                   \
	}
FUNC_END(fuse_end, 0, 0, 0)
FUNC_END(fuse_end_slow, 1, 0, 0)
FUNC_END(fuse_end_stages, 0, 1, 0)
FUNC_END(fuse_end_slow_stages, 1, 1, 0)
FUNC_END(fuse_end_files, 0, 0, 1)
FUNC_END(fuse_end_slow_files, 1, 0, 1)
FUNC_END(fuse_end_stages_files, 0, 1, 1)
FUNC_END(fuse_end_slow_stages_files, 1, 1, 1)
FUNC_END_FENTRY(fuse_end_stages, 0, 1, 0)
FUNC_END_FENTRY(fuse_end_slow_stages, 1, 1, 0)
FUNC_END_FENTRY(fuse_end_stages_files, 0, 1, 1)
FUNC_END_FENTRY(fuse_end_slow_stages_files, 1, 1, 1)

/* File names (names.bpf.h) for the kprobes: learn_name's reads, probed. */
static __always_inline void learn_name_probed(struct fuse_req *req, __u32 conn, __u32 opcode)
{
	struct fuse_args *args = BPF_CORE_READ(req, args);
	if (!args)
		return;
	const void *name = 0;
	__u32 len = 0;
	__u32 first = BPF_CORE_READ(args, in_args[0].size);
	if ((opcode == FUSE_LOOKUP_ || opcode == FUSE_SYMLINK_) && first) {
		name = BPF_CORE_READ(args, in_args[0].value);
		len = first;
	} else {
		name = BPF_CORE_READ(args, in_args[1].value);
		len = BPF_CORE_READ(args, in_args[1].size);
	}
	__u64 *entry = BPF_CORE_READ(args, out_args[0].value);
	if (!name || !entry)
		return;
	send_name(conn, entry, BPF_CORE_READ(req, in.h.nodeid), name, len);
}

SEC("kprobe/" FUNCS_END_FN)
int fuse_names_kprobe(struct pt_regs *ctx)
{
	struct fuse_req *req = (struct fuse_req *)KPROBE_ARG1(ctx);
	__u32 opcode = BPF_CORE_READ(req, in.h.opcode);
	__u32 conn = req_conn_probed(req);
	if (filter_conn_on && !conn_wanted(conn))
		return 0;
	if (BPF_CORE_READ(req, out.h.error) == 0 &&
	    (opcode == FUSE_LOOKUP_ || opcode == FUSE_CREATE_ || opcode == FUSE_MKDIR_ || opcode == FUSE_MKNOD_ ||
	     opcode == FUSE_SYMLINK_ || opcode == FUSE_LINK_))
		learn_name_probed(req, conn, opcode);
	return 0;
}

/* --stages from the kernel's side of /dev/fuse: every read of a request
 * and write of a reply passes through fuse_dev_do_read and
 * fuse_dev_do_write, whatever system call the daemon made (read, readv,
 * splice...), so programs on functions only daemons call replace the
 * programs on every process's reads and writes, with no fd to follow to
 * its connection and no header to read back from the daemon's memory:
 *   fuse_copy_args, copying to the daemon (cs->write): the request's
 *     header is copied and its arguments follow: it is taken (the read's
 *     exit, on the system-call side). It runs once per request read, and
 *     once more per reply with arguments, which returns at once;
 *   fuse_dev_do_write's entry: a reply begins (the write's entry on the
 *     system-call side), remembered by thread with the write's cs;
 *   the end (func_end, on fuse_request_end, which the write calls once it
 *     has copied the reply): the thread's write names this request
 *     (cs->req), so the reply's start is stamped with the time it began.
 *     A write that ended no request (a notification) leaves its entry,
 *     whose cs no later end matches unless that end runs inside a write on
 *     the same stack again, and then the entry is that write's.
 * Three programs a request beyond the send and end, two of them small:
 * stamping at fuse_copy_finish instead, which runs for every page copied
 * either way, cost 6.4x the plain trace's programs per request in the 6.12
 * guest (see docs/performance.md).
 * The stamps go in the request's in-flight slot, found by its address as
 * the send claimed it: the loader keys requests by address
 * (key_by_address) and has the end take the stamps from the slot
 * (stamps_in_slot). No connection is read and no hash touched. */
struct reply_start {
	__u32 tid;
	__u32 pad;
	__u64 ns;
	__u64 cs; /* the write's fuse_copy_state: its req names the request */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DAEMON_THREADS);
	__type(key, __u32);
	__type(value, struct reply_start);
} reply_starts SEC(".maps");

/* The low bits of a kernel address, as req_tag takes them. */
static __always_inline __u32 addr_low(void *p)
{
	__u32 low;
	asm volatile("r1 = %[p]; w1 = w1; %[low] = r1" : [low] "=r"(low) : [p] "r"(p) : "r1");
	return low;
}

/* A kernel address as a number, to keep in a map (CAP_PERFMON). */
static __always_inline __u64 addr_of(void *p)
{
	__u64 a;
	asm volatile("%[a] = %[p]" : [a] "=r"(a) : [p] "r"(p));
	return a;
}

static __always_inline int on_write_start(void *cs)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u32 idx = tid & (DAEMON_THREADS - 1);
	struct reply_start *r = bpf_map_lookup_elem(&reply_starts, &idx);
	if (r) {
		r->tid = tid;
		r->cs = addr_of(cs);
		r->ns = bpf_ktime_get_ns();
	}
	return 0;
}

/* FOPEN_PASSTHROUGH in a successful OPEN's or CREATE's reply, read from
 * the request's out-argument the reply was copied into (stages.bpf.h's
 * count_passthrough reads it from the daemon's buffer). */
static __always_inline void count_passthrough_req(struct fuse_req *req, __u32 conn, __u32 opcode, const int probed)
{
	struct fuse_args *args = REQ_READ(probed, req, args);
	if (!args)
		return;
	void *open_out = opcode == FUSE_CREATE ? REQ_READ(probed, args, out_args[1].value)
					       : REQ_READ(probed, args, out_args[0].value);
	__u32 flags = 0;
	if (!open_out || bpf_probe_read_kernel(&flags, sizeof(flags), open_out + 8) || !(flags & FOPEN_PASSTHROUGH))
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

/* The request's slot, by its address (key_by_address, stamps_in_slot). */
static __always_inline struct inflight_slot *stamps_of(struct fuse_req *req)
{
	__u32 tag = req_tag(req);
#pragma unroll
	for (__u32 probe = 0; probe < 2; probe++) {
		__u32 idx = slot_index(0, tag, tag, probe);
		struct inflight_slot *s = bpf_map_lookup_elem(&inflight, &idx);
		if (s && s->unique == tag && s->req_tag == tag && s->start_ns)
			return s;
	}
	return 0;
}

static __always_inline int on_args_copied(struct fuse_copy_state *cs, const int probed)
{
	int to_daemon = probed ? BPF_CORE_READ_BITFIELD_PROBED(cs, write) : BPF_CORE_READ_BITFIELD(cs, write);
	if (!to_daemon)
		return 0;
	struct fuse_req *req = REQ_READ(probed, cs, req);
	if (!req)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	struct inflight_slot *s = stamps_of(req);
	if (s && !s->taken_ns) {
		s->node = REQ_READ(probed, req, in.h.nodeid);
		s->taken_ns = now;
	}
	return 0;
}

/* At the end, inside the daemon's write of its reply: the reply began when
 * the write did. */
static __always_inline void stamp_reply(struct fuse_req *req, const int probed)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u32 idx = tid & (DAEMON_THREADS - 1);
	struct reply_start *r = bpf_map_lookup_elem(&reply_starts, &idx);
	if (!r || r->tid != tid || !r->cs)
		return;
	__u64 written = 0;
	if (bpf_probe_read_kernel(&written, sizeof(written), (void *)(r->cs + bpf_core_field_offset(struct fuse_copy_state, req))) ||
	    (__u32)written != addr_low(req))
		return;
	__u64 ts = r->ns;
	r->cs = 0;
	struct inflight_slot *s = stamps_of(req);
	if (!s)
		return;
	if (!s->replied_ns)
		s->replied_ns = ts;
	__u32 opcode = s->opcode;
	if ((opcode == FUSE_OPEN || opcode == FUSE_CREATE) && REQ_READ(probed, req, out.h.error) == 0)
		count_passthrough_req(req, s->conn, opcode, probed);
}

SEC("fentry/fuse_copy_args")
int BPF_PROG(stage_taken_fentry, struct fuse_copy_state *cs)
{
	return on_args_copied(cs, 0);
}

SEC("kprobe/fuse_copy_args")
int stage_taken_kprobe(struct pt_regs *ctx)
{
	return on_args_copied((struct fuse_copy_state *)KPROBE_ARG1(ctx), 1);
}

SEC("fentry/fuse_dev_do_write")
int BPF_PROG(stage_write_fentry, struct fuse_dev *fud, struct fuse_copy_state *cs)
{
	return on_write_start(cs);
}

SEC("kprobe/fuse_dev_do_write")
int stage_write_kprobe(struct pt_regs *ctx)
{
	return on_write_start((void *)KPROBE_ARG2(ctx));
}
