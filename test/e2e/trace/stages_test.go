package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/labfs"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/report"
	"github.com/fusescope/fusescope/test/e2e"
	"golang.org/x/sys/unix"
)

// stageOf returns a stage's histogram of an operation, failing the test if
// the record has none.
func stageOf(t *testing.T, s *profile.OpStats, st profile.Stage) *hist.Hist {
	t.Helper()
	h := s.Stage(st)
	if h == nil {
		t.Fatalf("%s: no %s stage in the record", s.Op, st)
	}
	return h
}

// trace --stages on the lab file system with 3 ms of emulated latency per
// GETATTR: the daemon's stage holds the 3 ms, queue and reply are short;
// each request's three stages add up to its total exactly (one clock, shared
// stamps); and the daemon stage agrees with the lab daemon's own timing of
// the same requests, which starts later (go-fuse has parsed the request)
// and ends earlier (before go-fuse writes the reply).
func TestStagesLabLatency(t *testing.T) {
	// Not parallel: it measures the stages of injected latencies, which other tests' load would stretch.
	for _, attach := range []string{"tp_btf", "tracepoint"} {
		t.Run(attach, func(t *testing.T) {
			cfg := labfs.Config{EntryTimeout: labfs.Timeout(0), AttrTimeout: labfs.Timeout(0)}
			var err error
			if cfg.Latency, err = labfs.ParseLatency("getattr=3ms"); err != nil {
				t.Fatal(err)
			}
			src, mnt, f := e2e.MountLabFS(t, cfg)
			for i := range 20 {
				if err := os.WriteFile(filepath.Join(src, fmt.Sprint("f", i)), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			conn := e2e.ConnOf(t, mnt)
			// Past their upper bounds, the stages may have been stretched by
			// the load of the packages beside this one: measured again.
			e2e.Timed(t, 3, func() (stretched []string) {
				rec := filepath.Join(t.TempDir(), "rec.json")
				tr := e2e.StartTrace(t, "--stages", "--mount", mnt, "--attach", attach, "--slower", "1ns", "--no-hist", "-o", rec)
				before := f.Record().Profile.Find(conn, fuseproto.Getattr)
				for i := range 100 {
					if _, err := os.Stat(filepath.Join(mnt, fmt.Sprint("f", i%20))); err != nil {
						t.Fatal(err)
					}
				}
				e2e.WaitIdle(t, conn)
				after := f.Record().Profile.Find(conn, fuseproto.Getattr)
				tr.Stop(t)
				r := e2e.LoadRecord(t, rec)
				s := r.Profile.Find(conn, fuseproto.Getattr)
				if s == nil || s.Count < 100 {
					t.Fatalf("GETATTR missing or short: %+v", s)
				}
				q, d, rep := stageOf(t, s, profile.StageQueue), stageOf(t, s, profile.StageDaemon), stageOf(t, s, profile.StageReply)
				t.Logf("GETATTR n=%d staged=%d gaps=%+v p50 queue %.0f daemon %.0f reply %.0f ns; p99 queue %.0f reply %.0f ns",
					s.Count, q.Count, s.StageGaps, q.Quantile(0.5), d.Quantile(0.5), rep.Quantile(0.5), q.Quantile(0.99), rep.Quantile(0.99))
				if q.Count != s.Count || d.Count != s.Count || rep.Count != s.Count {
					t.Errorf("stages timed %d/%d/%d of %d GETATTRs (gaps %+v): every request of a watched daemon must be split", q.Count, d.Count, rep.Count, s.Count, s.StageGaps)
				}
				if b := hist.Bucket(uint64(d.Quantile(0.5))); b != 21 {
					stretched = append(stretched, e2e.Stretched("daemon p50 %.0f ns in bucket %d, want [2^21, 2^22) ns for 3 ms of latency", d.Quantile(0.5), b))
				}
				for _, h := range []*hist.Hist{q, rep} {
					if p50 := h.Quantile(0.5); p50 >= 200_000 {
						stretched = append(stretched, e2e.Stretched("queue or reply p50 %.0f ns, want under 200 us", p50))
					}
				}
				if sum := q.Sum + d.Sum + rep.Sum; sum != s.Latency.Sum {
					t.Errorf("queue + daemon + reply = %d ns, total %d ns: they must add up exactly", sum, s.Latency.Sum)
				}
				var slow int
				for _, sr := range r.Slow {
					if sr.Op != "GETATTR" {
						continue
					}
					slow++
					if len(sr.Stages) != 3 || sr.Stages[0]+sr.Stages[1]+sr.Stages[2] != sr.Latency {
						t.Errorf("slow request %+v: its stages do not add up to its latency", sr)
					}
				}
				if uint64(slow) != s.Count {
					t.Errorf("%d GETATTRs in --slower 1ns's lines, %d counted", slow, s.Count)
				}
				// The lab daemon's own timer: from go-fuse's call into it to its
				// return, inside our daemon stage, which also holds go-fuse's
				// parsing and the reply's encoding.
				own := after.Latency
				if before != nil {
					var err error
					if own, err = after.Latency.Sub(&before.Latency); err != nil {
						t.Fatal(err)
					}
				}
				if own.Count != s.Count {
					t.Fatalf("the daemon counted %d GETATTRs, the trace %d", own.Count, s.Count)
				}
				ownMean, ourMean := float64(own.Sum)/float64(own.Count), d.Mean()
				t.Logf("daemon stage mean %.0f ns, the lab daemon's own %.0f ns", ourMean, ownMean)
				// The stage holds the daemon's timer and go-fuse's part outside
				// it (parsing, the reply's encoding, a goroutine's scheduling
				// under the race detector on 2 vCPUs): tens of microseconds
				// idle, but a busy machine delays a few requests by a
				// millisecond and more (a CI run: 154 us more on average).
				if slack := max(300_000, ownMean/10); ourMean < ownMean {
					t.Errorf("daemon stage mean %.0f ns, below the daemon's own %.0f ns", ourMean, ownMean)
				} else if ourMean > ownMean+slack {
					stretched = append(stretched, e2e.Stretched("daemon stage mean %.0f ns, the daemon's own %.0f ns: want it at most %.0f ns above", ourMean, ownMean, slack))
				}
				return stretched
			})
		})
	}
}

// bindfs (libfuse 2, multi-threaded: read and writev on /dev/fuse): every
// request of the plain trace's counts is split into stages, and the counts
// are the plain trace's, run side by side on the same workload.
func TestStagesBindfsCounts(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "bindfs")
	_, mnt := e2e.MountBindfs(t, 20)
	conn := e2e.ConnOf(t, mnt)
	plainRec, stagedRec := filepath.Join(t.TempDir(), "plain.json"), filepath.Join(t.TempDir(), "staged.json")
	plain := e2e.StartTrace(t, "--mount", mnt, "-o", plainRec)
	staged := e2e.StartTrace(t, "--mount", mnt, "--stages", "-o", stagedRec)
	for i := range 20 {
		p := filepath.Join(mnt, fmt.Sprintf("f%03d", i))
		if _, err := os.Stat(p); err != nil {
			t.Fatal(err)
		}
		if _, err := os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	}
	e2e.WaitIdle(t, conn)
	plain.Stop(t)
	staged.Stop(t)
	want, got := e2e.Counts(e2e.LoadRecord(t, plainRec), conn), e2e.LoadRecord(t, stagedRec)
	for _, s := range got.Profile.Ops {
		if s.Conn != conn {
			continue
		}
		q := s.Stage(profile.StageQueue)
		if q == nil || q.Count != s.Count || s.Count != want[s.Op] {
			t.Errorf("%s: plain trace %d, --stages %d, of which split %v (gaps %+v)", s.Op, want[s.Op], s.Count, q, s.StageGaps)
		}
	}
	if len(got.Profile.Ops) == 0 {
		t.Fatal("no requests traced")
	}
}

// One daemon thread (serialFS), 1 ms per GETATTR, N = 1, 2, 4, 8 clients
// each fstat'ing a file of its own as fast as it can: the daemon serves one
// request at a time, so a request waits for the N-1 ahead of it in the
// kernel's queue. The queue stage grows with N, about (N-1) services; the
// daemon stage stays at the service time.
func TestStagesSerialQueue(t *testing.T) {
	// Not parallel: it measures the time requests queue behind a serial daemon.
	const service = 1200 * time.Microsecond
	const perClient = 40
	mnt := mountSerialFS(t, 8, service)
	conn := e2e.ConnOf(t, mnt)
	// Measured again when the machine's load stretched the daemon's time
	// or the queue (the other packages run beside it under make test);
	// a request not split fails at once.
	e2e.Timed(t, 3, func() (stretched []string) {
		var daemon1 float64
		for _, n := range []int{1, 2, 4, 8} {
			rec := filepath.Join(t.TempDir(), "rec.json")
			files := make([]*os.File, n)
			for i := range files {
				f, err := os.Open(filepath.Join(mnt, fmt.Sprint("f", i)))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				files[i] = f
			}
			tr := e2e.StartTrace(t, "--stages", "--mount", mnt, "--op", "GETATTR", "-o", rec)
			var wg sync.WaitGroup
			for _, f := range files {
				wg.Go(func() {
					for range perClient {
						if _, err := f.Stat(); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			e2e.WaitIdle(t, conn)
			tr.Stop(t)
			s := e2e.LoadRecord(t, rec).Profile.Find(conn, fuseproto.Getattr)
			if s == nil || s.Count < uint64(n*perClient) {
				t.Fatalf("N=%d: GETATTR missing or short: %+v", n, s)
			}
			q, d := stageOf(t, s, profile.StageQueue), stageOf(t, s, profile.StageDaemon)
			if q.Count != s.Count {
				t.Errorf("N=%d: %d of %d GETATTRs split (gaps %+v)", n, q.Count, s.Count, s.StageGaps)
			}
			t.Logf("N=%d: GETATTR n=%d queue mean %.0f us, daemon mean %.0f us, total mean %.0f us",
				n, s.Count, q.Mean()/1e3, d.Mean()/1e3, s.Latency.Mean()/1e3)
			if n == 1 {
				daemon1 = d.Mean()
				if q.Mean() > d.Mean()/2 {
					stretched = append(stretched, e2e.Stretched("N=1: queue mean %.0f ns, want well under the service (%.0f ns): nothing waits", q.Mean(), d.Mean()))
				}
				continue
			}
			// (N-1) services ahead of each request, within a factor 2 either
			// way (the clients' own time between calls lets the queue run short).
			want := float64(n-1) * d.Mean()
			if q.Mean() < want/2 || q.Mean() > want*2 {
				stretched = append(stretched, e2e.Stretched("N=%d: queue mean %.0f ns, want about %d services (%.0f ns)", n, q.Mean(), n-1, want))
			}
			if d.Mean() < daemon1*0.8 || d.Mean() > daemon1*1.25 {
				stretched = append(stretched, e2e.Stretched("N=%d: daemon mean %.0f ns, N=1's %.0f ns: the daemon's time must stay flat", n, d.Mean(), daemon1))
			}
		}
		return stretched
	})
}

// allStopped says whether every thread of pid is stopped (state T).
func allStopped(pid int) bool {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			return false
		}
		// The state follows the command, which is in parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return len(tasks) > 0
}

// A stuck daemon: the lab daemon stopped with SIGSTOP leaves a stat queued
// (nobody reads it), and a daemon that takes 1.5 s per GETATTR holds one
// "with the daemon"; trace lists both at its intervals as hung, where the
// statistics, which count requests as they end, show nothing.
func TestStagesHungRequests(t *testing.T) {
	// Not parallel: it times requests against the --hung threshold.
	for _, c := range []struct {
		name, latency, stage string
		stop                 bool
	}{
		{"stopped", "", "queued", true},
		{"slow", "getattr=1500ms", "daemon", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, mnt := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(src, "f"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"fs", "mount", "--background", "--preset", "nocache", src, mnt}
			if c.latency != "" {
				args = append(args, "--latency", c.latency)
			}
			out, err := exec.Command(e2e.Fusescope, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("fs mount: %v\n%s", err, out)
			}
			m := regexp.MustCompile(`daemon pid (\d+)`).FindStringSubmatch(string(out))
			if m == nil {
				t.Fatalf("fs mount --background did not name its daemon:\n%s", out)
			}
			pid, _ := strconv.Atoi(m[1])
			t.Cleanup(func() {
				syscall.Kill(pid, syscall.SIGCONT)
				exec.Command(e2e.Fusescope, "fs", "umount", mnt).Run()
			})
			if c.stop {
				// The daemon has been asked for the file once, so that the
				// stat below waits on its GETATTR alone.
				if _, err := os.Stat(filepath.Join(mnt, "f")); err != nil {
					t.Fatal(err)
				}
			}
			tr := e2e.StartTrace(t, "--stages", "--mount", mnt, "--hung", "300ms", "--json", "0.2")
			if c.stop {
				if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				// A group stop reaches each thread in its own time: one
				// still blocked in read of /dev/fuse would take the request.
				e2e.WaitFor(t, "every daemon thread stopped", func() bool { return allStopped(pid) })
				// A path inside the stopped daemon's mount resolves to its
				// connection from mountinfo: a stat would hang.
				cmd := exec.Command(e2e.Fusescope, "trace", "--counts", "--mount", filepath.Join(mnt, "f", "deeper"), "--", "true")
				done := make(chan error, 1)
				go func() { done <- cmd.Run() }()
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("trace --mount with a path inside a stopped daemon's mount: %v", err)
					}
				case <-time.After(20 * time.Second):
					cmd.Process.Kill()
					t.Error("trace --mount with a path inside a stopped daemon's mount hung")
				}
			}
			statDone := make(chan error, 1)
			go func() {
				_, err := os.Stat(filepath.Join(mnt, "f"))
				statDone <- err
			}()
			var hung profile.HungRequest
			e2e.WaitFor(t, "an interval record listing the stat's request as hung", func() bool {
				for _, line := range strings.Split(tr.Stdout.String(), "\n") {
					var r profile.Record
					if json.Unmarshal([]byte(line), &r) != nil {
						continue
					}
					for _, h := range r.Hung {
						if h.Op == "GETATTR" || h.Op == "LOOKUP" {
							hung = h
							return true
						}
					}
				}
				return false
			})
			t.Logf("hung: %+v", hung)
			if hung.Stage != c.stage || hung.Age < 300*time.Millisecond || hung.Mount != mnt {
				t.Errorf("hung request %+v: want stage %q, age at least 300ms, mount %s", hung, c.stage, mnt)
			}
			if c.stop {
				syscall.Kill(pid, syscall.SIGCONT)
			}
			if err := <-statDone; err != nil {
				t.Errorf("stat after the daemon went on: %v", err)
			}
			tr.Stop(t)
		})
	}
}

// trace --files names files by their path in the mount, from the replies
// that made their entries (MKDIR, CREATE, LOOKUP): the requests summed by
// file add up to the requests counted by opcode, the files made and
// stat'ed during the trace carry their paths, and --slower's lines name them.
func TestTraceFiles(t *testing.T) {
	t.Parallel()
	cfg := labfs.Config{EntryTimeout: labfs.Timeout(0), AttrTimeout: labfs.Timeout(0)}
	src, mnt, _ := e2e.MountLabFS(t, cfg)
	if err := os.WriteFile(filepath.Join(src, "old"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Directories looked up before the trace are named by the lookups
	// that revalidate their dentries, whose name (since 6.14) is the
	// component of the path being walked: no NUL after it.
	if err := os.MkdirAll(filepath.Join(src, "pre", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "pre", "deep", "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "pre", "deep", "file")); err != nil {
		t.Fatal(err)
	}
	conn := e2e.ConnOf(t, mnt)
	rec := filepath.Join(t.TempDir(), "rec.json")
	tr := e2e.StartTrace(t, "--mount", mnt, "--files", "1000", "--slower", "1ns", "--no-hist", "-o", rec)
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "d", "new"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	const stats = 7
	for range stats {
		if _, err := os.Stat(filepath.Join(mnt, "d", "new")); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(mnt, "old")); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(mnt, "pre", "deep", "file")); err != nil {
			t.Fatal(err)
		}
	}
	e2e.WaitIdle(t, conn)
	tr.Stop(t)
	r := e2e.LoadRecord(t, rec)
	var byOp, byFile uint64
	for _, s := range r.Profile.Ops {
		if s.Conn == conn {
			byOp += s.Count
		}
	}
	paths := map[string]profile.FileStats{}
	for _, f := range r.Files {
		byFile += f.Count
		if f.Path != "" {
			paths[f.Path] = f
		}
	}
	if byFile != byOp {
		t.Errorf("requests summed by file %d, by opcode %d", byFile, byOp)
	}
	for path, atLeast := range map[string]uint64{"/d/new": stats, "/old": stats, "/d": stats, "/pre": stats, "/pre/deep": stats, "/pre/deep/file": stats} {
		if f, ok := paths[path]; !ok || f.Count < atLeast {
			t.Errorf("%s: %+v, want at least %d requests (files %+v)", path, f, atLeast, r.Files)
		}
	}
	var named int
	for _, s := range r.Slow {
		if s.Op == "GETATTR" && s.File == "/d/new" {
			named++
		}
	}
	if named < stats {
		t.Errorf("%d GETATTR lines of --slower name /d/new, want at least %d", named, stats)
	}
}

// trace --page-cache on the lab file system: a file read a second time with
// keep_cache comes from the page cache (no READ, hit ratio 1, every page
// asked for found); with direct_io no read asks the cache (hit ratio 0,
// every page a READ); the first read of a file with the cache is all
// misses, the pages added to the cache as they are read.
func TestTracePageCache(t *testing.T) {
	t.Parallel()
	e2e.KeepsCaches(t) // the kernel's pages and attributes stay cached
	const size = 1 << 20
	for _, c := range []struct {
		name      string
		cfg       labfs.Config
		warm      bool
		wantRatio float64
	}{
		{"keep_cache second read", labfs.Config{KeepCache: true}, true, 1},
		{"direct_io", labfs.Config{DirectIO: true}, false, 0},
		{"first read", labfs.Config{}, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, mnt, _ := e2e.MountLabFS(t, c.cfg)
			data := make([]byte, size)
			for i := range data {
				data[i] = byte(i * 7)
			}
			if err := os.WriteFile(filepath.Join(src, "f"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			if c.warm {
				if _, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil {
					t.Fatal(err)
				}
				lockPages(t, filepath.Join(mnt, "f"), size)
			}
			conn := e2e.ConnOf(t, mnt)
			rec := filepath.Join(t.TempDir(), "rec.json")
			tr := e2e.StartTrace(t, "--mount", mnt, "--page-cache", "-o", rec)
			got, err := os.ReadFile(filepath.Join(mnt, "f"))
			if err != nil || len(got) != size {
				t.Fatalf("read %d bytes: %v", len(got), err)
			}
			e2e.WaitIdle(t, conn)
			tr.Stop(t)
			r := e2e.LoadRecord(t, rec)
			if len(r.PageCache) != 1 || r.PageCache[0].Conn != conn {
				t.Fatalf("page cache %+v, want one entry for connection %d", r.PageCache, conn)
			}
			pc := r.PageCache[0]
			ratio, ok := r.PageCacheHitRatio(pc)
			reads := r.Profile.Find(conn, fuseproto.Read)
			t.Logf("%+v; READs %v; hit ratio %.3f (%v)", pc, reads != nil, ratio, ok)
			if !ok || ratio < c.wantRatio-0.005 || ratio > c.wantRatio+0.005 {
				t.Errorf("hit ratio %.3f (%v), want %.0f", ratio, ok, c.wantRatio)
			}
			switch c.name {
			case "keep_cache second read":
				if reads != nil || pc.Added != 0 || pc.ReadPages != size/4096 {
					t.Errorf("a cached read: %d READs, %d pages added, %d asked for (want 0, 0, %d: the file's pages, none past its end)", countOf(reads), pc.Added, pc.ReadPages, size/4096)
				}
			case "direct_io":
				if pc.ReadPages != 0 || pc.Added != 0 || reads == nil {
					t.Errorf("direct_io: %d pages asked of the cache, %d added, %d READs (want 0, 0, some)", pc.ReadPages, pc.Added, countOf(reads))
				}
			case "first read":
				if pc.Added < size/4096 || reads == nil {
					t.Errorf("a first read: %d pages added (want at least %d), %d READs", pc.Added, size/4096, countOf(reads))
				}
			}
		})
	}
}

// Files smaller than a read (cat asks for 128 KiB, and the
// pages past each 8 KiB file's end were counted as hits, a ratio of 0.938
// where every byte came through FUSE): cat of ten never-read 8 KiB files
// asks the cache for their 20 pages, finds none of them, and the hit ratio
// is 0; cat of them again, cached, finds them (what the machine evicted
// in between, this VM's proactive reclaim among others, is read again:
// those pages are added, and the ratio is the rest's share).
func TestTracePageCacheSmallFiles(t *testing.T) {
	t.Parallel()
	e2e.KeepsCaches(t) // the kernel's pages and attributes stay cached
	src, mnt, _ := e2e.MountLabFS(t, labfs.Config{KeepCache: true})
	conn := e2e.ConnOf(t, mnt)
	catTraced := func(files []string) (profile.PageCache, float64, bool) {
		rec := filepath.Join(t.TempDir(), "rec.json")
		tr := e2e.StartTrace(t, "--mount", mnt, "--page-cache", "-o", rec)
		e2e.Run(t, "cat", files...)
		e2e.WaitIdle(t, conn)
		tr.Stop(t)
		r := e2e.LoadRecord(t, rec)
		if len(r.PageCache) != 1 {
			t.Fatalf("page cache %+v, want one entry", r.PageCache)
		}
		pc := r.PageCache[0]
		ratio, ok := r.PageCacheHitRatio(pc)
		t.Logf("%+v; %d READs; hit ratio %.3f", pc, countOf(r.Profile.Find(conn, fuseproto.Read)), ratio)
		return pc, ratio, ok
	}
	// The first cat, of ten files never read. The kernel names no lookup
	// it cuts short when a page is still locked by read-ahead's I/O, which
	// a loaded machine makes likely (19 or 18 of the 20 pages, under two
	// busy loops, 5 runs in 25; docs/record.md): then ten new files are
	// read again (e2e.Timed).
	var files []string
	try := 0
	e2e.Timed(t, 5, func() (stretched []string) {
		try++
		files = files[:0]
		for i := range 10 {
			name := fmt.Sprintf("f%d-%d", try, i)
			if err := os.WriteFile(filepath.Join(src, name), bytes.Repeat([]byte{byte(i)}, 8192), 0o644); err != nil {
				t.Fatal(err)
			}
			files = append(files, filepath.Join(mnt, name))
		}
		pc, ratio, ok := catTraced(files)
		if !ok || ratio != 0 || pc.ReadPages > 20 || pc.Added != 20 {
			t.Errorf("first cat: hit ratio %.3f (%v), %d pages asked for, %d added: want 0.000, 20, 20", ratio, ok, pc.ReadPages, pc.Added)
		} else if pc.ReadPages < 20 {
			stretched = append(stretched, e2e.Stretched("first cat: %d pages asked for, want 20 (a lookup cut short?)", pc.ReadPages))
		}
		return stretched
	})
	if t.Failed() {
		return
	}
	// The second, of the same files, cached.
	for _, f := range files {
		lockPages(t, f, 8192) // cached by the first cat
	}
	pc, ratio, ok := catTraced(files)
	wantAdded := min(pc.Added, 5) // a few pages evicted meanwhile, at most
	if wantRatio := float64(20-pc.Added) / 20; !ok || ratio != wantRatio || pc.ReadPages != 20 || pc.Added != wantAdded {
		t.Errorf("second cat: hit ratio %.3f (%v), %d pages asked for, %d added: want %.3f, 20, %d", ratio, ok, pc.ReadPages, pc.Added, wantRatio, wantAdded)
	}
}

// lockPages keeps a file's cached pages in memory until the test ends
// (mlock): the machine's proactive reclaim (DAMON's pageout here) took 8
// of 256 idle pages while a loaded machine started the trace.
func lockPages(t *testing.T, path string, size int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mlock(m); err != nil {
		unix.Munmap(m)
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
}

func countOf(s *profile.OpStats) uint64 {
	if s == nil {
		return 0
	}
	return s.Count
}

// trace --calls: the application's file calls on the traced mount, counted
// against the calls the program makes and strace -c's count of the same run
// (strace -P: the calls on that file); with the kernel's caches on and the
// file looked up before, repeated stats send no request: 100% cached.
func TestTraceCalls(t *testing.T) {
	t.Parallel()
	e2e.KeepsCaches(t) // the kernel's pages and attributes stay cached
	e2e.Need(t, "strace", "python3")
	const stats, reads = 10, 3
	script := fmt.Sprintf("import os, sys\np = sys.argv[1]\nfor _ in range(%d): os.stat(p)\nfd = os.open(p, os.O_RDONLY)\nfor _ in range(%d): os.read(fd, 10)\nos.close(fd)\n", stats, reads)
	t.Run("counts", func(t *testing.T) {
		src, mnt, _ := e2e.MountLabFS(t, e2e.Preset(t, "nocache"))
		if err := os.WriteFile(filepath.Join(src, "f"), make([]byte, 100), 0o644); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(mnt, "f")
		rec, straceOut := filepath.Join(t.TempDir(), "rec.json"), filepath.Join(t.TempDir(), "strace.txt")
		out, err := exec.Command(e2e.Fusescope, "trace", "--calls", "--mount", mnt, "-o", rec, "--",
			"strace", "-f", "-c", "-o", straceOut, "-P", file, "python3", "-c", script, file).CombinedOutput()
		if err != nil {
			t.Fatalf("trace --calls: %v\n%s", err, out)
		}
		r := e2e.LoadRecord(t, rec)
		ours := map[string]profile.CallStats{}
		for _, c := range r.Calls {
			ours[c.Syscall] = c
		}
		theirs := straceCounts(t, straceOut)
		t.Logf("fusescope: %v\nstrace -c: %v", ours, theirs)
		want := map[string]uint64{"newfstatat": stats, "openat": 1, "read": reads, "close": 1}
		for call, n := range want {
			if ours[call].Count != n || theirs[call] != n {
				t.Errorf("%s: fusescope %d, strace -c %d, the program made %d", call, ours[call].Count, theirs[call], n)
			}
		}
		for call, n := range theirs {
			if ours[call].Count != n {
				t.Errorf("%s: fusescope %d, strace -c %d", call, ours[call].Count, n)
			}
		}
		// nocache: every stat asks the daemon.
		if s := ours["newfstatat"]; s.WithRequests != stats || s.FuseNs == 0 || s.FuseNs > s.Latency.Sum {
			t.Errorf("newfstatat with nocache: %d of %d sent requests, %d ns inside FUSE of %d", s.WithRequests, stats, s.FuseNs, s.Latency.Sum)
		}
	})
	t.Run("cached", func(t *testing.T) {
		// Cached for an hour, not the default second: a loaded machine
		// took longer than that to start the trace.
		forever := labfs.Timeout(time.Hour)
		src, mnt, _ := e2e.MountLabFS(t, labfs.Config{EntryTimeout: forever, AttrTimeout: forever})
		if err := os.WriteFile(filepath.Join(src, "f"), make([]byte, 100), 0o644); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(mnt, "f")
		if _, err := os.Stat(file); err != nil { // looked up, its entry and attributes cached
			t.Fatal(err)
		}
		rec := filepath.Join(t.TempDir(), "rec.json")
		out, err := exec.Command(e2e.Fusescope, "trace", "--calls", "--mount", mnt, "-o", rec, "--",
			"python3", "-c", fmt.Sprintf("import os, sys\nfor _ in range(%d): os.stat(sys.argv[1])\n", stats), file).CombinedOutput()
		if err != nil {
			t.Fatalf("trace --calls: %v\n%s", err, out)
		}
		r := e2e.LoadRecord(t, rec)
		var stat *profile.CallStats
		for i := range r.Calls {
			if r.Calls[i].Syscall == "newfstatat" {
				stat = &r.Calls[i]
			}
		}
		if stat == nil || stat.Count != stats || stat.WithRequests != 0 || stat.Requests != 0 {
			t.Fatalf("cached stats: %+v, want %d calls and no request", stat, stats)
		}
		var text bytes.Buffer
		if err := report.WriteText(&text, r, report.TextOptions{NoHists: true}); err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`newfstatat\s+10\s+0\s+.*100\.0%\s+0\.00\s+0\.0%`).MatchString(text.String()) {
			t.Errorf("the view does not say 100%% cached:\n%s", text.String())
		}
	})
}

// trace --calls -p PID: a process already running is the application, its
// calls counted from the trace's start to its exit, which ends the trace.
func TestTraceCallsPID(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "python3")
	src, mnt, _ := e2e.MountLabFS(t, e2e.Preset(t, "nocache"))
	if err := os.WriteFile(filepath.Join(src, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const stats = 12
	app := exec.Command("python3", "-c", fmt.Sprintf("import os, sys\nsys.stdin.readline()\nfor _ in range(%d): os.stat(sys.argv[1])\n", stats), filepath.Join(mnt, "f"))
	in, err := app.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(t.TempDir(), "rec.json")
	tr := e2e.StartTrace(t, "--calls", "--mount", mnt, "-p", strconv.Itoa(app.Process.Pid), "-o", rec)
	in.Write([]byte("go\n"))
	if err := app.Wait(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-tr.Done:
		if err != nil {
			t.Fatalf("trace -p: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the process's exit did not end trace -p within 20 s")
	}
	var got uint64
	for _, c := range e2e.LoadRecord(t, rec).Calls {
		if c.Syscall == "newfstatat" {
			got = c.Count
		}
	}
	if got != stats {
		t.Errorf("%d stats counted, the process made %d", got, stats)
	}
}

// straceCounts reads strace -c's table: calls by system call.
func straceCounts(t *testing.T, path string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		// % time, seconds, usecs/call, calls, [errors,] syscall
		if len(f) < 5 || f[len(f)-1] == "total" || f[len(f)-1] == "syscall" {
			continue
		}
		if _, err := strconv.ParseFloat(f[0], 64); err != nil {
			continue
		}
		n, err := strconv.ParseUint(f[3], 10, 64)
		if err != nil {
			continue
		}
		out[f[len(f)-1]] = n
	}
	return out
}

// A daemon started after the trace began: --stages finds it at its next
// scan (every second) and splits its requests from then on; the record says
// when it was first watched and the text view names it, so the requests
// before then, counted apart as not taken, are never guessed at.
func TestStagesDaemonStartedLater(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "bindfs")
	rec := filepath.Join(t.TempDir(), "rec.json")
	tr := e2e.StartTrace(t, "--stages", "--json", "0.2", "-o", rec)
	_, mnt := e2e.MountBindfs(t, 3)
	conn := e2e.ConnOf(t, mnt)
	var watched bool
	e2e.WaitFor(t, "an interval record with the new mount's requests split into stages", func() bool {
		if _, err := os.Stat(filepath.Join(mnt, "f000")); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(tr.Stdout.String(), "\n") {
			var r profile.Record
			if json.Unmarshal([]byte(line), &r) != nil {
				continue
			}
			for _, s := range r.Profile.Ops {
				if q := s.Stage(profile.StageQueue); s.Conn == conn && q != nil && q.Count > 0 {
					watched = true
				}
			}
		}
		return watched
	})
	tr.Stop(t)
	r := e2e.LoadRecord(t, rec)
	m := r.Mount(conn)
	if m == nil || len(m.Daemons) == 0 || !m.Daemons[0].Watched.After(r.Meta.Start) {
		t.Fatalf("the record does not say the daemon was watched after the trace began: %+v", m)
	}
	var text bytes.Buffer
	if err := report.WriteText(&text, r, report.TextOptions{NoHists: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), ", after the trace began: its requests before then are not split into stages") {
		t.Errorf("the view does not name the daemon found late:\n%s", text.String())
	}
}

// Quantiles within 5% of the exact ones (a log2 bucket alone once put
// the median of a 5 ms WAN's 11.25 ms round trips at 14.0 ms): the lab file
// system with 5 ms per GETATTR, p50, p90, p99 of the record against the
// exact quantiles of the same requests, each sent whole by --slower 1ns.
func TestTraceQuantilesWithinFivePercent(t *testing.T) {
	// Not parallel: it holds quantiles to 5% of the exact values, which other tests' load would skew.
	cfg := labfs.Config{EntryTimeout: labfs.Timeout(0), AttrTimeout: labfs.Timeout(0)}
	var err error
	if cfg.Latency, err = labfs.ParseLatency("getattr=5ms+-2ms"); err != nil {
		t.Fatal(err)
	}
	_, mnt, _ := e2e.MountLabFS(t, cfg)
	conn := e2e.ConnOf(t, mnt)
	rec := filepath.Join(t.TempDir(), "rec.json")
	tr := e2e.StartTrace(t, "--mount", mnt, "--op", "GETATTR", "--slower", "1ns", "--no-hist", "-o", rec)
	for range 300 {
		if _, err := os.Stat(mnt); err != nil {
			t.Fatal(err)
		}
	}
	e2e.WaitIdle(t, conn)
	tr.Stop(t)
	r := e2e.LoadRecord(t, rec)
	s := r.Profile.Find(conn, fuseproto.Getattr)
	var exact []float64
	for _, sr := range r.Slow {
		if sr.Op == "GETATTR" {
			exact = append(exact, float64(sr.Latency.Nanoseconds()))
		}
	}
	if s == nil || uint64(len(exact)) != s.Count || s.Count < 300 {
		t.Fatalf("GETATTR %+v, %d sent whole", s, len(exact))
	}
	slices.Sort(exact)
	for _, q := range []float64{0.5, 0.9, 0.99} {
		want := exact[int(math.Ceil(q*float64(len(exact))))-1]
		got := s.Latency.Quantile(q)
		t.Logf("p%g: %.0f ns, exact %.0f ns (%.2f%% off)", q*100, got, want, 100*math.Abs(got-want)/want)
		if math.Abs(got-want)/want > 0.05 {
			t.Errorf("p%g: %.0f ns, exact %.0f ns: more than 5%% off", q*100, got, want)
		}
	}
}

// READDIRPLUS names its entries: the kernel instantiates them without a
// LOOKUP, so their names come from the reply, which --stages reads as the
// daemon writes it. After ls of a directory with readdirplus, stats of its
// files (attributes not cached: a GETATTR each, no LOOKUP) are listed by
// --files under their paths.
func TestStagesReaddirplusNames(t *testing.T) {
	t.Parallel()
	cfg := labfs.Config{Readdirplus: "on", AttrTimeout: labfs.Timeout(0)}
	src, mnt, _ := e2e.MountLabFS(t, cfg)
	if err := os.Mkdir(filepath.Join(src, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 10
	for i := range n {
		if err := os.WriteFile(filepath.Join(src, "d", fmt.Sprintf("f%02d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	conn := e2e.ConnOf(t, mnt)
	rec := filepath.Join(t.TempDir(), "rec.json")
	tr := e2e.StartTrace(t, "--stages", "--files", "1000", "--mount", mnt, "--no-hist", "-o", rec)
	ents, err := os.ReadDir(filepath.Join(mnt, "d"))
	if err != nil || len(ents) != n {
		t.Fatalf("ls: %d entries, %v", len(ents), err)
	}
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(mnt, "d", e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	e2e.WaitIdle(t, conn)
	tr.Stop(t)
	r := e2e.LoadRecord(t, rec)
	if s := r.Profile.Find(conn, fuseproto.Readdirplus); s == nil {
		t.Fatalf("no READDIRPLUS traced: %+v", r.Profile.Ops)
	}
	lookups := r.Profile.Find(conn, fuseproto.Lookup)
	named := 0
	for _, f := range r.Files {
		if strings.HasPrefix(f.Path, "/d/f") {
			named++
		}
	}
	t.Logf("%d of %d files named; LOOKUPs %d", named, n, countOf(lookups))
	if countOf(lookups) >= n {
		t.Fatalf("%d LOOKUPs: the files were looked up, so READDIRPLUS did not name them", countOf(lookups))
	}
	if named != n {
		t.Errorf("%d of the %d files stat'ed after ls are named, want all (files %+v)", named, n, r.Files)
	}
}

// TestStagesManyConnections traces five mounts at once, so that at least
// two share an index of the stages' per-CPU fast array (the connection
// modulo 4, stages.bpf.h) and one of them is counted in the table instead,
// on the CPUs where the other holds the index: every request of every
// mount is split, and each mount's counts are its daemon's own.
func TestStagesManyConnections(t *testing.T) {
	t.Parallel()
	const mounts = 5
	var mnts []string
	var daemons []*countingFS
	var conns []uint32
	args := []string{"--stages"}
	shared := map[uint32]int{}
	for range mounts {
		mnt, c := mountLab(t, 24, 1, 0)
		mnts, daemons, conns = append(mnts, mnt), append(daemons, c), append(conns, e2e.ConnOf(t, mnt))
		shared[conns[len(conns)-1]%4]++
		args = append(args, "--mount", mnt)
	}
	if len(shared) == mounts {
		t.Fatalf("connections %v: five cannot all differ modulo 4", conns)
	}
	rec := filepath.Join(t.TempDir(), "staged.json")
	tr := e2e.StartTrace(t, append(args, "-o", rec)...)
	before := make([]map[fuseproto.Opcode]uint64, mounts)
	for i, d := range daemons {
		before[i] = d.snapshot()
	}
	for i, mnt := range mnts {
		for j := range 4 * (i + 1) {
			if _, err := os.Stat(filepath.Join(mnt, "files", fmt.Sprintf("f%03d", j))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range conns {
		e2e.WaitIdle(t, c)
	}
	tr.Stop(t)
	r := e2e.LoadRecord(t, rec)
	for i, c := range conns {
		after := daemons[i].snapshot()
		got := e2e.Counts(r, c)
		for _, op := range []fuseproto.Opcode{fuseproto.Lookup, fuseproto.Getattr} {
			if want := after[op] - before[i][op]; got[op.String()] != want {
				t.Errorf("mount %d (connection %d): %s traced %d, the daemon answered %d", i, c, op, got[op.String()], want)
			}
		}
		if got[fuseproto.Getattr.String()] < uint64(4*(i+1)) {
			t.Errorf("mount %d (connection %d): %d GETATTRs for %d stats", i, c, got[fuseproto.Getattr.String()], 4*(i+1))
		}
		for _, s := range r.Profile.Ops {
			if s.Conn != c {
				continue
			}
			if q := s.Stage(profile.StageQueue); q == nil || q.Count != s.Count {
				t.Errorf("mount %d (connection %d) %s: %d requests, of which split %v (gaps %+v)", i, c, s.Op, s.Count, q, s.StageGaps)
			}
		}
	}
}
