package trace

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// serialFS is a FUSE daemon with one server loop on one thread: it reads a
// request from /dev/fuse, serves it, writes the reply, and only then reads
// the next, as libfuse's single-threaded loop does (go-fuse always reads
// with two goroutines at least). Requests that arrive meanwhile wait in the
// kernel's queue, which is what the queue stage must show. It serves a
// flat directory of files f0..fN-1, each GETATTR taking getattr.
type serialFS struct {
	fd      int
	mnt     string
	files   int
	getattr time.Duration
	done    chan struct{}
}

// mountSerialFS mounts a serialFS with entry and attribute timeouts of 0 and
// unmounts it when the test ends.
func mountSerialFS(t *testing.T, files int, getattr time.Duration) string {
	t.Helper()
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("opening /dev/fuse: %v", err)
	}
	s := &serialFS{fd: fd, mnt: t.TempDir(), files: files, getattr: getattr, done: make(chan struct{})}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", fd)
	if err := unix.Mount("serialfs", s.mnt, "fuse.serialfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		unix.Close(fd)
		t.Fatalf("mounting the serial test file system: %v", err)
	}
	go s.serve()
	t.Cleanup(func() {
		if err := unix.Unmount(s.mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", s.mnt, err)
		}
		<-s.done
		unix.Close(fd)
	})
	return s.mnt
}

func (s *serialFS) serve() {
	defer close(s.done)
	runtime.LockOSThread() // one thread reads, serves and replies
	buf := make([]byte, 1<<20+4096)
	for {
		n, err := unix.Read(s.fd, buf)
		if err == unix.EINTR || err == unix.ENOENT { // interrupted, or a request aborted before we read it
			continue
		}
		if err != nil || n < int(unsafe.Sizeof(fuse.InHeader{})) {
			return // ENODEV: unmounted
		}
		in := (*fuse.InHeader)(unsafe.Pointer(&buf[0]))
		payload := buf[unsafe.Sizeof(fuse.InHeader{}):n]
		var out []byte
		status := int32(0)
		switch in.Opcode {
		case 26: // INIT
			init := (*fuse.InitIn)(unsafe.Pointer(&payload[0]))
			o := fuse.InitOut{Major: 7, Minor: 31, MaxReadAhead: init.MaxReadAhead, MaxBackground: 12,
				CongestionThreshold: 9, MaxWrite: 128 << 10, TimeGran: 1}
			out = asBytes(&o)
		case 1: // LOOKUP
			name := string(bytes.TrimRight(payload, "\x00"))
			i, err := strconv.Atoi(name[1:])
			if in.NodeId != 1 || len(name) < 2 || name[0] != 'f' || err != nil || i < 0 || i >= s.files {
				status = -int32(syscall.ENOENT)
				break
			}
			o := fuse.EntryOut{NodeId: uint64(i) + 2, Generation: 1}
			s.attr(&o.Attr, o.NodeId)
			out = asBytes(&o)
		case 3: // GETATTR
			time.Sleep(s.getattr)
			var o fuse.AttrOut
			s.attr(&o.Attr, in.NodeId)
			out = asBytes(&o)
		case 14, 27: // OPEN, OPENDIR
			out = asBytes(&fuse.OpenOut{})
		case 18, 25, 29: // RELEASE, FLUSH, RELEASEDIR
		case 2, 42: // FORGET, BATCH_FORGET: no reply
			continue
		default:
			status = -int32(syscall.ENOSYS)
		}
		h := fuse.OutHeader{Length: uint32(int(unsafe.Sizeof(fuse.OutHeader{})) + len(out)), Status: status, Unique: in.Unique}
		if status != 0 {
			h.Length, out = uint32(unsafe.Sizeof(h)), nil
		}
		if _, err := unix.Writev(s.fd, [][]byte{asBytes(&h), out}); err != nil && err != unix.ENOENT {
			return
		}
	}
}

func (s *serialFS) attr(a *fuse.Attr, node uint64) {
	a.Ino, a.Nlink = node, 1
	if node == 1 {
		a.Mode = syscall.S_IFDIR | 0o755
		return
	}
	a.Mode, a.Size = syscall.S_IFREG|0o644, 0
}

func asBytes[T any](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}
