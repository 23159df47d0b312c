package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/labfs"
	"github.com/fusescope/fusescope/internal/profile"
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
	for _, attach := range []string{"tp_btf", "tracepoint"} {
		t.Run(attach, func(t *testing.T) {
			cfg := labfs.Config{EntryTimeout: labfs.Timeout(0), AttrTimeout: labfs.Timeout(0)}
			var err error
			if cfg.Latency, err = labfs.ParseLatency("getattr=3ms"); err != nil {
				t.Fatal(err)
			}
			src, mnt, f := mountLabFS(t, cfg)
			for i := range 20 {
				if err := os.WriteFile(filepath.Join(src, fmt.Sprint("f", i)), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			conn := connOf(t, mnt)
			rec := filepath.Join(t.TempDir(), "rec.json")
			tr := startTrace(t, "--stages", "--mount", mnt, "--attach", attach, "--slower", "1ns", "--no-hist", "-o", rec)
			before := f.Record().Profile.Find(conn, fuseproto.Getattr)
			for i := range 100 {
				if _, err := os.Stat(filepath.Join(mnt, fmt.Sprint("f", i%20))); err != nil {
					t.Fatal(err)
				}
			}
			waitIdle(t, conn)
			after := f.Record().Profile.Find(conn, fuseproto.Getattr)
			tr.stop(t)
			r := loadRecord(t, rec)
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
				t.Errorf("daemon p50 %.0f ns in bucket %d, want [2^21, 2^22) ns for 3 ms of latency", d.Quantile(0.5), b)
			}
			for _, h := range []*hist.Hist{q, rep} {
				if p50 := h.Quantile(0.5); p50 >= 200_000 {
					t.Errorf("queue or reply p50 %.0f ns, want under 200 us", p50)
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
				own.Count -= before.Latency.Count
				own.Sum -= before.Latency.Sum
			}
			if own.Count != s.Count {
				t.Fatalf("the daemon counted %d GETATTRs, the trace %d", own.Count, s.Count)
			}
			ownMean, ourMean := float64(own.Sum)/float64(own.Count), d.Mean()
			t.Logf("daemon stage mean %.0f ns, the lab daemon's own %.0f ns", ourMean, ownMean)
			if ourMean < ownMean || ourMean > ownMean+100_000 {
				t.Errorf("daemon stage mean %.0f ns, the daemon's own %.0f ns: want it at most 100 us above", ourMean, ownMean)
			}
		})
	}
}

// bindfs (libfuse 2, multi-threaded: read and writev on /dev/fuse): every
// request of the plain trace's counts is split into stages, and the counts
// are the plain trace's, run side by side on the same workload.
func TestStagesBindfsCounts(t *testing.T) {
	need(t, "bindfs")
	_, mnt := mountBindfs(t, 20)
	conn := connOf(t, mnt)
	plainRec, stagedRec := filepath.Join(t.TempDir(), "plain.json"), filepath.Join(t.TempDir(), "staged.json")
	plain := startTrace(t, "--mount", mnt, "-o", plainRec)
	staged := startTrace(t, "--mount", mnt, "--stages", "-o", stagedRec)
	for i := range 20 {
		p := filepath.Join(mnt, fmt.Sprintf("f%03d", i))
		if _, err := os.Stat(p); err != nil {
			t.Fatal(err)
		}
		if _, err := os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	}
	waitIdle(t, conn)
	plain.stop(t)
	staged.stop(t)
	want, got := counts(loadRecord(t, plainRec), conn), loadRecord(t, stagedRec)
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
