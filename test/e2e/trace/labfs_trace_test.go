package trace

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/labfs"
	"github.com/fusescope/fusescope/test/e2e"
	"golang.org/x/sys/unix"
)

// The lab file system's own figures (its latencies, its counts, the bytes
// of its replies) against the kernel's, as fusescope trace sees them.

// Injected latency shows in the kernel's measurement and in the daemon's.
func TestLabFSLatencyInjection(t *testing.T) {
	// Not parallel: it measures the injected latencies, which other tests' load would stretch.
	cfg := e2e.Preset(t, "nocache")
	const injected = 3 * time.Millisecond // mid-bucket: [2^21, 2^22) ns is 2.10-4.19 ms
	cfg.Latency = labfs.LatencySpec{"GETATTR": {Base: injected}}
	_, mnt, f := e2e.MountLabFS(t, cfg)
	e2e.Timed(t, 5, func() (stretched []string) {
		rec := filepath.Join(t.TempDir(), "rec.json")
		// The daemon's requests while the trace ran only: its count since
		// mount holds the mount's own GETATTR, whose time (slow on a loaded
		// machine) is no request the trace saw.
		tr := e2e.StartTrace(t, "--mount", mnt, "--op", "GETATTR", "-o", rec)
		before := f.Record().Profile
		for i := 0; i < 50; i++ {
			os.Stat(mnt)
		}
		e2e.WaitIdle(t, f.Conn)
		during, err := f.Record().Profile.Sub(&before)
		if err != nil {
			t.Fatal(err)
		}
		tr.Stop(t)
		k := e2e.LoadRecord(t, rec).Profile.Find(f.Conn, fuseproto.Getattr)
		d := during.Find(f.Conn, fuseproto.Getattr)
		if k == nil || d == nil || k.Count < 50 {
			t.Fatalf("GETATTR missing: kernel %+v daemon %+v", k, d)
		}
		// Above the injected latency, load may have stretched it.
		p50 := k.Latency.Quantile(0.5)
		if b := hist.Bucket(uint64(p50)); b != 21 {
			stretched = append(stretched, e2e.Stretched("kernel-side GETATTR p50 %.0f ns in bucket %d, want 21 (3 ms injected)", p50, b))
		}
		if p50 < float64(injected) {
			t.Errorf("kernel-side GETATTR p50 %.0f ns, below the injected %v", p50, injected)
		} else if p50 > float64(injected+time.Millisecond) {
			stretched = append(stretched, e2e.Stretched("kernel-side GETATTR p50 %.0f ns, want within 1 ms above the injected %v", p50, injected))
		}
		// The sleeper aims at the median; a single wakeup may come a little early.
		if d.Latency.Min < uint64(injected-100*time.Microsecond) {
			t.Errorf("daemon-side GETATTR min %d ns, well below the injected %v", d.Latency.Min, injected)
		}
		// The kernel's time includes the daemon's: per request, kernel >= daemon.
		if k.Latency.Sum/k.Count < d.Latency.Sum/d.Count {
			t.Errorf("kernel mean %d ns < daemon mean %d ns", k.Latency.Sum/k.Count, d.Latency.Sum/d.Count)
		}
		return stretched
	})
}

// getattr= slows stat(1), whose statx asks for the birth time, which the
// kernel asks the daemon for with STATX, not GETATTR. Before, 10 runs of
// stat with --latency getattr=3ms took a few milliseconds in all, the
// daemon's STATX p50 some 40 us.
func TestLabFSGetattrLatencyCoversStatx(t *testing.T) {
	// Not parallel: it measures the injected latencies, which other tests' load would stretch.
	e2e.Need(t, "stat")
	cfg := e2e.Preset(t, "nocache") // attributes time out at once: every stat asks
	const injected = 3 * time.Millisecond
	cfg.Latency = labfs.LatencySpec{"GETATTR": {Base: injected}}
	_, mnt, f := e2e.MountLabFS(t, cfg)
	file := filepath.Join(mnt, "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	const runs = 10
	before := f.Record()
	rec := filepath.Join(t.TempDir(), "rec.json")
	tr := e2e.StartTrace(t, "--mount", mnt, "--op", "STATX", "-o", rec)
	for i := 0; i < runs; i++ {
		e2e.Run(t, "stat", file)
	}
	tr.Stop(t)
	diff, err := f.Record().Profile.Sub(&before.Profile)
	if err != nil {
		t.Fatal(err)
	}
	d, k := diff.Find(f.Conn, fuseproto.Statx), e2e.LoadRecord(t, rec).Profile.Find(f.Conn, fuseproto.Statx)
	if d == nil || k == nil {
		t.Skipf("this kernel (%s) sent no STATX for stat(1)", kernel.Release())
	}
	// The kernel's view (the trace) and the daemon's: every STATX waited.
	if d.Count < runs || d.Latency.Min < uint64(injected-100*time.Microsecond) {
		t.Errorf("stat(1) with --latency getattr=%v: the daemon served %d STATX, the fastest in %v; want %d at least, none faster than the delay", injected, d.Count, time.Duration(d.Latency.Min), runs)
	}
	if p50 := k.Latency.Quantile(0.5); p50 < float64(injected) {
		t.Errorf("stat(1) with --latency getattr=%v: the kernel's STATX p50 %v", injected, time.Duration(p50))
	}
}

// With HANDLE_KILLPRIV_V2 the kernel stops asking GETXATTR
// security.capability before each write (it asks once per inode);
// --killpriv-v2=false restores the round trip per write.
// Either way a write by an unprivileged user clears set-user-ID, as natively.
func TestLabFSKillprivV2(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "setpriv")
	const writes = 64
	counts := map[bool]uint64{}
	for _, on := range []bool{true, false} {
		cfg := e2e.Preset(t, "default")
		cfg.NoKillprivV2 = !on
		src, mnt, f := e2e.MountLabFS(t, cfg)
		os.Chmod(src, 0o777)
		file := filepath.Join(mnt, "data")
		if err := os.WriteFile(file, nil, 0o666); err != nil {
			t.Fatal(err)
		}
		rec := filepath.Join(t.TempDir(), "rec.json")
		tr := e2e.StartTrace(t, "--mount", mnt, "-o", rec)
		fh, err := os.OpenFile(file, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		block := make([]byte, 4096)
		for i := 0; i < writes; i++ {
			fh.Write(block)
		}
		fh.Close()
		tr.Stop(t)
		if s := e2e.LoadRecord(t, rec).Profile.Find(f.Conn, fuseproto.Getxattr); s != nil {
			counts[on] = s.Count
		}

		// suid cleared by an unprivileged writer, on the mount and natively.
		for _, dir := range []string{mnt, t.TempDir()} {
			os.Chmod(filepath.Dir(dir), 0o755) // the test's own temp dir is 0700
			os.Chmod(dir, 0o777)
			p := filepath.Join(dir, "suid")
			os.WriteFile(p, []byte("x"), 0o755)
			// os.Chmod would drop 0o4000: Go spells set-user-ID os.ModeSetuid.
			if err := unix.Chmod(p, 0o4777); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(p); err != nil || fi.Mode()&os.ModeSetuid == 0 {
				t.Fatalf("%s: %v, mode %v: not set-user-ID before the write", p, err, fi.Mode())
			}
			out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
				"sh", "-c", "echo more >> "+p).CombinedOutput()
			if err != nil {
				t.Fatalf("write as nobody: %v %s", err, out)
			}
			// The backing file is the oracle: the kernel also clears the
			// mode it caches, which a stat through the mount would show.
			backing := p
			if dir == mnt {
				backing = filepath.Join(src, "suid")
			}
			fi, err := os.Stat(backing)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode()&os.ModeSetuid != 0 {
				t.Errorf("killpriv_v2=%v: %s still set-user-ID after a write by nobody", on, backing)
			}
		}
	}
	// With HANDLE_KILLPRIV_V2 the kernel sets SB_NOSEC: the first write
	// checks security.capability once and marks the inode S_NOSEC.
	if counts[true] > 1 {
		t.Errorf("with HANDLE_KILLPRIV_V2: %d GETXATTR for %d writes to one file, want at most 1", counts[true], writes)
	}
	if counts[false] < writes {
		t.Errorf("without HANDLE_KILLPRIV_V2: %d GETXATTR for %d writes, want one per write", counts[false], writes)
	}
	t.Logf("GETXATTR for %d writes: %d with killpriv_v2, %d without", writes, counts[true], counts[false])
}

// The daemon's counts agree with the kernel's for the same run.
func TestLabFSStatsAgreeWithTrace(t *testing.T) {
	t.Parallel()
	cfg := e2e.Preset(t, "nocache")
	src, mnt, f := e2e.MountLabFS(t, cfg)
	for i := 0; i < 20; i++ {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("f%d", i)), []byte("data"), 0o644)
	}
	big := filepath.Join(mnt, "big")
	os.WriteFile(big, make([]byte, 9000), 0o644)
	e2e.WaitIdle(t, f.Conn) // its RELEASE is sent in the background, after the close returned
	before := f.Record()
	rec := filepath.Join(t.TempDir(), "rec.json")
	tr := e2e.StartTrace(t, "--mount", mnt, "-o", rec)
	for i := 0; i < 20; i++ {
		os.ReadFile(filepath.Join(mnt, fmt.Sprintf("f%d", i)))
	}
	// A file read, then shortened through the mount (a truncate, then an
	// open with O_TRUNC) and read again: each reply counts what it carried,
	// not what the size the daemon saw before would allow.
	truncOpen := func() {
		if f, err := os.OpenFile(big, os.O_WRONLY|os.O_TRUNC, 0); err == nil {
			f.Close()
		}
	}
	for _, shorten := range []func(){func() {}, func() { os.Truncate(big, 10) }, truncOpen} {
		shorten()
		if _, err := os.ReadFile(big); err != nil {
			t.Fatal(err)
		}
	}
	// One xattr read of 5 bytes, one that fails, one that asks the size.
	if err := unix.Setxattr(filepath.Join(src, "f0"), "user.k", []byte("value"), 0); err != nil {
		t.Fatalf("the source file system has no user xattrs: %v", err)
	}
	var buf [64]byte
	if n, err := unix.Getxattr(filepath.Join(mnt, "f0"), "user.k", buf[:]); n != 5 || err != nil {
		t.Errorf("getxattr user.k: %d, %v", n, err)
	}
	if _, err := unix.Getxattr(filepath.Join(mnt, "f0"), "user.missing", buf[:]); err != unix.ENODATA {
		t.Errorf("getxattr user.missing: %v, want ENODATA", err)
	}
	if n, err := unix.Getxattr(filepath.Join(mnt, "f0"), "user.k", nil); n != 5 || err != nil {
		t.Errorf("getxattr user.k, size only: %d, %v", n, err)
	}
	e2e.WaitIdle(t, f.Conn) // the daemon counts a request before it replies
	tr.Stop(t)
	after := f.Record()
	kernel := e2e.LoadRecord(t, rec)
	diff, err := after.Profile.Sub(&before.Profile)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []fuseproto.Opcode{fuseproto.Lookup, fuseproto.Open, fuseproto.Read, fuseproto.Release} {
		k, d := kernel.Profile.Find(f.Conn, op), diff.Find(f.Conn, op)
		if k == nil || d == nil || k.Count != d.Count {
			t.Errorf("%s: kernel %+v, daemon %+v", op, k, d)
		}
	}
	// The daemon counts the bytes its READ replies carried, each with its
	// 16-byte header, as the kernel does: 20 files of 4 bytes, 9,000 and
	// 10 of big, and an empty read at each end of file.
	k, d := kernel.Profile.Find(f.Conn, fuseproto.Read), diff.Find(f.Conn, fuseproto.Read)
	if k == nil || d == nil || d.ReplyBytes != 80+9000+10+16*d.Count || k.ReplyBytes != d.ReplyBytes || k.ReqBytes != d.ReqBytes {
		t.Errorf("READ bytes: daemon %+v (want 9090 bytes of data), kernel %+v", d, k)
	}
	// GETXATTR: 5 bytes of data, the size-only reply's 8-byte body, and
	// each reply's header. A failed request's reply is its header alone
	// (the daemon once counted the loopback's -1 as 4 GiB). Besides the
	// three user.k reads, each truncation of big asks for
	// security.capability (ENODATA).
	k, d = kernel.Profile.Find(f.Conn, fuseproto.Getxattr), diff.Find(f.Conn, fuseproto.Getxattr)
	if k == nil || d == nil || k.Count != d.Count || k.Count != 5 || d.Errors != 3 || d.ReplyBytes != 16*d.Count+5+8 || k.ReplyBytes != d.ReplyBytes || k.ReqBytes != d.ReqBytes {
		t.Errorf("GETXATTR: kernel %+v, daemon %+v; want 5 requests, 3 errors, 5 data bytes", k, d)
	}
	// The control socket is the mounting user's alone.
	fi, err := os.Stat(labfs.SocketPath(mnt))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("control socket: %v %v", fi, err)
	}
	out := e2e.Run(t, e2e.Fusescope, "fs", "stats", "--no-hist", mnt)
	// nocache, named (its flags over the default preset would be five).
	if !strings.Contains(out, "config: the nocache preset\n") {
		t.Errorf("fs stats does not show the nocache preset's flags:\n%s", out)
	}
	if !strings.Contains(out, "negotiated INIT flags") || !strings.Contains(out, "READ") || !strings.Contains(out, "timer overhead") {
		t.Errorf("fs stats output:\n%s", out)
	}
	// show renders the stats' record as fs stats printed it. The daemon's
	// heap may move between the two, and a process outside the test may
	// reach the mount (a walk of /tmp: a LOOKUP, a GETATTR); the text is
	// taken before and after the record, and the record compared with it
	// when the two agree.
	heap := regexp.MustCompile(`heap [0-9.]+[KMG]?`)
	text := func() string {
		return heap.ReplaceAllString(e2e.Run(t, e2e.Fusescope, "fs", "stats", "--no-hist", mnt), "heap N")
	}
	saved := filepath.Join(t.TempDir(), "stats.json")
	for try := 1; ; try++ {
		before := text()
		os.WriteFile(saved, e2e.MustRead(t, e2e.Fusescope, "fs", "stats", "--json", mnt), 0o644)
		if after := text(); after != before {
			if try < 5 {
				continue
			}
			t.Fatalf("the mount served requests between each of 5 pairs of fs stats; the last pair:\n%s", e2e.LineDiff(before, after))
		}
		shown := heap.ReplaceAllString(string(e2e.MustRead(t, e2e.Fusescope, "show", "--no-hist", saved)), "heap N")
		if shown != before {
			t.Errorf("show of fs stats --json differs from what fs stats printed:\n%s", e2e.LineDiff(before, shown))
		}
		break
	}
}

// The daemon counts the listing its READDIR and READDIRPLUS replies carried,
// headers included, as the kernel does.
func TestLabFSListingBytesAgreeWithTrace(t *testing.T) {
	t.Parallel()
	for _, plus := range []string{"off", "on"} {
		cfg := e2e.Preset(t, "nocache")
		cfg.Readdirplus = plus
		src, mnt, f := e2e.MountLabFS(t, cfg)
		for i := 0; i < 300; i++ { // more than one reply's worth (4 KiB) of entries
			os.WriteFile(filepath.Join(src, fmt.Sprintf("a-longer-file-name-%03d", i)), nil, 0o644)
		}
		op := map[string]fuseproto.Opcode{"off": fuseproto.Readdir, "on": fuseproto.Readdirplus}[plus]
		before := f.Record()
		rec := filepath.Join(t.TempDir(), "rec.json")
		tr := e2e.StartTrace(t, "--mount", mnt, "--op", op.String(), "-o", rec)
		if ents, err := os.ReadDir(mnt); err != nil || len(ents) != 300 {
			t.Fatalf("readdirplus=%s: %d entries, %v", plus, len(ents), err)
		}
		e2e.WaitIdle(t, f.Conn) // RELEASEDIR, sent in the background; the daemon counts a request before it replies
		tr.Stop(t)
		diff, err := f.Record().Profile.Sub(&before.Profile)
		if err != nil {
			t.Fatal(err)
		}
		k, d := e2e.LoadRecord(t, rec).Profile.Find(f.Conn, op), diff.Find(f.Conn, op)
		if k == nil || d == nil || k.Count < 2 || d.Count != k.Count || d.ReplyBytes <= 16*d.Count || k.ReplyBytes != d.ReplyBytes || k.ReqBytes != d.ReqBytes {
			t.Errorf("readdirplus=%s: %s kernel %+v, daemon %+v; want the same replies and bytes", plus, op, k, d)
		}
	}
}
