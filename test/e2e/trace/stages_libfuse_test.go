package trace

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/test/e2e"
	"github.com/fusescope/fusescope/test/proctest"
)

// stagesWorkload stats, reads and writes in mnt: metadata, data in both
// directions, opens and releases.
func stagesWorkload(t *testing.T, mnt string) {
	t.Helper()
	for i := range 20 {
		p := filepath.Join(mnt, fmt.Sprintf("f%03d", i))
		if _, err := os.Stat(p); err != nil {
			t.Fatal(err)
		}
		if _, err := os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(mnt, "new"), make([]byte, 200_000), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(filepath.Join(mnt, "new")); err != nil {
		t.Fatal(err)
	}
}

// stagesAgainstPlain runs the workload under the plain trace and --stages
// side by side and returns both records.
func stagesAgainstPlain(t *testing.T, mnt string) (plain, staged *profile.Record) {
	t.Helper()
	conn := e2e.ConnOf(t, mnt)
	plainRec, stagedRec := filepath.Join(t.TempDir(), "plain.json"), filepath.Join(t.TempDir(), "staged.json")
	p := e2e.StartTrace(t, "--mount", mnt, "-o", plainRec)
	s := e2e.StartTrace(t, "--mount", mnt, "--stages", "-o", stagedRec)
	stagesWorkload(t, mnt)
	e2e.WaitIdle(t, conn)
	p.Stop(t)
	s.Stop(t)
	return e2e.LoadRecord(t, plainRec), e2e.LoadRecord(t, stagedRec)
}

// checkAllStaged: the stage trace counted what the plain one did, and split
// every request into its three stages, adding up to the total.
func checkAllStaged(t *testing.T, plain, staged *profile.Record, conn uint32) {
	t.Helper()
	want := e2e.Counts(plain, conn)
	var n uint64
	for _, s := range staged.Profile.Ops {
		if s.Conn != conn {
			continue
		}
		n += s.Count
		q, d, r := s.Stage(profile.StageQueue), s.Stage(profile.StageDaemon), s.Stage(profile.StageReply)
		if s.Count != want[s.Op] || q == nil || q.Count != s.Count || d.Count != s.Count || r.Count != s.Count {
			t.Errorf("%s: plain trace %d, --stages %d, split %v (gaps %+v)", s.Op, want[s.Op], s.Count, q != nil && q.Count == s.Count, s.StageGaps)
			continue
		}
		if q.Sum+d.Sum+r.Sum != s.Latency.Sum {
			t.Errorf("%s: stages add up to %d ns, the total is %d ns", s.Op, q.Sum+d.Sum+r.Sum, s.Latency.Sum)
		}
	}
	if n == 0 {
		t.Fatal("no requests traced")
	}
}

// libfuse 3.18's passthrough_hp and passthrough_ll, multi-threaded, with
// and without splice, with clone_fd (an fd of /dev/fuse per thread): every
// request the plain trace counts is split into stages. passthrough_hp's
// FUSE passthrough serves reads and writes in the kernel: no READ or WRITE
// reaches the daemon, and --stages counts the opens answered that way.
func TestStagesLibfuseDaemons(t *testing.T) {
	// Not parallel: it changes fs.pipe-max-size, the machine's.
	hp, ll := e2e.LibfuseExample(t, "passthrough_hp"), e2e.LibfuseExample(t, "passthrough_ll")
	cases := []struct {
		name        string
		args        func(src, mnt string) []string
		bin         string
		passthrough bool
		bigPipes    bool
	}{
		{"passthrough_hp splice", func(src, mnt string) []string { return []string{"--nocache", "--nopassthrough", src, mnt} }, hp, false, false},
		// libfuse splices requests out of /dev/fuse only into a pipe as
		// large as its buffer (1 MiB and a page), more than the default
		// pipe-max-size allows: raised, every request is spliced into a
		// pipe and its header read back out (strace -c: as many splices
		// as reads).
		{"passthrough_hp splice read", func(src, mnt string) []string { return []string{"--nocache", "--nopassthrough", src, mnt} }, hp, false, true},
		{"passthrough_hp nosplice", func(src, mnt string) []string {
			return []string{"--nocache", "--nopassthrough", "--nosplice", src, mnt}
		}, hp, false, false},
		{"passthrough_hp clone_fd", func(src, mnt string) []string {
			return []string{"--nocache", "--nopassthrough", "--clone-fd", "--num-threads", "4", src, mnt}
		}, hp, false, false},
		{"passthrough_hp single", func(src, mnt string) []string { return []string{"--nocache", "--nopassthrough", "--single", src, mnt} }, hp, false, false},
		{"passthrough_ll", func(src, mnt string) []string { return []string{"-o", "source=" + src + ",cache=never", mnt} }, ll, false, false},
		{"passthrough_ll clone_fd", func(src, mnt string) []string { return []string{"-o", "source=" + src + ",cache=never,clone_fd", mnt} }, ll, false, false},
		{"passthrough_hp passthrough", func(src, mnt string) []string { return []string{"--nocache", src, mnt} }, hp, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.bigPipes {
				const knob = "/proc/sys/fs/pipe-max-size"
				was, err := os.ReadFile(knob)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(knob, []byte("16777216"), 0o644); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.WriteFile(knob, was, 0o644) })
			}
			src, mnt := t.TempDir(), t.TempDir()
			for i := range 20 {
				if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("f%03d", i)), []byte("data\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			e2e.MountDaemon(t, mnt, c.bin, c.args(src, mnt)...)
			conn := e2e.ConnOf(t, mnt)
			plain, staged := stagesAgainstPlain(t, mnt)
			checkAllStaged(t, plain, staged, conn)
			m := staged.Mount(conn)
			if m == nil || len(m.Daemons) == 0 {
				t.Fatalf("the record names no daemon for %s: %+v", mnt, m)
			}
			if c.passthrough {
				if m.PassthroughOpens == 0 {
					t.Error("passthrough_hp answered opens with FUSE passthrough, and --stages counted none")
				}
				for _, s := range staged.Profile.Ops {
					if s.Op == "READ" || s.Op == "WRITE" {
						t.Errorf("%d %s requests with FUSE passthrough", s.Count, s.Op)
					}
				}
			} else if m.PassthroughOpens != 0 {
				t.Errorf("%d passthrough opens counted without FUSE passthrough", m.PassthroughOpens)
			}
			t.Logf("daemons %+v, passthrough opens %d", m.Daemons, m.PassthroughOpens)
		})
	}
}

// FUSE over io_uring: with the kernel's ring enabled, passthrough_hp on it
// takes its requests as completions of its ring commands and answers each
// with the next, never through read(2) or write(2) of /dev/fuse. Every
// request the plain trace counts is split into stages from io_uring's
// tracepoints, adding up to the total, and counted as the ring's; the
// same daemon and workload on /dev/fuse count the same requests, none of
// them the ring's; and a daemon that asks for the ring where the kernel
// does not offer it (enable_uring off) falls back to /dev/fuse, which the
// trace says.
func TestStagesIOURing(t *testing.T) {
	// Not parallel: it changes fuse's enable_uring, every mount's.
	e2e.HoldURing(t)
	hp := e2e.LibfuseExample(t, "passthrough_hp")
	run := func(t *testing.T, uring string, args ...string) (conn uint32, plain, staged *profile.Record) {
		e2e.SetURing(t, uring)
		src, mnt := t.TempDir(), t.TempDir()
		for i := range 20 {
			if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("f%03d", i)), []byte("data\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		e2e.MountDaemon(t, mnt, hp, append(append([]string{"--nocache", "--nopassthrough"}, args...), src, mnt)...)
		conn = e2e.ConnOf(t, mnt)
		plain, staged = stagesAgainstPlain(t, mnt)
		checkAllStaged(t, plain, staged, conn)
		return conn, plain, staged
	}
	ringShare := func(r *profile.Record, conn uint32) (ring, all uint64) {
		for _, s := range r.Profile.Ops {
			if s.Conn == conn {
				ring, all = ring+s.URing, all+s.Count
			}
		}
		return ring, all
	}
	var onRing, onDev map[string]uint64
	t.Run("ring", func(t *testing.T) {
		conn, plain, staged := run(t, "Y", "-o", "io_uring")
		if !staged.Meta.FuseURing {
			t.Error("the record does not say FUSE over io_uring was enabled")
		}
		for _, r := range []*profile.Record{plain, staged} {
			if ring, all := ringShare(r, conn); ring != all {
				t.Errorf("%d of %d requests counted as the ring's, want all", ring, all)
			}
		}
		onRing = e2e.Counts(plain, conn)
	})
	t.Run("dev-fuse", func(t *testing.T) {
		conn, plain, _ := run(t, "Y")
		if ring, all := ringShare(plain, conn); ring != 0 || all == 0 {
			t.Errorf("%d of %d requests counted as the ring's, want none", ring, all)
		}
		onDev = e2e.Counts(plain, conn)
	})
	t.Run("fallback", func(t *testing.T) {
		conn, plain, _ := run(t, "N", "-o", "io_uring")
		if ring, all := ringShare(plain, conn); ring != 0 || all == 0 {
			t.Errorf("ring asked for, not offered: %d of %d requests counted as the ring's, want none", ring, all)
		}
	})
	if onRing != nil && onDev != nil && !maps.Equal(onRing, onDev) {
		t.Errorf("the same workload's requests by transport differ:\nring      %v\n/dev/fuse %v", onRing, onDev)
	}
}

// sshfs (libfuse 3, multi-threaded) to an sshd this test starts on
// 127.0.0.1: the daemon's time is the network round trip, and every request
// is split into stages.
func TestStagesSshfs(t *testing.T) {
	t.Parallel()
	src, mnt := t.TempDir(), t.TempDir()
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("f%03d", i)), []byte("data\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e2e.MountSshfs(t, src, mnt, "cache=no,entry_timeout=0,attr_timeout=0")
	conn := e2e.ConnOf(t, mnt)
	plain, staged := stagesAgainstPlain(t, mnt)
	checkAllStaged(t, plain, staged, conn)
}

// go-fuse's loopback example (test/bench/loopback: go-fuse's reader
// goroutines read /dev/fuse, replies go out with writev, READ replies with
// splice from the backing file): every request is split into stages.
func TestStagesGoFuseLoopback(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "loopback")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/fusescope/fusescope/test/bench/loopback").CombinedOutput(); err != nil {
		t.Fatalf("building go-fuse's loopback: %v\n%s", err, out)
	}
	src, mnt := t.TempDir(), t.TempDir()
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("f%03d", i)), []byte("data\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := proctest.Start(t, exec.Command(bin, mnt, src), "Mounted!", 20*time.Second)
	t.Cleanup(func() {
		if err := p.Interrupt(t, 10*time.Second); err != nil {
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	conn := e2e.ConnOf(t, mnt)
	plain, staged := stagesAgainstPlain(t, mnt)
	checkAllStaged(t, plain, staged, conn)
}
