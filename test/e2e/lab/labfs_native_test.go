package lab

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/test/e2e"
	"github.com/fusescope/fusescope/test/labmodes"
	"golang.org/x/sys/unix"
)

// The lab file system answers as a native directory where a native file
// system's rules are subtle: direct I/O at the end of a file, a file
// whose last name is gone, a chown that changes nothing.

// directReads writes files of the given sizes into dir and reads each back
// with O_DIRECT in aligned reads (a page-aligned buffer, lengths of 4 and 8
// KiB) until the end of the file, as dd iflag=direct does; it describes
// what each read returned, and whether the bytes were the file's.
func directReads(t *testing.T, dir string, sizes []int) string {
	t.Helper()
	buf, err := unix.Mmap(-1, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	var log strings.Builder
	rng := rand.New(rand.NewPCG(21, 39))
	for _, size := range sizes {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		name := filepath.Join(dir, fmt.Sprintf("direct-%d", size))
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, bs := range []int{4096, 8192} {
			fmt.Fprintf(&log, "size %d bs %d:", size, bs)
			fd, err := unix.Open(name, unix.O_RDONLY|unix.O_DIRECT, 0)
			if err != nil {
				fmt.Fprintf(&log, " open %v\n", err)
				continue
			}
			var got []byte
			for off := 0; ; {
				n, err := unix.Pread(fd, buf[:bs], int64(off))
				if err != nil {
					fmt.Fprintf(&log, " %v", err)
					break
				}
				fmt.Fprintf(&log, " %d", n)
				got = append(got, buf[:n]...)
				if off += n; n == 0 || off > size+bs {
					break
				}
			}
			unix.Close(fd)
			fmt.Fprintf(&log, "; the file's bytes: %v\n", bytes.Equal(got, data))
		}
		// A direct read of an unaligned length is refused (ext4: EINVAL).
		if fd, err := unix.Open(name, unix.O_RDONLY|unix.O_DIRECT, 0); err == nil {
			n, err := unix.Pread(fd, buf[:1000], 0)
			fmt.Fprintf(&log, "size %d, 1,000 bytes: %d %v\n", size, n, err)
			unix.Close(fd)
		}
	}
	return log.String()
}

// writeBesideDirect writes 1,000 bytes through one open file of a new file
// of dir while another open file of it has O_DIRECT, and says how fsync
// and close went and what the file then holds in src. The page cache
// writes its pages back through either open file (write-back caching), up
// to the end of the file: an unaligned length.
func writeBesideDirect(t *testing.T, dir, src string) string {
	t.Helper()
	name := filepath.Join(dir, "beside-direct")
	buffered, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := unix.Open(name, unix.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		buffered.Close()
		t.Fatal(err)
	}
	defer unix.Close(direct)
	data := bytes.Repeat([]byte("w"), 1000)
	_, werr := buffered.Write(data)
	serr := buffered.Sync()
	cerr := buffered.Close()
	b, _ := os.ReadFile(filepath.Join(src, "beside-direct"))
	return fmt.Sprintf("write %v, fsync %v, close %v; SRC holds the bytes: %v", werr, serr, cerr, bytes.Equal(b, data))
}

// An O_DIRECT read that runs past the end of a file returns what the file
// holds, as natively, in every mode. Before, every mode but passthrough
// failed it with EINVAL (dd if=MNT/x iflag=direct bs=4096 of a 1,000-byte
// file: 0 bytes, native 1,000): the daemon opened the backing file with
// the caller's O_DIRECT, cut the read at the end of the file, and so read
// an unaligned length, which ext4 refuses under O_DIRECT. A direct read of
// an unaligned length is still refused, as natively. And the page cache's
// write-back through a file opened with O_DIRECT reaches SRC: before, in
// the writeback presets, fsync failed with EINVAL and the 1,000 bytes
// written never reached SRC (close said nothing).
func TestLabFSDirectReadAtEndOfFile(t *testing.T) {
	t.Parallel()
	native := t.TempDir()
	fd, err := unix.Open(filepath.Join(native, "probe"), unix.O_CREAT|unix.O_RDWR|unix.O_DIRECT, 0o644)
	if err != nil {
		t.Skipf("the test's directory (%s) takes no O_DIRECT (tmpfs before Linux 6.6?): %v; run it where TMPDIR is on ext4 or xfs", native, err)
	}
	unix.Close(fd)
	sizes := []int{1000, 4096, 5000, 12289}
	want := directReads(t, native, sizes)
	if strings.Contains(want, "false") || strings.Count(want, "invalid argument") != len(sizes) {
		t.Fatalf("native direct reads:\n%s", want)
	}
	wantBeside := writeBesideDirect(t, native, native)
	if !strings.HasSuffix(wantBeside, "true") {
		t.Fatalf("natively: %s", wantBeside)
	}
	for name, cfg := range labmodes.All() {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // a mount of its own
			src, mnt, _ := e2e.MountLabFS(t, cfg)
			if got := directReads(t, mnt, sizes); got != want {
				t.Errorf("direct reads in %s differ from a native directory's:\n--- labfs\n%s--- native\n%s", name, got, want)
			}
			if got := writeBesideDirect(t, mnt, src); got != wantBeside {
				t.Errorf("in %s: %s\nwant, as natively: %s", name, got, wantBeside)
			}
		})
	}
}

// A file written, closed and unlinked leaves the kernel with times to
// write back (write-back caching keeps mtime and ctime in the kernel):
// syncfs sends them in a SETATTR for an inode with neither a name nor an
// open file. Before, the daemon answered ENOENT and `sync -f` failed in the
// writeback preset (native: exit 0), one SETATTR error in fs stats each
// time. The same for a file whose other name the kernel never looked up
// (made in SRC): the SETATTR must reach it, and nothing else; for a file
// replaced by a rename; and a shell inside a removed directory stats and
// lists it, as natively (before: ENOENT).
func TestLabFSSyncfsAfterUnlink(t *testing.T) {
	t.Parallel()
	const script = `set -e
echo hello > "$1/f"; rm "$1/f"; sync -f "$1"
echo linked > "$1/g"; ln "$2/g" "$2/g2"; rm "$1/g"; sync -f "$1"
echo old > "$1/h"; echo new > "$1/i"; mv "$1/i" "$1/h"; sync -f "$1"; rm "$1/h"; sync -f "$1"
mkdir "$1/d"; cd "$1/d"; rmdir ../d; stat -c %h . >/dev/null; ls . >/dev/null`
	native := t.TempDir()
	if out, err := exec.Command("sh", "-c", script, "sh", native, native).CombinedOutput(); err != nil {
		t.Fatalf("natively: %v\n%s", err, out)
	}
	for name, cfg := range labmodes.All() {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // a mount of its own
			src, mnt, f := e2e.MountLabFS(t, cfg)
			if out, err := exec.Command("sh", "-c", script, "sh", mnt, src).CombinedOutput(); err != nil {
				t.Errorf("%v (native: exit 0)\n%s", err, out)
			}
			if b, err := os.ReadFile(filepath.Join(src, "g2")); err != nil || string(b) != "linked\n" {
				t.Errorf("g2, the name the mount never saw: %q, %v", b, err)
			}
			// LOOKUPs of the new names find nothing, and GETXATTRs of
			// security.capability nothing either; nothing else fails.
			for _, s := range f.Record().Profile.Ops {
				if s.Errnos["ENOENT"] > 0 && s.Op != "LOOKUP" || s.Op == "SETATTR" && s.Errors > 0 {
					t.Errorf("%s failed %d times: %v", s.Op, s.Errors, s.Errnos)
				}
			}
			if ents, _ := os.ReadDir(src); len(ents) != 1 {
				t.Errorf("SRC holds %d entries, want g2 alone", len(ents))
			}
		})
	}
}

// ctimeOf is a file's ctime as stat shows it.
func ctimeOf(t *testing.T, path string) time.Time {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return time.Unix(st.Ctim.Unix())
}

// afterCoarseClock waits until the kernel's coarse clock, which file
// times come from, has passed t: a change made then gets a later time.
func afterCoarseClock(t *testing.T, after time.Time) {
	t.Helper()
	e2e.WaitFor(t, "the coarse clock passes "+after.String(), func() bool {
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts)
		return time.Unix(ts.Unix()).After(after)
	})
}

// chownNothing runs chown(f, -1, -1) and fchown(fd, -1, -1) on a new file
// of dir, whose backing file is in src, and says which of them moved its
// ctime, as the mount and as the backing file show it.
func chownNothing(t *testing.T, dir, src string) string {
	t.Helper()
	name := filepath.Join(dir, "owned")
	if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	before, beforeSrc := ctimeOf(t, name), ctimeOf(t, filepath.Join(src, "owned"))
	afterCoarseClock(t, later(before, beforeSrc))
	if err := os.Chown(name, -1, -1); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&log, "chown: ctime moved %v, in SRC %v\n", ctimeOf(t, name).After(before), ctimeOf(t, filepath.Join(src, "owned")).After(beforeSrc))
	before, beforeSrc = ctimeOf(t, name), ctimeOf(t, filepath.Join(src, "owned"))
	fh, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	afterCoarseClock(t, later(before, beforeSrc))
	if err := fh.Chown(-1, -1); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&log, "fchown: ctime moved %v, in SRC %v\n", ctimeOf(t, name).After(before), ctimeOf(t, filepath.Join(src, "owned")).After(beforeSrc))
	return log.String()
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

// chown(f, -1, -1) changes nothing but ctime, which ext4 moves; so does the
// lab file system, in every mode, both as the mount shows it and in the
// backing file, which a later lookup shows. Before, no mode moved it in
// the backing file, and only writeback in the kernel's cache (until the
// inode was read again).
func TestLabFSChownNothingMovesCtime(t *testing.T) {
	t.Parallel()
	native := t.TempDir()
	want := chownNothing(t, native, native)
	if strings.Contains(want, "false") {
		t.Fatalf("natively:\n%s", want)
	}
	for name, cfg := range labmodes.All() {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // a mount of its own
			src, mnt, _ := e2e.MountLabFS(t, cfg)
			if got := chownNothing(t, mnt, src); got != want {
				t.Errorf("in %s:\n%swant, as natively:\n%s", name, got, want)
			}
		})
	}
}
