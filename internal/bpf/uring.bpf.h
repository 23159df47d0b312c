/* SPDX-License-Identifier: GPL-2.0 */
/* --stages on FUSE over io_uring (Linux 6.14+): a daemon that registered a
 * ring takes each request as the completion of one of its ring commands
 * (the command's entry holds the request) and answers it by submitting the
 * next command, COMMIT_AND_FETCH, whose commit_id is the request's id. No
 * read or write of /dev/fuse is made for these requests, so the stages come
 * from io_uring's own tracepoints: the completion ends the queue stage, the
 * submission begins the reply. Included by fusereq.bpf.c after
 * stages.bpf.h, whose stamps these are. */

/* The kernel's types, only the fields read, relocated by CO-RE (the
 * ___fs suffix is dropped when matching). An io_kiocb's first member is a
 * union of its file and the command's data: io_uring_cmd overlays it. */
struct io_kiocb___fs {
	struct file *file;
	__u8 opcode;
	void *ctx;
} __attribute__((preserve_access_index));

struct io_uring_cmd___fs {
	struct file *file;
	const void *sqe;
	__u32 cmd_op;
	__u8 pdu[32]; /* FUSE's: struct fuse_uring_pdu { struct fuse_ring_ent *ent; } */
} __attribute__((preserve_access_index));

struct io_uring_cqe___fs {
	__s32 res;
} __attribute__((preserve_access_index));

struct fuse_ring_ent___fs {
	struct fuse_req *fuse_req;
} __attribute__((preserve_access_index));

/* include/uapi/linux/io_uring.h and fuse.h: stable. */
#define IORING_OP_URING_CMD_ 46
#define FUSE_IO_URING_CMD_COMMIT_AND_FETCH_ 2
#define SQE_CMD_OFFSET 48 /* struct io_uring_sqe's cmd[], where struct fuse_uring_cmd_req begins */

/* The connection each FUSE ring serves, by the ring's address, learnt from
 * its completions: a submission has no file yet (io_uring resolves it when
 * it issues the command), and a daemon runs a ring per queue, each for one
 * connection. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u32);
} ring_conns SEC(".maps");

/* The io_uring command a request of io_uring carries, if it is a FUSE
 * ring command (an io_uring command on /dev/fuse); 0 otherwise. */
static __always_inline struct io_uring_cmd___fs *fuse_ring_cmd(void *kiocb)
{
	struct io_kiocb___fs *req = kiocb;
	if (!req || BPF_CORE_READ(req, opcode) != IORING_OP_URING_CMD_)
		return 0;
	struct file *f = BPF_CORE_READ(req, file);
	if (!f || BPF_CORE_READ(f, f_inode, i_rdev) != FUSE_DEV_RDEV)
		return 0;
	return (struct io_uring_cmd___fs *)req;
}

/* A ring command completed: if it hands the daemon a request (the entry it
 * was registered or committed with holds one), the request is taken now,
 * unless fuse_request_sent (7.3) said so first; and the ring's connection
 * is remembered for its submissions. */
SEC("tp_btf/io_uring_complete")
int BPF_PROG(stage_ring_complete, void *ring_ctx, void *kiocb, struct io_uring_cqe___fs *cqe)
{
	if (stages_empty)
		return 0;
	struct io_uring_cmd___fs *cmd = fuse_ring_cmd(kiocb);
	if (!cmd || BPF_CORE_READ(cqe, res) != 0)
		return 0;
	struct fuse_ring_ent___fs *ent = 0;
	bpf_probe_read_kernel(&ent, sizeof(ent), (void *)cmd + bpf_core_field_offset(struct io_uring_cmd___fs, pdu));
	if (!ent)
		return 0;
	struct fuse_req *raw = BPF_CORE_READ(ent, fuse_req);
	if (!raw)
		return 0;
	struct fuse_req *freq = kernel_cast(raw, struct fuse_req);
	__u32 conn = req_conn(freq);
	__u64 ring = (__u64)BPF_CORE_READ((struct io_kiocb___fs *)kiocb, ctx);
	__u32 *known = bpf_map_lookup_elem(&ring_conns, &ring);
	if (!known || *known != conn)
		bpf_map_update_elem(&ring_conns, &ring, &conn, BPF_ANY);
	__u64 unique = freq->in.h.unique;
	__u32 opcode = freq->in.h.opcode;
	struct inflight_slot *s = key_by_address ? find_stamps(conn, unique, opcode, 1) : find_slot(conn, unique);
	if (s && s->opcode == opcode && !s->taken_ns) {
		s->node = freq->in.h.nodeid;
		s->taken_ns = bpf_ktime_get_ns();
	}
	return 0;
}

/* The daemon submitted COMMIT_AND_FETCH: the reply to commit_id begins.
 * Its ring's connection is the one the ring's completions named. */
SEC("tp_btf/io_uring_submit_req")
int BPF_PROG(stage_ring_submit, void *kiocb)
{
	if (stages_empty)
		return 0;
	__u64 ts = bpf_ktime_get_ns();
	struct io_kiocb___fs *req = kiocb;
	if (BPF_CORE_READ(req, opcode) != IORING_OP_URING_CMD_)
		return 0;
	__u64 ring = (__u64)BPF_CORE_READ(req, ctx);
	__u32 *conn = bpf_map_lookup_elem(&ring_conns, &ring);
	if (!conn)
		return 0; /* not a FUSE ring, or none of its commands completed yet */
	struct io_uring_cmd___fs *cmd = (struct io_uring_cmd___fs *)req;
	if (BPF_CORE_READ(cmd, cmd_op) != FUSE_IO_URING_CMD_COMMIT_AND_FETCH_)
		return 0;
	const void *sqe = BPF_CORE_READ(cmd, sqe);
	__u64 unique = 0;
	if (!sqe || bpf_probe_read_kernel(&unique, sizeof(unique), sqe + SQE_CMD_OFFSET + 8)) /* after flags */
		return 0;
	mark_replied(*conn, unique, ts);
	return 0;
}
