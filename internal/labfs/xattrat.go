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

// xattrArgs is the kernel's struct xattr_args on a 64-bit platform, where
// its __aligned_u64 value holds a pointer; a typed pointer keeps the
// buffer known to the garbage collector for the call.
type xattrArgs struct {
	value *byte
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

func bytesPtr(b []byte) *byte {
	if len(b) == 0 {
		return nil
	}
	return &b[0]
}

// xattrCall makes the *xattrat call nr on attr of name in dir: a get or a
// set with the value's buffer in args, a remove with args nil.
func xattrCall(nr uintptr, dir int, name, attr string, args *xattrArgs) (int, error) {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return 0, err
	}
	a, err := unix.BytePtrFromString(attr)
	if err != nil {
		return 0, err
	}
	var size uintptr
	if args != nil {
		size = unsafe.Sizeof(*args)
	}
	r, _, e := unix.Syscall6(nr, uintptr(dir), uintptr(unsafe.Pointer(p)), uintptr(atFlags(name)),
		uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(args)), size)
	return int(r), errnoErr(e)
}

func getxattrat(dir int, name, attr string, dest []byte) (int, error) {
	return xattrCall(unix.SYS_GETXATTRAT, dir, name, attr, &xattrArgs{value: bytesPtr(dest), size: uint32(len(dest))})
}

func setxattrat(dir int, name, attr string, data []byte, flags int) error {
	_, err := xattrCall(unix.SYS_SETXATTRAT, dir, name, attr, &xattrArgs{value: bytesPtr(data), size: uint32(len(data)), flags: uint32(flags)})
	return err
}

func removexattrat(dir int, name, attr string) error {
	_, err := xattrCall(unix.SYS_REMOVEXATTRAT, dir, name, attr, nil)
	return err
}

func listxattrat(dir int, name string, dest []byte) (int, error) {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return 0, err
	}
	r, _, e := unix.Syscall6(unix.SYS_LISTXATTRAT, uintptr(dir), uintptr(unsafe.Pointer(p)), uintptr(atFlags(name)),
		uintptr(unsafe.Pointer(bytesPtr(dest))), uintptr(len(dest)), 0)
	return int(r), errnoErr(e)
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
			// AT_EMPTY_PATH refuses O_PATH descriptors: the source's, and
			// an orphan's (a file with no name the mount knows).
			if name == "" && n.IsDir() {
				name = "."
			} else if name == "" {
				return proc(procFD(dir))
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
	if unsafe.Sizeof(xattrArgs{}) != 16 { // a 32-bit platform
		return false
	}
	_, err := getxattrat(unix.AT_FDCWD, "/", "user.fusescope.probe", nil)
	return err == nil || err == unix.ENODATA || err == unix.EOPNOTSUPP
})
