package labfs

import (
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The *xattrat system calls (Linux 6.13) act on a name in a directory, so
// an xattr request costs one call on the descriptor of the directory that
// holds the node, where going through /proc (viaProc) costs an open, the
// call on a /proc path, whose walk through procfs costs more than the call
// itself, and a close: 8-10 us per GETXATTR here against about 2. Older
// kernels answer ENOSYS, and viaProc serves there.

// xattrArgs is the kernel's struct xattr_args.
type xattrArgs struct {
	value uint64
	size  uint32
	flags uint32
}

// atFlags acts on name in a directory without following it, or, for "",
// on the descriptor itself (the root, or a file with no name).
func atFlags(name string) int {
	if name == "" {
		return unix.AT_EMPTY_PATH
	}
	return unix.AT_SYMLINK_NOFOLLOW
}

func bytesPtr(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&b[0])))
}

func getxattrat(dir int, name, attr string, dest []byte) (int, error) {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return 0, err
	}
	a, err := unix.BytePtrFromString(attr)
	if err != nil {
		return 0, err
	}
	args := xattrArgs{value: bytesPtr(dest), size: uint32(len(dest))}
	r, _, e := unix.Syscall6(unix.SYS_GETXATTRAT, uintptr(dir), uintptr(unsafe.Pointer(p)), uintptr(atFlags(name)),
		uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args))
	return int(r), errnoErr(e)
}

func setxattrat(dir int, name, attr string, data []byte, flags int) error {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return err
	}
	a, err := unix.BytePtrFromString(attr)
	if err != nil {
		return err
	}
	args := xattrArgs{value: bytesPtr(data), size: uint32(len(data)), flags: uint32(flags)}
	_, _, e := unix.Syscall6(unix.SYS_SETXATTRAT, uintptr(dir), uintptr(unsafe.Pointer(p)), uintptr(atFlags(name)),
		uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args))
	return errnoErr(e)
}

func listxattrat(dir int, name string, dest []byte) (int, error) {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return 0, err
	}
	r, _, e := unix.Syscall6(unix.SYS_LISTXATTRAT, uintptr(dir), uintptr(unsafe.Pointer(p)), uintptr(atFlags(name)),
		uintptr(bytesPtr(dest)), uintptr(len(dest)), 0)
	return int(r), errnoErr(e)
}

func removexattrat(dir int, name, attr string) error {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return err
	}
	a, err := unix.BytePtrFromString(attr)
	if err != nil {
		return err
	}
	_, _, e := unix.Syscall6(unix.SYS_REMOVEXATTRAT, uintptr(dir), uintptr(unsafe.Pointer(p)), uintptr(atFlags(name)),
		uintptr(unsafe.Pointer(a)), 0, 0)
	return errnoErr(e)
}

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// xattr runs at on the directory holding n and n's name in it, or, where
// the *xattrat calls are missing, proc on a /proc path naming n.
func (n *confinedNode) xattr(at func(dir int, name string) error, proc func(p string) error) syscall.Errno {
	if haveXattrat() {
		return n.self(func(dir int, name string) error {
			if name == "" && n.IsRoot() {
				name = "." // AT_EMPTY_PATH refuses the source's O_PATH descriptor
			}
			return at(dir, name)
		})
	}
	return n.viaProc(proc)
}

// haveXattrat says whether the *xattrat calls work here: a kernel before
// 6.13 answers ENOSYS, a container's seccomp profile may answer EPERM; a
// root directory without the attribute asked for answers ENODATA (or
// EOPNOTSUPP, without xattrs).
var haveXattrat = sync.OnceValue(func() bool {
	_, err := getxattrat(unix.AT_FDCWD, "/", "user.fusescope.probe", nil)
	return err == nil || err == unix.ENODATA || err == unix.EOPNOTSUPP
})
