package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/labfs"
)

// MountLabFS mounts the lab file system in this process over a new source
// directory and unmounts it when the test ends.
func MountLabFS(t testing.TB, cfg labfs.Config) (src, mnt string, f *labfs.FS) {
	t.Helper()
	src, mnt = t.TempDir(), t.TempDir()
	f, err := labfs.Mount(src, mnt, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	return src, mnt, f
}

// Preset is the lab file system's preset of that name.
func Preset(t testing.TB, name string) labfs.Config {
	t.Helper()
	cfg, err := labfs.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Mounted says whether something is mounted at mnt.
func Mounted(mnt string) bool {
	b, _ := os.ReadFile("/proc/self/mounts")
	return strings.Contains(string(b), " "+mnt+" ")
}

// MountBindfs mounts bindfs (an independent libfuse daemon) over a directory
// of n files, with entry and attr timeouts of 0.
func MountBindfs(t testing.TB, n int) (src, mnt string) {
	t.Helper()
	Need(t, "bindfs", "fusermount3")
	src, mnt = t.TempDir(), t.TempDir()
	for i := 0; i < n; i++ {
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("f%03d", i)), []byte("data\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	Run(t, "bindfs", "-o", "entry_timeout=0,attr_timeout=0,negative_timeout=0", src, mnt)
	t.Cleanup(func() {
		if out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err != nil {
			exec.Command("umount", "-l", mnt).Run()
			t.Logf("fusermount3 -u %s: %v %s", mnt, err, out)
		}
	})
	return src, mnt
}
