package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/labfs"
	"github.com/fusescope/fusescope/test/e2e"
	"github.com/fusescope/fusescope/test/fsx"
	"github.com/fusescope/fusescope/test/labmodes"
)

// fsxResult is what fsx -json prints.
type fsxResult struct {
	Seed    uint64
	Stats   fsx.Stats
	Failure string
}

// fsxOps is the number of operations of each run in make test: tens of
// thousands per configuration over its one- and two-process runs.
// FUSESCOPE_FSX_OPS changes it.
func fsxOps(t *testing.T) int {
	if s := os.Getenv("FUSESCOPE_FSX_OPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("FUSESCOPE_FSX_OPS=%q: give a number of operations", s)
		}
		return n
	}
	return 10000
}

// fsxSeed is a configuration's fixed seed, or FUSESCOPE_FSX_SEED.
func fsxSeed(t *testing.T, name string) uint64 {
	if s := os.Getenv("FUSESCOPE_FSX_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("FUSESCOPE_FSX_SEED=%q: give a number", s)
		}
		return n
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64() % 1_000_000
}

// runFsx runs the model checker on a new file of mnt, whose source is
// src, in processes of its own: its mappings must not fault in a process
// that serves the mount.
func runFsx(t *testing.T, name, src, mnt string, seed uint64, ops, procs int) {
	t.Helper()
	cmd := exec.Command(e2e.Fsx, "-json", "-seed", fmt.Sprint(seed), "-ops", fmt.Sprint(ops), "-procs", fmt.Sprint(procs),
		"-backing", filepath.Join(src, "fsx"), filepath.Join(mnt, "fsx"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	var res fsxResult
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		t.Fatalf("fsx: %v, answered %q", err, out)
	}
	st := res.Stats
	t.Logf("seed %d: %d operations, %d read-backs, %.0f MiB moved, file up to %.1f MiB, %v",
		seed, st.Ops, st.Checks, float64(st.Bytes)/(1<<20), float64(st.MaxSize)/(1<<20), st.Duration.Round(time.Millisecond))
	if res.Failure != "" {
		t.Errorf("mode %s, %d process(es):\n%s\nreplay: FUSESCOPE_FSX_SEED=%d FUSESCOPE_FSX_OPS=%d go test ./test/e2e -run '%s'",
			name, procs, res.Failure, seed, st.Ops, t.Name())
	}
}

// mountPlain mounts a lab file system with the fusescope built without
// the race detector, in a daemon of its own, with cfg's flags.
func mountPlain(t *testing.T, cfg labfs.Config) (src, mnt string) {
	t.Helper()
	src, mnt = t.TempDir(), t.TempDir()
	args := append(append([]string{"fs", "mount", "--background"}, cfg.Args()...), src, mnt)
	if out, err := exec.Command(e2e.FusescopePlain, args...).CombinedOutput(); err != nil {
		t.Fatalf("fusescope %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(e2e.FusescopePlain, "fs", "umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("fs umount %s: %v\n%s", mnt, err, out)
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	return src, mnt
}

// The lab file system keeps a file as the model says, through tens of
// thousands of random operations in every mode, by one process and by
// two, and has lost nothing written by the time the file is closed: the
// model checker's fixed seeds. The daemons run without the race detector,
// which would slow them several times; TestLabFSModelCheckRace runs the
// in-process daemon under it. A failure prints the seed and the shortest
// failing prefix; FUSESCOPE_FSX_SEED and FUSESCOPE_FSX_OPS replay it.
func TestLabFSModelCheck(t *testing.T) {
	t.Parallel()
	ms := labmodes.All()
	names := make([]string, 0, len(ms))
	for name := range ms {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, procs := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/procs=%d", name, procs), func(t *testing.T) {
				t.Parallel() // two at a time (go test's -parallel is GOMAXPROCS): each waits on its daemon much of the time
				src, mnt := mountPlain(t, ms[name])
				runFsx(t, name, src, mnt, fsxSeed(t, fmt.Sprintf("%s/%d", name, procs)), fsxOps(t), procs)
			})
		}
	}
}

// The model checker on the lab file system served in this process, under
// the race detector (make test), in the modes where the most goroutines
// meet: every user-space feature, over direct_io and over write-back.
func TestLabFSModelCheckRace(t *testing.T) {
	t.Parallel()
	ms := labmodes.All()
	for _, name := range []string{"nocache+userspace", "writeback+userspace"} {
		t.Run(name, func(t *testing.T) {
			src, mnt, _ := e2e.MountLabFS(t, ms[name])
			runFsx(t, name, src, mnt, fsxSeed(t, name+"/race"), max(fsxOps(t)/5, 1), 2)
		})
	}
}

// The model checker fails, with the seed and the shortest failing prefix,
// on a file system that stops working part-way: a lab file system whose
// connection is aborted (every later request fails).
func TestModelCheckerReportsFailures(t *testing.T) {
	t.Parallel()
	src, mnt, f := e2e.MountLabFS(t, e2e.Preset(t, "default"))
	cmd := exec.Command(e2e.Fsx, "-json", "-seed", "7", "-ops", "100000", "-shrink-budget", "1s",
		"-backing", filepath.Join(src, "fsx"), filepath.Join(mnt, "fsx"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e2e.WaitFor(t, "fsx's first requests", func() bool {
		r := f.Record()
		return r.Meta.FS.Requests > 200
	})
	abort := filepath.Join(fuseconn.Dir, fmt.Sprint(f.Conn), "abort")
	if err := os.WriteFile(abort, []byte("1"), 0o200); err != nil {
		t.Fatal(err)
	}
	var res fsxResult
	jerr := json.NewDecoder(out).Decode(&res)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || jerr != nil {
		t.Fatalf("fsx on an aborted mount: %v (%v), want exit status 1 and a report", err, jerr)
	}
	if !strings.Contains(res.Failure, "seed 7") || !strings.Contains(res.Failure, "shortest failing prefix") {
		t.Errorf("the report names no seed or prefix:\n%s", res.Failure)
	}
}

// coherence is what fsx -coherence -json prints.
type coherence struct {
	Writes, Reads, Stale, StaleVersions, Torn, MaxLag uint64
	MaxAge                                            time.Duration
}

// runCoherence runs the coherence tester on a file of mnt for d.
func runCoherence(t *testing.T, mnt string, d time.Duration, args ...string) coherence {
	t.Helper()
	cmd := exec.Command(e2e.Fsx, append(append([]string{"-json", "-coherence", d.String()}, args...), filepath.Join(mnt, "coherence"))...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	var c coherence
	if jerr := json.Unmarshal(out, &c); err != nil || jerr != nil {
		t.Fatalf("fsx -coherence: %v, answered %q", err, out)
	}
	return c
}

// One writer and two readers, each a process with an open of its own:
// no read returns a block older than a write of it that had completed
// before the read began, in any mode (the page cache, direct_io,
// write-back, passthrough, close-to-open and the user-space features are
// all coherent for users of one mount).
func TestLabFSCoherence(t *testing.T) {
	t.Parallel()
	for name, cfg := range labmodes.All() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, mnt := mountPlain(t, cfg)
			c := runCoherence(t, mnt, 3*time.Second, "-readers", "2")
			t.Logf("%d writes, %d reads: %d stale (%d versions of blocks), %d torn", c.Writes, c.Reads, c.Stale, c.StaleVersions, c.Torn)
			if c.Reads < 1000 || c.Writes < 1000 {
				t.Errorf("only %d writes and %d reads in 3 s", c.Writes, c.Reads)
			}
			// Where the kernel drops a file's pages while writes go on
			// (auto_inval_data, close-to-open's opens), a READ of a
			// dropped page may still be served before the WRITE that
			// filled it: the daemon orders a READ after the WRITEs the
			// kernel queued before it, but the kernel unlocks a written
			// page before it queues the WRITE (docs/labfs.md,
			// "Coherence"). Such a page is read stale until written
			// again, by each reader: those modes are held to one such
			// page per reader in a run, every other mode to none.
			var limit uint64
			if !cfg.DirectIO && (!cfg.NoAutoInvalData || cfg.Invalidation == "cto") {
				limit = 2
			}
			if c.StaleVersions > limit {
				t.Errorf("%d of %d reads returned a block older than a completed write (%d stale versions of blocks, up to %d writes behind); at most %d versions allowed",
					c.Stale, c.Reads, c.StaleVersions, c.MaxLag, limit)
			}
		})
	}
}

// Writes made in the source directory, behind the mount's back, reach a
// reader that keeps the file open within the attribute timeout where
// auto_inval_data is negotiated (the default preset: the kernel drops a
// file's pages when a GETATTR finds a new mtime), and never while it stays
// open without it. docs/labfs.md quotes these figures.
func TestLabFSCoherenceBehindTheMount(t *testing.T) {
	t.Parallel()
	for _, inval := range []bool{true, false} {
		t.Run(fmt.Sprintf("auto_inval_data=%v", inval), func(t *testing.T) {
			t.Parallel()
			e2e.KeepsCaches(t) // without auto_inval_data the reader's pages stay cached
			cfg := e2e.Preset(t, "default")
			cfg.NoAutoInvalData = !inval
			src, mnt := mountPlain(t, cfg)
			c := runCoherence(t, mnt, 3*time.Second, "-readers", "1", "-write-every", "2ms",
				"-writer-path", filepath.Join(src, "coherence"))
			t.Logf("%d writes, %d reads: %d stale (%.0f%%), a write unseen for up to %v", c.Writes, c.Reads, c.Stale,
				100*float64(c.Stale)/float64(max(c.Reads, 1)), c.MaxAge.Round(time.Millisecond))
			switch {
			case inval && c.MaxAge > labfs.DefaultTimeout+300*time.Millisecond:
				t.Errorf("with auto_inval_data a write in the source went unseen for %v, want at most the attribute timeout %v", c.MaxAge, labfs.DefaultTimeout)
			case !inval && c.MaxAge < 2*time.Second:
				t.Errorf("without auto_inval_data a write in the source was seen after %v: the reader's pages should stay until it reopens", c.MaxAge)
			}
		})
	}
}
