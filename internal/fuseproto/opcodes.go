// Package fuseproto holds the FUSE protocol vocabulary shared by every part of
// fusescope: opcode numbers and names as the kernel's include/uapi/linux/fuse.h
// and fs/fuse/fuse_trace.h define them.
package fuseproto

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Opcode is a FUSE request opcode (enum fuse_opcode).
type Opcode uint32

// The opcodes of include/uapi/linux/fuse.h (protocol 7.41, Linux 6.18).
const (
	Lookup          Opcode = 1
	Forget          Opcode = 2
	Getattr         Opcode = 3
	Setattr         Opcode = 4
	Readlink        Opcode = 5
	Symlink         Opcode = 6
	Mknod           Opcode = 8
	Mkdir           Opcode = 9
	Unlink          Opcode = 10
	Rmdir           Opcode = 11
	Rename          Opcode = 12
	Link            Opcode = 13
	Open            Opcode = 14
	Read            Opcode = 15
	Write           Opcode = 16
	Statfs          Opcode = 17
	Release         Opcode = 18
	Fsync           Opcode = 20
	Setxattr        Opcode = 21
	Getxattr        Opcode = 22
	Listxattr       Opcode = 23
	Removexattr     Opcode = 24
	Flush           Opcode = 25
	Init            Opcode = 26
	Opendir         Opcode = 27
	Readdir         Opcode = 28
	Releasedir      Opcode = 29
	Fsyncdir        Opcode = 30
	Getlk           Opcode = 31
	Setlk           Opcode = 32
	Setlkw          Opcode = 33
	Access          Opcode = 34
	Create          Opcode = 35
	Interrupt       Opcode = 36
	Bmap            Opcode = 37
	Destroy         Opcode = 38
	Ioctl           Opcode = 39
	Poll            Opcode = 40
	NotifyReply     Opcode = 41
	BatchForget     Opcode = 42
	Fallocate       Opcode = 43
	Readdirplus     Opcode = 44
	Rename2         Opcode = 45
	Lseek           Opcode = 46
	CopyFileRange   Opcode = 47
	Setupmapping    Opcode = 48
	Removemapping   Opcode = 49
	Syncfs          Opcode = 50
	Tmpfile         Opcode = 51
	Statx           Opcode = 52
	CopyFileRange64 Opcode = 53
	CuseInit        Opcode = 4096
)

var names = map[Opcode]string{
	Lookup: "LOOKUP", Forget: "FORGET", Getattr: "GETATTR", Setattr: "SETATTR",
	Readlink: "READLINK", Symlink: "SYMLINK", Mknod: "MKNOD", Mkdir: "MKDIR",
	Unlink: "UNLINK", Rmdir: "RMDIR", Rename: "RENAME", Link: "LINK", Open: "OPEN",
	Read: "READ", Write: "WRITE", Statfs: "STATFS", Release: "RELEASE", Fsync: "FSYNC",
	Setxattr: "SETXATTR", Getxattr: "GETXATTR", Listxattr: "LISTXATTR",
	Removexattr: "REMOVEXATTR", Flush: "FLUSH", Init: "INIT", Opendir: "OPENDIR",
	Readdir: "READDIR", Releasedir: "RELEASEDIR", Fsyncdir: "FSYNCDIR", Getlk: "GETLK",
	Setlk: "SETLK", Setlkw: "SETLKW", Access: "ACCESS", Create: "CREATE",
	Interrupt: "INTERRUPT", Bmap: "BMAP", Destroy: "DESTROY", Ioctl: "IOCTL",
	Poll: "POLL", NotifyReply: "NOTIFY_REPLY", BatchForget: "BATCH_FORGET",
	Fallocate: "FALLOCATE", Readdirplus: "READDIRPLUS", Rename2: "RENAME2",
	Lseek: "LSEEK", CopyFileRange: "COPY_FILE_RANGE", Setupmapping: "SETUPMAPPING",
	Removemapping: "REMOVEMAPPING", Syncfs: "SYNCFS", Tmpfile: "TMPFILE",
	Statx: "STATX", CopyFileRange64: "COPY_FILE_RANGE_64", CuseInit: "CUSE_INIT",
}

var byName = func() map[string]Opcode {
	m := make(map[string]Opcode, len(names))
	for op, n := range names {
		m[n] = op
	}
	return m
}()

// String returns the opcode's name without the FUSE_ prefix, or OP_<n> for an
// opcode this table does not know (a newer kernel).
func (o Opcode) String() string {
	if n, ok := names[o]; ok {
		return n
	}
	return "OP_" + strconv.FormatUint(uint64(o), 10)
}

// ParseOpcode accepts a name with or without the FUSE_ prefix, in any case, or
// a decimal opcode number.
func ParseOpcode(s string) (Opcode, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	u = strings.TrimPrefix(u, "FUSE_")
	if op, ok := byName[u]; ok {
		return op, nil
	}
	if n, err := strconv.ParseUint(strings.TrimPrefix(u, "OP_"), 10, 32); err == nil {
		return Opcode(n), nil
	}
	return 0, fmt.Errorf("unknown FUSE opcode %q (known: %s)", s, strings.Join(Names(), ","))
}

// Names lists the known opcode names in opcode order.
func Names() []string {
	ops := make([]Opcode, 0, len(names))
	for op := range names {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i] < ops[j] })
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = op.String()
	}
	return out
}
