package labfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

type seekable interface {
	Seekable() (fd uintptr, off int64, sz int)
}

// go-fuse splices a READ reply from the backing file only when the result
// has a Seekable method; the timing wrapper must keep it, must not claim it
// for results that have none, and must count the bytes the reply carried.
func TestTimeReadKeepsSplice(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write(make([]byte, 5000))
	var got []int
	record := func(n int) { got = append(got, n) }

	res := timeRead(fuse.ReadResultFd(f.Fd(), 4096, 904), 904, record)
	s, ok := res.(seekable)
	if !ok {
		t.Fatal("a timed file-backed READ lost its Seekable method: go-fuse would copy instead of splicing")
	}
	if fd, off, sz := s.Seekable(); fd != f.Fd() || off != 4096 || sz != 904 {
		t.Errorf("Seekable() = %d, %d, %d; want %d, 4096, 904", fd, off, sz, f.Fd())
	}
	if res.Size() != 904 {
		t.Errorf("Size() = %d", res.Size())
	}
	res.Done()

	// go-fuse's path when it does not splice: the bytes copied count.
	copied := timeRead(fuse.ReadResultFd(f.Fd(), 4096, 8192), 8192, record)
	if b, st := copied.Bytes(make([]byte, 8192)); st != fuse.OK || len(b) != 904 {
		t.Errorf("Bytes() = %d bytes, %v", len(b), st)
	}
	copied.Done()

	data := timeRead(fuse.ReadResultData([]byte("abc")), 3, record)
	if _, ok := data.(seekable); ok {
		t.Error("a timed in-memory READ claims to be seekable")
	}
	if b, st := data.Bytes(nil); st != fuse.OK || string(b) != "abc" {
		t.Errorf("Bytes() = %q, %v", b, st)
	}
	data.Done()

	if len(got) != 3 || got[0] != 904 || got[1] != 904 || got[2] != 3 {
		t.Errorf("recorded reply bytes %v, want [904 904 3]", got)
	}
}

// A READ's result is sized to what the file holds: an fstat only where the
// read goes past the size last seen, or after a request that may have
// shortened a file.
func TestReadableSizes(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write(make([]byte, 5000))
	n, fd := &confinedNode{shrinks: new(atomic.Uint64)}, int(f.Fd())
	other := &confinedNode{shrinks: new(atomic.Uint64)} // a node of another mount
	check := func(what string, off int64, want, got int) {
		t.Helper()
		if r := n.readable(fd, off, want); r != got {
			t.Errorf("%s: readable(%d, %d) = %d, want %d", what, off, want, r, got)
		}
	}
	check("across the end", 4096, 131072, 904)
	check("inside", 0, 4096, 4096)
	// Shortened behind the daemon's back: the size last seen still holds,
	// which is what spares the fstat.
	f.Truncate(100)
	check("shortened in SRC", 0, 4096, 4096)
	other.shrinks.Add(1) // a truncate through another mount
	check("after another mount's truncate", 0, 4096, 4096)
	n.shrinks.Add(1) // a truncate through the mount
	check("after a truncate", 0, 4096, 100)
	f.Truncate(9000)
	check("grown past the size seen", 4096, 131072, 4904)
	check("at the end", 9000, 4096, 0)
}

// Only root with CAP_FSETID in its effective set keeps set-ID bits when it
// writes; the caller's capabilities come from /proc.
func TestMayKeepPrivs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the callers are root with and without CAP_FSETID")
	}
	// A root process without CAP_FSETID: dropped from its bounding set, it
	// is not in its effective set after exec.
	dropped := exec.Command("setpriv", "--bounding-set=-fsetid", "sleep", "30")
	if err := dropped.Start(); err != nil {
		t.Skip("setpriv: ", err)
	}
	defer func() { dropped.Process.Kill(); dropped.Wait() }()
	// setpriv has exec'd sleep once /proc names it so.
	for i := 0; i < 200; i++ {
		if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(dropped.Process.Pid) + "/comm"); strings.TrimSpace(string(comm)) == "sleep" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	self := uint32(os.Getpid())
	cases := []struct {
		name   string
		caller fuse.Caller
		want   bool
	}{
		{"root with CAP_FSETID", fuse.Caller{Owner: fuse.Owner{Uid: 0}, Pid: self}, true},
		{"root without CAP_FSETID", fuse.Caller{Owner: fuse.Owner{Uid: 0}, Pid: uint32(dropped.Process.Pid)}, false},
		{"another user", fuse.Caller{Owner: fuse.Owner{Uid: 1000}, Pid: self}, false},
		{"a process gone", fuse.Caller{Owner: fuse.Owner{Uid: 0}, Pid: 1 << 30}, false},
	}
	for _, c := range cases {
		if got := mayKeepPrivs(c.caller); got != c.want {
			t.Errorf("%s: mayKeepPrivs(%+v) = %v, want %v", c.name, c.caller, got, c.want)
		}
	}
}

// What a directory's default ACL was is trusted for the attribute timeout,
// forgotten when it changes or the kernel forgets the node, and never kept
// with a timeout of 0.
func TestDefaultACLsExpire(t *testing.T) {
	if newDefaultACLs(0) != nil {
		t.Fatal("an attribute timeout of 0 must remember nothing")
	}
	var none *defaultACLs
	none.put(1, true, 0)
	if _, known := none.get(1, 0); known {
		t.Error("a nil cache answered")
	}
	d := newDefaultACLs(time.Second)
	d.put(7, true, 10*time.Second)
	if has, known := d.get(7, 10*time.Second+999*time.Millisecond); !has || !known {
		t.Errorf("within the timeout: has %v known %v, want true true", has, known)
	}
	if _, known := d.get(7, 11*time.Second); known {
		t.Error("trusted past the timeout")
	}
	if _, known := d.get(8, 10*time.Second); known {
		t.Error("an unknown directory answered")
	}
	d.put(7, false, 20*time.Second)
	d.drop(7)
	if _, known := d.get(7, 20*time.Second); known {
		t.Error("answered after drop")
	}
}
