package session

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// save does what a run with -o path does at its end: it writes s there.
func save(t *testing.T, path, s string) {
	t.Helper()
	o, err := CreateOutput(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Finish(func(w io.Writer) error { _, err := io.WriteString(w, s); return err }); err != nil {
		t.Fatal(err)
	}
}

// -o renames a temporary file over a regular file, but writes a device or a
// pipe in place: renaming over /dev/null once turned it into a file.
func TestOutputKeepsDevicesAndPipes(t *testing.T) {
	// A null device of the test's own, so that a failure cannot break the
	// machine's /dev/null (mknod needs root; the pipe below does not).
	if os.Geteuid() == 0 {
		null := filepath.Join(t.TempDir(), "null")
		if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Fatal(err)
		}
		save(t, null, "record")
		if fi, err := os.Stat(null); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
			t.Fatalf("a null device after -o: %v, %v; want the character device", fi.Mode(), err)
		}
	}

	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan string)
	go func() {
		b, _ := os.ReadFile(fifo)
		got <- string(b)
	}()
	save(t, fifo, "through the pipe")
	if s := <-got; s != "through the pipe" {
		t.Errorf("the pipe's reader got %q", s)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO after -o: %v, %v", fi.Mode(), err)
	}
}

func TestOutputFollowsSymlinksAndRefusesDirectories(t *testing.T) {
	dir := t.TempDir()
	target, link := filepath.Join(dir, "target.json"), filepath.Join(dir, "latest.json")
	os.WriteFile(target, []byte("old"), 0o644)
	if err := os.Symlink("target.json", link); err != nil {
		t.Fatal(err)
	}
	save(t, link, "new")
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link after -o: %v, %v; want it kept", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(target); string(b) != "new" {
		t.Errorf("the link's target holds %q, want the new record", b)
	}

	// A run that saves nothing leaves the old file as it was.
	o, err := CreateOutput(target)
	if err != nil {
		t.Fatal(err)
	}
	o.Finish(nil)
	if b, _ := os.ReadFile(target); string(b) != "new" {
		t.Errorf("after a run with nothing to save: %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("left behind: %v", entries)
	}

	if _, err := CreateOutput(dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("-o DIR: %v, want a one-line refusal", err)
	}
}
