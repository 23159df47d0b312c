package trace

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/test/e2e"
	"github.com/fusescope/fusescope/test/labmodes"
	"golang.org/x/sys/unix"
)

// requestMix makes, in dir, requests of most opcodes: files created,
// written, read (whole, past the end, in a big file), stat'ed with and
// without the birth time, changed (mode, size, times), linked, renamed,
// removed; a directory, a FIFO, a symlink read back, a tmpfile, xattrs set,
// read (for their size and their value), listed and removed, one that is
// missing; listings, statfs, fsync, lseek, fallocate, copy_file_range.
func requestMix(t *testing.T, dir string) {
	t.Helper()
	p := func(name string) string { return filepath.Join(dir, name) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(p("a"), bytes.Repeat([]byte("a"), 10000), 0o644))
	must(os.WriteFile(p("big"), bytes.Repeat([]byte("b"), 300<<10), 0o644))
	for _, name := range []string{"a", "big"} {
		if _, err := os.ReadFile(p(name)); err != nil {
			t.Fatal(err)
		}
	}
	var x unix.Statx_t
	must(unix.Statx(unix.AT_FDCWD, p("a"), 0, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &x))
	_, err := os.Stat(p("a"))
	must(err)
	if _, err := os.Stat(p("missing")); err == nil {
		t.Fatal("missing exists")
	}
	must(os.Chmod(p("a"), 0o600))
	must(os.Truncate(p("a"), 5000))
	must(unix.UtimesNano(p("a"), []unix.Timespec{{Sec: 1}, {Sec: 2}}))
	must(os.Mkdir(p("d"), 0o755))
	must(unix.Mkfifo(p("d/fifo"), 0o644))
	must(os.Symlink("a-longer-target-name", p("sym")))
	if target, err := os.Readlink(p("sym")); err != nil || target != "a-longer-target-name" {
		t.Fatalf("readlink: %q %v", target, err)
	}
	must(os.Link(p("a"), p("d/hard")))
	must(os.Rename(p("d/hard"), p("renamed")))
	must(unix.Setxattr(p("a"), "user.color", []byte("blue-green"), 0))
	var buf [256]byte
	if n, err := unix.Getxattr(p("a"), "user.color", nil); n != 10 || err != nil {
		t.Fatalf("getxattr, size only: %d %v", n, err)
	}
	if n, err := unix.Getxattr(p("a"), "user.color", buf[:]); n != 10 || err != nil {
		t.Fatalf("getxattr: %d %v", n, err)
	}
	if _, err := unix.Getxattr(p("a"), "user.missing", buf[:]); err != unix.ENODATA {
		t.Fatalf("getxattr of a missing one: %v", err)
	}
	if _, err := unix.Listxattr(p("a"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Listxattr(p("a"), buf[:]); err != nil {
		t.Fatal(err)
	}
	must(unix.Removexattr(p("a"), "user.color"))
	if _, err := os.ReadDir(dir); err != nil {
		t.Fatal(err)
	}
	var sfs unix.Statfs_t
	must(unix.Statfs(dir, &sfs))
	f, err := os.OpenFile(p("big"), os.O_RDWR, 0)
	must(err)
	if _, err := unix.Seek(int(f.Fd()), 0, unix.SEEK_DATA); err != nil {
		t.Fatal(err)
	}
	must(unix.Fallocate(int(f.Fd()), 0, 300<<10, 4096))
	g, err := os.Create(p("copy"))
	must(err)
	if _, err := unix.CopyFileRange(int(f.Fd()), nil, int(g.Fd()), nil, 8192, 0); err != nil {
		t.Fatal(err)
	}
	must(g.Sync())
	must(g.Close())
	must(f.Close())
	if fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR, 0o600); err == nil {
		unix.Write(fd, []byte("tmp"))
		unix.Close(fd)
	}
	must(os.Remove(p("renamed")))
	must(os.Remove(p("d/fifo")))
	must(os.Remove(p("d")))
}

// byteRows describes, per opcode, a profile's count, errors and bytes.
func byteRows(ops []profile.OpStats, conn uint32) map[string]string {
	m := map[string]string{}
	for _, s := range ops {
		if s.Conn == conn {
			m[s.Op] = fmt.Sprintf("%d requests (%d failed), %d bytes in, %d out", s.Count, s.Errors, s.ReqBytes, s.ReplyBytes)
		}
	}
	return m
}

// The daemon counts the bytes of each request as the kernel sent it and of
// each reply as it went back, headers included, as the kernel tracer does
// (in.h.len and out.h.len): for every opcode of a mix of requests, in
// every mode, its count, errors and bytes are the trace's. Before, it
// counted no request bytes (fs stats: REQ_BYTES 0 for every opcode), and of
// the replies the data alone, of six opcodes (REPLY_BYTES 0 for the rest).
// Requests go-fuse refuses itself (ENOSYS) reach no handler and are the
// kernel's alone.
func TestLabFSStatsBytesAgreeWithTrace(t *testing.T) {
	t.Parallel()
	for name, cfg := range labmodes.All() {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // a mount of its own
			_, mnt, f := e2e.MountLabFS(t, cfg)
			before := f.Record()
			rec := filepath.Join(t.TempDir(), "rec.json")
			tr := e2e.StartTrace(t, "--mount", mnt, "-o", rec)
			requestMix(t, mnt)
			e2e.WaitIdle(t, f.Conn) // the daemon counts a request before it replies
			tr.Stop(t)
			diff, err := f.Record().Profile.Sub(&before.Profile)
			if err != nil {
				t.Fatal(err)
			}
			daemon, kernel := byteRows(diff.Ops, f.Conn), byteRows(e2e.LoadRecord(t, rec).Profile.Ops, f.Conn)
			var wrong []string
			traced := e2e.LoadRecord(t, rec)
			for op, k := range kernel {
				d, ok := daemon[op]
				if s := traced.Profile.Find(f.Conn, mustOpcode(t, op)); !ok && s.Errnos["ENOSYS"] == s.Count {
					continue // refused by go-fuse, before the daemon's handlers
				}
				if d != k {
					wrong = append(wrong, fmt.Sprintf("%s: daemon %s; kernel %s", op, d, k))
				}
			}
			for op, d := range daemon {
				if _, ok := kernel[op]; !ok {
					wrong = append(wrong, fmt.Sprintf("%s: daemon %s; kernel none", op, d))
				}
			}
			sort.Strings(wrong)
			if len(wrong) > 0 {
				t.Errorf("the daemon's counts differ from the kernel's:\n%s", strings.Join(wrong, "\n"))
			}
			if len(kernel) < 25 {
				t.Errorf("the mix made requests of %d opcodes, want 25 at least: %v", len(kernel), kernel)
			}
		})
	}
}

func mustOpcode(t *testing.T, name string) fuseproto.Opcode {
	t.Helper()
	op, err := fuseproto.ParseOpcode(name)
	if err != nil {
		t.Fatal(err)
	}
	return op
}
