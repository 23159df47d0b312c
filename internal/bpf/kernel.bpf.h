/* SPDX-License-Identifier: GPL-2.0 */
/* What differs between the kernels fusescope runs on, in one place. The
 * kernel's types come from vmlinux.h (make vmlinux); where a later or an
 * earlier kernel lays a path out differently, a ___flavour type below names
 * the other layout, and bpf_core_field_exists picks the one the running
 * kernel has when the program loads: the other branch is dead code the
 * verifier removes, so its unrelocatable reads never run. */

/* Linux 7.3 (upstream's fuse_chan): a request and a /dev/fuse device point
 * to their channel, which holds the connection; before, a request pointed
 * to its mount (fm->fc) and a device to its connection. */
struct fuse_chan___v73 {
	struct fuse_conn *conn;
} __attribute__((preserve_access_index));

struct fuse_req___v73 {
	struct fuse_chan___v73 *chan;
} __attribute__((preserve_access_index));

struct fuse_dev___v73 {
	struct fuse_chan___v73 *chan;
} __attribute__((preserve_access_index));

/* The connection's number (the tracepoints' "connection") of a request. */
static __always_inline __u32 req_conn(struct fuse_req *req)
{
	if (bpf_core_field_exists(struct fuse_req___v73, chan))
		return ((struct fuse_req___v73 *)req)->chan->conn->dev;
	return req->fm->fc->dev;
}

/* The same of a /dev/fuse device (a file's private_data). */
static __always_inline __u32 dev_conn(struct fuse_dev *fud)
{
	if (bpf_core_field_exists(struct fuse_dev___v73, chan))
		return ((struct fuse_dev___v73 *)fud)->chan->conn->dev;
	return fud->fc->dev;
}

/* Linux 6.12 to 6.17 fire fuse_request_send before the request has its id
 * (unique is 0 until 6.18): the loader sets this, and the programs find a
 * request by its address alone, and its stamps (--stages) by (connection,
 * id) once the daemon has read it. */
volatile const __u8 key_by_address = 0;

/* FUSE over io_uring (6.14+) marks the requests its ring carries with
 * FR_URING; before, no such flag exists and every request is /dev/fuse's. */
enum fuse_req_flag___fs { FR_URING___fs = 12 };

/* probed: req is a number (a kprobe's register), read with a helper;
 * otherwise a pointer the verifier lets the program load through. */
static __always_inline __u32 req_on_ring(struct fuse_req *req, const int probed)
{
	if (!bpf_core_enum_value_exists(enum fuse_req_flag___fs, FR_URING___fs))
		return 0;
	unsigned long flags = probed ? BPF_CORE_READ(req, flags) : req->flags;
	return (flags >> bpf_core_enum_value(enum fuse_req_flag___fs, FR_URING___fs)) & 1;
}
