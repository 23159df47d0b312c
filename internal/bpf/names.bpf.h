/* SPDX-License-Identifier: GPL-2.0 */
/* File names (--slower's lines, --files' table): a second program on
 * tp_btf/fuse_request_end learns each node's parent and name from the
 * replies that make an entry (LOOKUP, CREATE, MKDIR, MKNOD, SYMLINK, LINK):
 * the request's arguments hold the name, its reply's fuse_entry_out the new
 * node id. A pair is sent to user space once (an LRU map remembers a
 * signature of what was sent), so a lookup repeated with entry_timeout 0
 * costs reading the name and a map lookup, not an event. With --files, the same program sums each node's requests. */

/* The request's arguments are read from struct fuse_args (vmlinux.h). */

#define FUSE_LOOKUP_ 1
#define FUSE_SYMLINK_ 6
#define FUSE_MKNOD_ 8
#define FUSE_MKDIR_ 9
#define FUSE_LINK_ 13
#define FUSE_CREATE_ 35


struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} node_names SEC(".maps");

/* What was sent: (conn, node) -> name_sig(name, parent). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct node_key);
	__type(value, __u64);
} names_sent SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, MAX_NODE_KEYS);
	__type(key, struct node_key);
	__type(value, struct node_stats);
} node_table SEC(".maps");

/* Keeps the event type in BTF for bpf2go. */
const struct node_name *unused_node_name __attribute__((unused));

static const struct node_stats zero_node_stats;

/* name_sig is FNV-1a of a name, seeded with its parent's id. */
static __always_inline __u64 name_sig(const char *name, __u64 parent)
{
	__u64 h = 0xcbf29ce484222325ULL ^ parent;
	for (int i = 0; i < 256; i++) {
		char c = name[i];
		if (!c)
			break;
		h = (h ^ (__u8)c) * 0x100000001b3ULL;
	}
	return h;
}

/* Sends (conn, the node entry names, its parent) with the name's len bytes
 * at name, unless the same pair was sent last for that node. Both ways of
 * reading a request's arguments end here: learn_name's (BTF pointers)
 * and funcs.bpf.h's learn_name_probed (probed reads). */
static __always_inline void send_name(__u32 conn, const __u64 *entry, __u64 parent, const void *name, __u32 len)
{
	struct node_key k = { .conn = conn };
	if (bpf_probe_read_kernel(&k.node, sizeof(k.node), entry) || !k.node)
		return;
	struct node_name *e = bpf_ringbuf_reserve(&node_names, sizeof(*e), 0);
	if (!e)
		return; /* the next lookup of it tries again */
	e->conn = conn;
	e->node = k.node;
	e->parent = parent;
	/* The argument's size, not a NUL: a lookup in a path walk names the
	 * component in the path being walked ("files" of "files/f000", no
	 * NUL after it); other requests' names count their NUL. */
	if (len == 0 || len > sizeof(e->name) - 1)
		len = sizeof(e->name) - 1;
	if (bpf_probe_read_kernel(e->name, len & (sizeof(e->name) - 1), name)) {
		bpf_ringbuf_discard(e, 0);
		return;
	}
	e->name[len & (sizeof(e->name) - 1)] = 0;
	/* Sent again when the parent or the name changed: a daemon may give
	 * a node the kernel forgot, and FORGETs are not requests the
	 * tracepoints see, to another. */
	__u64 sig = name_sig(e->name, parent);
	__u64 *sent = bpf_map_lookup_elem(&names_sent, &k);
	if (sent && *sent == sig) {
		bpf_ringbuf_discard(e, 0);
		return;
	}
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	bpf_map_update_elem(&names_sent, &k, &sig, BPF_ANY);
}

static __always_inline void learn_name(struct fuse_req *req, __u32 conn, __u32 opcode)
{
	struct fuse_args *args = req->args;
	if (!args)
		return;
	/* The name: LOOKUP's and SYMLINK's first argument that is not empty
	 * (6.13+ put an empty one first); the others' second, after their
	 * fixed struct. */
	const void *name = 0;
	__u32 len = 0;
	if ((opcode == FUSE_LOOKUP_ || opcode == FUSE_SYMLINK_) && args->in_args[0].size) {
		name = args->in_args[0].value;
		len = args->in_args[0].size;
	} else {
		name = args->in_args[1].value;
		len = args->in_args[1].size;
	}
	__u64 *entry = args->out_args[0].value; /* fuse_entry_out: nodeid first */
	if (!name || !entry)
		return;
	send_name(conn, entry, req->in.h.nodeid, name, len);
}

SEC("tp_btf/fuse_request_end")
int BPF_PROG(fuse_names, struct fuse_req *req)
{
	__u32 opcode = req->in.h.opcode;
	__u32 conn = req_conn(req);
	if (filter_conn_on && !conn_wanted(conn))
		return 0;
	if (req->out.h.error == 0 && (opcode == FUSE_LOOKUP_ || opcode == FUSE_CREATE_ || opcode == FUSE_MKDIR_ ||
				      opcode == FUSE_MKNOD_ || opcode == FUSE_SYMLINK_ || opcode == FUSE_LINK_))
		learn_name(req, conn, opcode);
	return 0;
}
