// Package fuseconn is what fusescope knows about FUSE connections outside
// its probes: the mounts in mountinfo and the path a user names, the
// counters and limits fusectl shows for each connection, the book of the
// connections a run traces (which keeps a label after an unmount and
// notices a traced mount that goes), and the processes that hold a
// connection's /dev/fuse.
//
// A connection is the number N of /sys/fs/fuse/connections/N: the minor
// device number of its mounts (their major is 0), and the dev_t the
// kernel's fuse tracepoints carry.
package fuseconn
