package labfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// xattrScript sets, reads, lists and removes extended attributes on a
// file, a directory, the top directory and a symlink in dir, noting each
// result.
func xattrScript(dir string) string {
	var log strings.Builder
	note := func(what string, err error) { fmt.Fprintf(&log, "%s: %v\n", what, err) }
	for _, name := range []string{"f", "d", "", "s"} {
		p := filepath.Join(dir, name)
		note("set "+name, unix.Lsetxattr(p, "user.k", []byte("v-"+name), 0))
		note("set again, create only "+name, unix.Lsetxattr(p, "user.k", []byte("x"), unix.XATTR_CREATE))
		buf := make([]byte, 64)
		n, err := unix.Lgetxattr(p, "user.k", buf)
		note(fmt.Sprintf("get %s %q", name, buf[:max(n, 0)]), err)
		size, err := unix.Lgetxattr(p, "user.k", nil)
		note(fmt.Sprintf("size %s %d", name, size), err)
		_, err = unix.Lgetxattr(p, "user.k", make([]byte, 1))
		note("get into 1 byte "+name, err)
		n, err = unix.Llistxattr(p, buf)
		note(fmt.Sprintf("list %s %q", name, buf[:max(n, 0)]), err)
		note("remove "+name, unix.Lremovexattr(p, "user.k"))
		note("remove again "+name, unix.Lremovexattr(p, "user.k"))
	}
	return log.String()
}

// Extended attributes behave as on the source directory, through the
// *xattrat calls and through /proc, which serves kernels without them.
func TestXattrsAsNative(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts the lab file system")
	}
	layout := func(dir string) {
		os.WriteFile(filepath.Join(dir, "f"), nil, 0o644)
		os.Mkdir(filepath.Join(dir, "d"), 0o755)
		os.Symlink("f", filepath.Join(dir, "s"))
	}
	native := t.TempDir()
	layout(native)
	want := xattrScript(native)
	if !strings.Contains(want, `get f "v-f": <nil>`) {
		t.Fatalf("the native directory did not behave as the test expects:\n%s", want)
	}
	saved := haveXattrat
	defer func() { haveXattrat = saved }()
	for _, at := range []bool{true, false} {
		haveXattrat = func() bool { return at }
		t.Run(fmt.Sprint("xattrat=", at), func(t *testing.T) {
			cfg, _ := Preset("nocache") // every request reaches the daemon
			src, mnt := t.TempDir(), t.TempDir()
			layout(src)
			f, err := Mount(src, mnt, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Unmount()
			if got := xattrScript(mnt); got != want {
				t.Errorf("through the mount:\n%s\nnatively:\n%s", got, want)
			}
		})
	}
}
