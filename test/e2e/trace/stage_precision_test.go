package trace

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/labfs"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/test/e2e"
)

// Stage quantiles as precise as the totals' (a stage's log2
// bucket alone once put the daemon stage's median of 1 ms LOOKUPs at 1.6 ms):
// the lab file system with 1 ms per GETATTR, each stage's p50, p90 and p99
// of the record against the exact quantiles of the same requests, whose
// stages --slower 1ns sends whole. Sub-buckets start at 1 us, so a stage
// quantile below that is held to its log2 bucket only.
func TestStageQuantilesWithinASubBucket(t *testing.T) {
	// Not parallel: it holds stage quantiles to 6.25% of the exact values, which other tests' load would skew.
	cfg := labfs.Config{EntryTimeout: labfs.Timeout(0), AttrTimeout: labfs.Timeout(0)}
	var err error
	if cfg.Latency, err = labfs.ParseLatency("getattr=1ms"); err != nil {
		t.Fatal(err)
	}
	_, mnt, _ := e2e.MountLabFS(t, cfg)
	conn := e2e.ConnOf(t, mnt)
	rec := filepath.Join(t.TempDir(), "rec.json")
	tr := e2e.StartTrace(t, "--mount", mnt, "--stages", "--op", "GETATTR", "--slower", "1ns", "--no-hist", "-o", rec)
	for range 300 {
		if _, err := os.Stat(mnt); err != nil {
			t.Fatal(err)
		}
	}
	e2e.WaitIdle(t, conn)
	tr.Stop(t)
	r := e2e.LoadRecord(t, rec)
	s := r.Profile.Find(conn, fuseproto.Getattr)
	exact := make([][]float64, 3)
	for _, sr := range r.Slow {
		if sr.Op == "GETATTR" && len(sr.Stages) == 3 {
			for i, d := range sr.Stages {
				exact[i] = append(exact[i], float64(d.Nanoseconds()))
			}
		}
	}
	if s == nil || s.Count < 300 || uint64(len(exact[0])) != s.Count {
		t.Fatalf("GETATTR %+v, %d split and sent whole", s, len(exact[0]))
	}
	for i, st := range []profile.Stage{profile.StageQueue, profile.StageDaemon, profile.StageReply} {
		h := stageOf(t, s, st)
		slices.Sort(exact[i])
		for _, q := range []float64{0.5, 0.9, 0.99} {
			want := exact[i][int(math.Ceil(q*float64(len(exact[i]))))-1]
			got := h.Quantile(q)
			off := math.Abs(got-want) / want
			t.Logf("%s p%g: %.0f ns, exact %.0f ns (%.2f%% off)", st, q*100, got, want, 100*off)
			if want < 1<<hist.FineFirst {
				if hist.Bucket(uint64(got)) != hist.Bucket(uint64(want)) {
					t.Errorf("%s p%g: %.0f ns, exact %.0f ns: not in its log2 bucket", st, q*100, got, want)
				}
			} else if off > 1.0/hist.FineSubs {
				// What docs/record.md promises: within the sub-bucket
				// that holds the exact value, 6.25% wide (typically
				// under 3%; a p99 of ~300 requests, interpolated in a
				// sub-bucket holding its few, was 5.5% off once).
				t.Errorf("%s p%g: %.0f ns, exact %.0f ns: more than a sub-bucket (6.25%%) off", st, q*100, got, want)
			}
		}
	}
	// The CSV view's daemon p50 is the record's.
	rows, err := csv.NewReader(strings.NewReader(string(e2e.MustRead(t, e2e.Fusescope, "show", "--csv", rec)))).ReadAll()
	if err != nil || len(rows) < 2 {
		t.Fatalf("show --csv: %v %q", err, rows)
	}
	col := slices.Index(rows[0], "daemon_p50_ns")
	if want := fmt.Sprintf("%.0f", stageOf(t, s, profile.StageDaemon).Quantile(0.5)); col < 0 || rows[1][col] != want {
		t.Errorf("show --csv's daemon_p50_ns is not the record's %s ns: %q", want, rows)
	}
}

// Interval records with stages are whole records (once, a request
// counted in one interval's total and the next one's stages made show,
// report and diff refuse the stream): READs of 2 ms each from two readers
// under `trace --stages --json 0.2 N`, so that requests are in flight at
// every interval's end. Every record's stages count each of its requests
// once (split, or counted as a gap), the intervals add up to the daemon's
// own count of READs, and show, report and diff read the stream.
func TestStageIntervalsAddUp(t *testing.T) {
	// Not parallel: its workload is timed to fit inside the trace's intervals.
	cfg, err := labfs.Preset("nocache")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Latency, err = labfs.ParseLatency("read=2ms"); err != nil {
		t.Fatal(err)
	}
	src, mnt, f := e2e.MountLabFS(t, cfg)
	for i := range 4 {
		if err := os.WriteFile(filepath.Join(src, fmt.Sprint("f", i)), make([]byte, 64<<10), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	conn := e2e.ConnOf(t, mnt)
	daemonReads := func() uint64 {
		if s := f.Record().Profile.Find(conn, fuseproto.Read); s != nil {
			return s.Count
		}
		return 0
	}
	const intervals = 12
	tr := e2e.StartTrace(t, "--mount", mnt, "--stages", "--slower", "1ns", "--json", "0.2", fmt.Sprint(intervals))
	before := daemonReads()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 4096)
			for i := 0; !stop.Load(); i++ {
				fh, err := os.Open(filepath.Join(mnt, fmt.Sprint("f", (r+2*i)%4)))
				if err != nil {
					t.Error(err)
					return
				}
				for {
					if n, err := fh.Read(buf); n == 0 || err != nil {
						break
					}
				}
				fh.Close()
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond) // the workload's length, well inside the trace's 2.4 s
	stop.Store(true)
	wg.Wait()
	e2e.WaitIdle(t, conn)
	read := daemonReads() - before
	select {
	case err := <-tr.Done:
		if err != nil {
			t.Fatalf("trace: %v\n%s", err, tr.Stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("trace 0.2 12 did not end by itself")
	}
	stream := filepath.Join(t.TempDir(), "intervals.jsonl")
	if err := os.WriteFile(stream, tr.Stdout.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	recs, err := profile.ParseAll(tr.Stdout.Bytes())
	if err != nil {
		t.Fatalf("the interval records do not read back: %v", err)
	}
	if len(recs) != intervals {
		t.Fatalf("%d records, want %d", len(recs), intervals)
	}
	var sum, busy uint64
	for i, r := range recs {
		s := r.Profile.Find(conn, fuseproto.Read)
		if s == nil {
			continue
		}
		busy++
		sum += s.Count
		for _, st := range []profile.Stage{profile.StageQueue, profile.StageDaemon, profile.StageReply} {
			h := stageOf(t, s, st)
			if got := h.Count + s.StageGaps.NotTaken + s.StageGaps.NotReplied; got != s.Count {
				t.Errorf("interval %d: READ %s split %d + gaps %+v of %d requests", i+1, st, h.Count, s.StageGaps, s.Count)
			}
			// The interval's extremes are its own: its requests, sent
			// whole, say what they were.
			lo, hi := uint64(math.MaxUint64), uint64(0)
			for _, sr := range r.Slow {
				if sr.Op == "READ" && len(sr.Stages) == 3 {
					d := uint64(sr.Stages[stageIndex(st)].Nanoseconds())
					lo, hi = min(lo, d), max(hi, d)
				}
			}
			if h.Count > 0 && (h.Min != lo || h.Max != hi) {
				t.Errorf("interval %d: READ %s min %d max %d ns, its requests' %d and %d ns", i+1, st, h.Min, h.Max, lo, hi)
			}
		}
	}
	t.Logf("%d READs in %d intervals; the daemon counted %d", sum, busy, read)
	// At least three intervals with READs: two interval ends with requests
	// in flight (1.5 s of reads makes seven, fewer when make test's
	// parallel packages hold the CPUs: four once).
	if sum != read || busy < 3 {
		t.Errorf("the intervals hold %d READs in %d intervals, the daemon counted %d: want all of them, in at least 3 intervals", sum, busy, read)
	}
	for _, args := range [][]string{{"show", stream}, {"report", "-o", filepath.Join(t.TempDir(), "r.html"), stream}, {"diff", stream, stream}} {
		if out, err := exec.Command(e2e.Fusescope, args...).CombinedOutput(); err != nil {
			t.Errorf("fusescope %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

func stageIndex(st profile.Stage) int {
	return slices.Index([]profile.Stage{profile.StageQueue, profile.StageDaemon, profile.StageReply}, st)
}

// go-fuse replies to a READ of a file by writing the header into a pipe,
// splicing the file's bytes after it, and splicing the pipe to /dev/fuse,
// sometimes from another thread than the one that wrote the header: every
// such reply is split into stages (the header is found by the pipe, not by
// the thread). Before, 4-5 READs in 2,048 were "not replied".
func TestStagesSplicedRepliesAllSplit(t *testing.T) {
	t.Parallel()
	cfg, err := labfs.Preset("default")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Latency, err = labfs.ParseLatency("read=2ms"); err != nil {
		t.Fatal(err)
	}
	src, mnt, _ := e2e.MountLabFS(t, cfg)
	for i := range 4 {
		if err := os.WriteFile(filepath.Join(src, fmt.Sprint("f", i)), make([]byte, 16<<20), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Each round reads the files cold: their pages dropped (dd's nocache
	// with no block: the whole file), not every mount's (drop_caches), which
	// tests running beside this one count on.
	script := fmt.Sprintf(`for r in 1 2; do for i in 0 1 2 3; do dd if=%[1]s/f$i iflag=nocache count=0 2>/dev/null; done
for i in 0 1 2 3; do dd if=%[1]s/f$i of=/dev/null bs=128k 2>/dev/null & done; wait; done`, mnt)
	rec := filepath.Join(t.TempDir(), "rec.json")
	e2e.Run(t, e2e.Fusescope, "trace", "--mount", mnt, "--stages", "-o", rec, "--", "sh", "-c", script)
	r := e2e.LoadRecord(t, rec)
	s := r.Profile.Find(e2e.ConnOf(t, mnt), fuseproto.Read)
	if s == nil || s.Count < 512 {
		t.Fatalf("READs: %+v, want at least 512 (8 reads of 16 MiB with the cache dropped)", s)
	}
	if len(s.Stages) == 0 || s.Stages[0].Latency.Count != s.Count {
		t.Errorf("%d READs, %d split into stages; gaps %+v", s.Count, s.Stages[0].Latency.Count, s.StageGaps)
	}
}
