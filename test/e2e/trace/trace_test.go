package trace

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/test/e2e"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// With entry and attr timeouts of 0, stat of N distinct files costs exactly N
// LOOKUPs; every opcode's count must equal what the daemon served, whichever
// way the programs attach.
func TestTraceCountsMatchDaemon(t *testing.T) {
	t.Parallel()
	for _, attach := range []string{"tp_btf", "tracepoint"} {
		t.Run(attach, func(t *testing.T) { traceCountsMatchDaemon(t, attach) })
	}
}

func traceCountsMatchDaemon(t *testing.T, attach string) {
	const nFiles, bigPages = 50, 8
	mnt, daemon := mountLab(t, nFiles, bigPages, 0)
	rec := filepath.Join(t.TempDir(), "rec.json")
	before := daemon.snapshot()
	tr := e2e.StartTrace(t, "--mount", mnt, "--attach", attach, "-o", rec)

	for i := 0; i < nFiles; i++ {
		if _, err := os.Stat(filepath.Join(mnt, "files", fmt.Sprintf("f%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	// direct_io: each 4 KiB read() is one READ, plus one that finds EOF.
	f, err := os.Open(filepath.Join(mnt, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(buf)
		if n == 0 || err != nil {
			break
		}
	}
	f.Close()
	e2e.WaitIdle(t, e2e.ConnOf(t, mnt)) // RELEASE is sent in the background, after the close returned
	tr.Stop(t)
	after := daemon.snapshot()

	got := e2e.Counts(e2e.LoadRecord(t, rec), e2e.ConnOf(t, mnt))
	t.Logf("traced %v; daemon after %v", got, after)
	// The stat loop walks files/ once per file, and the open walks big.bin.
	if got["LOOKUP"] != 2*nFiles+1 {
		t.Errorf("LOOKUP = %d, want %d (%d stats of files/fNNN, each resolving files/ and the file, + big.bin)", got["LOOKUP"], 2*nFiles+1, nFiles)
	}
	if got["READ"] != bigPages+1 {
		t.Errorf("READ = %d, want %d (%d pages + EOF)", got["READ"], bigPages+1, bigPages)
	}
	for op, n := range after {
		want := n - before[op]
		if got[op.String()] != want {
			t.Errorf("%s: traced %d, daemon served %d", op, got[op.String()], want)
		}
	}
	for op, n := range got {
		o, _ := fuseproto.ParseOpcode(op)
		if _, ok := after[o]; !ok && n > 0 {
			t.Errorf("%s: traced %d requests the daemon's counters do not cover", op, n)
		}
	}
}

// A daemon that sleeps 2 ms in GETATTR must show GETATTR's p50 inside
// [2^21, 2^22) ns.
func TestTraceInjectedLatency(t *testing.T) {
	// Not parallel: it measures injected latencies, which other tests' load would stretch.
	// 2^21 ns is 2.097 ms: a sleep of exactly 2 ms put the p50 in bucket
	// 20 in 2 of 15 runs here, whenever the request path and the sleep's
	// overshoot added less than 97 us. 2.2 ms is a "2 ms" daemon whose p50
	// belongs in [2^21, 2^22) whatever the overshoot.
	const injected = 2200 * time.Microsecond
	mnt, _ := mountLab(t, 4, 1, injected)
	// A busy machine stretched the daemon's sleeps and wake-ups past
	// 4.2 ms once (a p50 of 5.07 ms): measured again (e2e.Timed).
	e2e.Timed(t, 5, func() []string {
		if p50, ok := injectedLatencyP50(t, mnt, injected); !ok {
			return []string{e2e.Stretched("GETATTR p50 %.0f ns in bucket %d, want bucket 21 [2^21, 2^22) ns", p50, hist.Bucket(uint64(p50)))}
		}
		return nil
	})
}

// injectedLatencyP50 traces 100 GETATTRs of mnt and checks them against
// the injected latency: ok when their p50 is in bucket 21. An error is
// reported for what no load explains.
func injectedLatencyP50(t *testing.T, mnt string, injected time.Duration) (float64, bool) {
	rec := filepath.Join(t.TempDir(), "rec.json")
	tr := e2e.StartTrace(t, "--mount", mnt, "--op", "GETATTR", "-o", rec)
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(mnt); err != nil {
			t.Fatal(err)
		}
	}
	tr.Stop(t)
	r := e2e.LoadRecord(t, rec)
	s := r.Profile.Find(e2e.ConnOf(t, mnt), fuseproto.Getattr)
	if s == nil || s.Count < 100 {
		t.Fatalf("GETATTR statistics missing or short: %+v", s)
	}
	p50 := s.Latency.Quantile(0.5)
	t.Logf("GETATTR n=%d min=%d p50=%.0f max=%d", s.Count, s.Latency.Min, p50, s.Latency.Max)
	if s.Latency.Min < uint64(injected) || p50 < float64(injected) {
		t.Fatalf("GETATTR min %d ns, p50 %.0f ns: below the injected %v", s.Latency.Min, p50, injected)
	}
	for _, o := range r.Profile.Ops {
		if o.Op != "GETATTR" {
			t.Errorf("--op GETATTR let %s through", o.Op)
		}
	}
	return p50, hist.Bucket(uint64(p50)) == 21
}

// An interval's minimum and maximum are its own, not the run's so far, even
// when both fall in one histogram bucket (2.2 ms and 3.6 ms are both in
// [2^21, 2^22) ns, so a difference of cumulative snapshots cannot tell
// them apart), on both ways of attaching.
func TestTraceIntervalExtremes(t *testing.T) {
	// Not parallel: it times requests against the interval records' boundaries.
	for _, attach := range []string{"tp_btf", "tracepoint"} {
		t.Run(attach, func(t *testing.T) { traceIntervalExtremes(t, attach) })
	}
}

func traceIntervalExtremes(t *testing.T, attach string) {
	const slow, fast = 3600 * time.Microsecond, 2200 * time.Microsecond
	mnt, daemon := mountLab(t, 4, 1, slow)
	tr := e2e.StartTrace(t, "--attach", attach, "--mount", mnt, "--op", "GETATTR", "--json", "0.5")
	// statN returns the longest stat: each GETATTR lies inside its stat,
	// so the kernel's latency of the fast ones cannot exceed it.
	statN := func(n int) (longest time.Duration) {
		for i := 0; i < n; i++ {
			start := time.Now()
			if _, err := os.Stat(mnt); err != nil {
				t.Fatal(err)
			}
			longest = max(longest, time.Since(start))
		}
		return longest
	}
	// Two interval boundaries after each phase: the trace's records of
	// them, one line each, say when they have passed.
	intervals := func() int { return strings.Count(tr.Stdout.String(), "\n") }
	statN(10)
	n := intervals()
	e2e.WaitFor(t, "two more interval records", func() bool { return intervals() >= n+2 })
	daemon.getattrDelay.Store(int64(fast))
	fastStat := statN(10)
	n = intervals()
	e2e.WaitFor(t, "two more interval records", func() bool { return intervals() >= n+2 })
	tr.Stop(t)
	var last *profile.OpStats
	for _, line := range strings.Split(strings.TrimSpace(tr.Stdout.String()), "\n") {
		var r profile.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("interval record: %v\n%s", err, line)
		}
		for i := range r.Profile.Ops {
			if r.Profile.Ops[i].Op == "GETATTR" {
				last = &r.Profile.Ops[i]
			}
		}
	}
	if last == nil {
		t.Fatalf("no interval with GETATTR:\n%s", tr.Stdout.String())
	}
	h := last.Latency
	t.Logf("last interval: n=%d min=%d max=%d; its longest stat %v", h.Count, h.Min, h.Max, fastStat)
	// On a busy machine a fast stat may be preempted past the slow delay;
	// the bound is then the stat's duration, which the earlier maximum
	// (at least the slow delay) would still exceed in most runs.
	if h.Min < uint64(fast) || h.Max > uint64(fastStat) || h.Min > h.Max {
		t.Errorf("last interval's GETATTR [%d, %d] ns: want its own extremes, at least %d and at most its longest stat %d (the earlier ones took %v)", h.Min, h.Max, fast, fastStat.Nanoseconds(), slow)
	}
	if q := h.Quantile(0.99); q > float64(h.Max) {
		t.Errorf("p99 %.0f above the maximum %d", q, h.Max)
	}
}

// Requests in flight when their connection is aborted end with
// ECONNABORTED: the tracer counts them as such and keeps nothing in flight
// for them (the in-flight table must not leak), on both ways of attaching.
func TestTraceAbortedConnection(t *testing.T) {
	t.Parallel()
	for _, attach := range []string{"tp_btf", "tracepoint"} {
		t.Run(attach, func(t *testing.T) { traceAbortedConnection(t, attach) })
	}
}

func traceAbortedConnection(t *testing.T, attach string) {
	mnt := t.TempDir()
	zero := time.Duration(0)
	raw := fs.NewNodeFS(&labTree{nFiles: 1}, &fs.Options{EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero})
	// Every GETATTR takes 3 s: long enough to abort the connection under it.
	daemon := &countingFS{RawFileSystem: raw, counts: map[fuseproto.Opcode]uint64{}}
	daemon.getattrDelay.Store(int64(3 * time.Second))
	srv, err := e2e.NewServer(daemon, mnt, &fuse.MountOptions{FsName: "fusescope-testfs", Name: "testfs", DirectMount: true})
	if err != nil {
		t.Fatalf("mounting the test file system: %v", err)
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		t.Fatal(err)
	}
	conn := e2e.ConnOf(t, mnt)
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })

	rec := filepath.Join(t.TempDir(), "rec.json")
	tr := e2e.StartTrace(t, "--conn", strconv.Itoa(int(conn)), "--attach", attach, "-o", rec)
	const stats = 3
	done := make(chan error, stats)
	sent, before := time.Now(), daemon.snapshot()[fuseproto.Getattr]
	for i := 0; i < stats; i++ {
		go func() {
			_, err := os.Stat(mnt)
			done <- err
		}()
	}
	e2e.Eventually(t, 10*time.Second, "all three GETATTRs with the daemon", func() (bool, string) {
		n := daemon.snapshot()[fuseproto.Getattr] - before
		return n == stats, fmt.Sprintf("%d GETATTRs", n)
	})
	// Aborted at least 400 ms after they were sent: the check below tells
	// requests ended by the abort from requests that ended early.
	time.Sleep(time.Until(sent.Add(500 * time.Millisecond)))
	abort := fmt.Sprintf("/sys/fs/fuse/connections/%d/abort", conn)
	if err := os.WriteFile(abort, []byte("1"), 0o200); err != nil {
		t.Fatalf("aborting the connection: %v", err)
	}
	for i := 0; i < stats; i++ {
		if err := <-done; err == nil {
			t.Error("a stat under an aborted connection succeeded")
		}
	}
	// The trace ends by itself, with one line saying why and a non-zero
	// exit, having saved what it measured.
	select {
	case err := <-tr.Done:
		if err == nil || !strings.Contains(tr.Stderr.String(), "the daemon died while traced (the connection was aborted") {
			t.Errorf("after the abort the trace exited with %v:\n%s", err, tr.Stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the trace did not notice the aborted connection within 10 s")
	}
	r := e2e.LoadRecord(t, rec)
	s := r.Profile.Find(conn, fuseproto.Getattr)
	if s == nil || s.Count != stats || s.Errnos["ECONNABORTED"] != stats {
		t.Fatalf("GETATTR %+v, want %d requests ended with ECONNABORTED", s, stats)
	}
	if s.Latency.Min < uint64(400*time.Millisecond) {
		t.Errorf("GETATTR min %d ns: the requests ended before the abort", s.Latency.Min)
	}
	if d := r.Profile.Drops; d.Lost() != 0 {
		t.Errorf("drops %+v: the aborted requests must end, not be lost", d)
	}
}

// --slower prints each request that took at least the threshold, as it
// ends: every GETATTR of a daemon that takes 2.2 ms over each (as many as
// the daemon served), with the latency the kernel saw, the command and
// process that asked, and the inode; on both ways of attaching.
func TestTraceSlower(t *testing.T) {
	// Not parallel: it times requests against the --slower threshold.
	e2e.Need(t, "stat")
	const injected = 2200 * time.Microsecond
	for _, v := range []struct {
		attach string
		csv    bool // --csv: CSV rows, as ext4slower -j prints them
	}{{"tp_btf", false}, {"tracepoint", false}, {"tp_btf", true}} {
		name := v.attach
		if v.csv {
			name += " --csv"
		}
		mnt, cfs := mountLab(t, 4, 1, injected)
		rec := filepath.Join(t.TempDir(), "rec.json")
		args := []string{"--mount", mnt, "--slower", "1ms", "--no-hist", "--attach", v.attach, "-o", rec}
		if v.csv {
			args = append(args, "--csv")
		}
		tr := e2e.StartTrace(t, args...)
		before := cfs.snapshot()[fuseproto.Getattr]
		pids := map[string]bool{}
		for range 10 {
			cmd := exec.Command("stat", "-c", "%i", mnt)
			if out, err := cmd.Output(); err != nil {
				t.Fatalf("stat: %v %s", err, out)
			}
			pids[strconv.Itoa(cmd.Process.Pid)] = true
		}
		served := cfs.snapshot()[fuseproto.Getattr] - before
		out := tr.Stop(t)
		// Each line as (op, latency in us, comm, pid, errno, node id, mount).
		var rows [][7]string
		if v.csv {
			all, err := csv.NewReader(strings.NewReader(out)).ReadAll()
			if err != nil || len(all) == 0 || strings.Join(all[0], ",") != "end_time,mount,conn,op,latency_ns,errno,req_bytes,reply_bytes,node_id,pid,comm,queue_ns,daemon_ns,reply_ns,file" {
				t.Fatalf("%s: not the slow requests' CSV (%v):\n%s", name, err, out)
			}
			for _, r := range all[1:] {
				ns, _ := strconv.ParseFloat(r[4], 64)
				errno := r[5]
				if errno == "" {
					errno = "-"
				}
				rows = append(rows, [7]string{r[3], strconv.FormatFloat(ns/1e3, 'f', 1, 64), r[10], r[9], errno, r[8], r[1]})
			}
		} else {
			lines := strings.Split(out, "\n")
			header := strings.Fields(lines[0])
			if strings.Join(header, " ") != "TIME COMM PID OP LAT(us) ERRNO REQ REPLY NODEID MOUNT FILE" {
				t.Fatalf("%s: header %q", name, lines[0])
			}
			for _, line := range lines[1:] {
				f := strings.Fields(line)
				if len(f) != len(header) || f[0] == "MOUNT" {
					break // the table that follows
				}
				rows = append(rows, [7]string{f[3], f[4], f[1], f[2], f[5], f[8], f[9]})
			}
		}
		getattrs := 0
		for _, r := range rows {
			if r[0] != "GETATTR" {
				t.Logf("%s: another slow request: %v", name, r) // this VM stalls now and then
				continue
			}
			getattrs++
			lat, err := strconv.ParseFloat(r[1], 64)
			if err != nil || lat < 2200 || lat > 1e6 {
				t.Errorf("%s: latency %q us, want at least the injected 2200 us: %v", name, r[1], r)
			}
			if r[2] != "stat" || !pids[r[3]] || r[4] != "-" || r[6] != mnt {
				t.Errorf("%s: %v: want stat, one of the stat processes %v, no error, %s", name, r, pids, mnt)
			}
			if wantNode := map[string]string{"tp_btf": "1", "tracepoint": "0"}[v.attach]; r[5] != wantNode {
				t.Errorf("%s: node id %s, want %s (the root; the classic tracepoint carries none)", name, r[5], wantNode)
			}
		}
		if served < 10 || uint64(getattrs) != served {
			t.Errorf("%s: %d GETATTR lines, the daemon served %d (at least 10)\n%s", name, getattrs, served, out)
		}
		// The record holds them, and show prints them as the trace did.
		r := e2e.LoadRecord(t, rec)
		n := 0
		for _, s := range r.Slow {
			if s.Op == "GETATTR" {
				n++
				if s.Latency < injected || s.Comm != "stat" || !pids[strconv.Itoa(int(s.PID))] || s.Mount != mnt {
					t.Errorf("%s: recorded %+v", name, s)
				}
			}
		}
		if n != getattrs || r.SlowLost != 0 {
			t.Errorf("%s: the record holds %d GETATTRs (%d lost), the trace printed %d", name, n, r.SlowLost, getattrs)
		}
		if len(r.Profile.Ops) == 0 {
			t.Errorf("%s: the record holds no statistics", name)
		}
		show := []string{"show", "--no-hist", rec}
		if v.csv {
			show = []string{"show", "--csv", "--table", "slow", rec}
		}
		if shown := e2e.MustRead(t, e2e.Fusescope, show...); string(shown) != out {
			t.Errorf("%s: show differs from the live trace:\n--- live\n%s\n--- show\n%s", name, out, shown)
		}
	}
}

// trace -- CMD traces while the command runs, from before its first request
// to after its last: every request the daemon served for it is counted,
// and fusescope exits with the command's status.
func TestTraceCommand(t *testing.T) {
	t.Parallel()
	const nFiles = 20
	mnt, daemon := mountLab(t, nFiles, 1, 0)
	rec := filepath.Join(t.TempDir(), "rec.json")
	var paths []string
	for i := 0; i < nFiles; i++ {
		paths = append(paths, filepath.Join(mnt, "files", fmt.Sprintf("f%03d", i)))
	}
	before := daemon.snapshot()
	cmd := exec.Command(e2e.Fusescope, "trace", "--mount", mnt, "-o", rec, "--", "sh", "-c", `stat "$@" >/dev/null; exit 3`, "sh")
	cmd.Args = append(cmd.Args, paths...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("exit %v, want the command's status 3:\n%s", err, out)
	}
	after := daemon.snapshot()
	got := e2e.Counts(e2e.LoadRecord(t, rec), e2e.ConnOf(t, mnt))
	if got["LOOKUP"] != 2*nFiles {
		t.Errorf("LOOKUP = %d, want %d (files/ and the file, for each stat)", got["LOOKUP"], 2*nFiles)
	}
	for op, n := range after {
		if want := n - before[op]; got[op.String()] != want {
			t.Errorf("%s: traced %d, daemon served %d", op, got[op.String()], want)
		}
	}

	// A signal sent to fusescope alone reaches the command, whose death
	// ends the trace: the report is printed, and the status is 128+SIGINT.
	cmd = exec.Command(e2e.Fusescope, "trace", "--mount", mnt, "--counts", "--", "sleep", "30")
	var stdout, stderr e2e.LockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e2e.Eventually(t, 10*time.Second, "the trace to say it runs sleep", func() (bool, string) {
		return strings.Contains(stderr.String(), "while sleep runs"), stderr.String()
	})
	cmd.Process.Signal(os.Interrupt)
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+int(syscall.SIGINT) {
		t.Errorf("exit %v, want %d (sleep killed by SIGINT); stderr:\n%s", err, 128+int(syscall.SIGINT), stderr.String())
	}
	if !strings.Contains(stdout.String(), "No FUSE requests were traced.") {
		t.Errorf("no report after the command died:\n%s", stdout.String())
	}
}

// The RELEASE of a command's last close is sent in the background and
// ends after the command has exited: the trace waits for it (the lab fs
// delays RELEASE 300 ms), so that cat's one OPEN has its RELEASE. A
// RELEASE the daemon holds 5 s is not waited for beyond a second: the
// trace ends well before it, without it.
func TestTraceCommandWaitsForItsLastRelease(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		delay       string
		wantRelease uint64
	}{{"300ms", 1}, {"5s", 0}} {
		src, mnt := t.TempDir(), t.TempDir()
		if err := os.WriteFile(filepath.Join(src, "f"), []byte("data\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(e2e.Fusescope, "fs", "mount", "--background", "--latency", "release="+c.delay, src, mnt).CombinedOutput(); err != nil {
			t.Fatalf("fs mount: %v\n%s", err, out)
		}
		t.Cleanup(func() { exec.Command(e2e.Fusescope, "fs", "umount", mnt).Run() })
		rec := filepath.Join(t.TempDir(), "rec.json")
		start := time.Now()
		if out, err := exec.Command(e2e.Fusescope, "trace", "--mount", mnt, "-o", rec, "--", "cat", filepath.Join(mnt, "f")).CombinedOutput(); err != nil {
			t.Fatalf("trace: %v\n%s", err, out)
		}
		took := time.Since(start)
		got := e2e.Counts(e2e.LoadRecord(t, rec), e2e.ConnOf(t, mnt))
		if got["OPEN"] != 1 || got["RELEASE"] != c.wantRelease {
			t.Errorf("RELEASE delayed %s: traced %v, want 1 OPEN and %d RELEASE", c.delay, got, c.wantRelease)
		}
		if c.wantRelease == 0 && took >= 4500*time.Millisecond {
			t.Errorf("RELEASE delayed %s: the trace took %v, waiting for it beyond its second", c.delay, took)
		}
	}
}

// trace's count ends the command with the trace (once, trace 1 20
// -- CMD exited after its count and left CMD running): a command that
// started a child of its own and outlives `trace 0.2 2` is ended with it,
// a line says so, and fusescope exits with the command's status, 143.
func TestTraceCountEndsTheCommand(t *testing.T) {
	t.Parallel()
	mnt, _ := mountLab(t, 1, 1, 0)
	pids := filepath.Join(t.TempDir(), "pids")
	cmd := exec.Command(e2e.Fusescope, "trace", "--mount", mnt, "--counts", "0.2", "2", "--",
		"sh", "-c", `sleep 30 & echo $! > "$0"; wait`, pids)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %v, want %d (the command ended by SIGTERM):\n%s", err, 128+int(syscall.SIGTERM), out)
	}
	if !strings.Contains(string(out), "was still running when the run's count of 2 intervals was reached: sent it and the process it started SIGTERM; it ended by SIGTERM.") {
		t.Errorf("no line says the command was ended:\n%s", out)
	}
	b, _ := os.ReadFile(pids)
	var child int
	fmt.Sscan(string(b), &child)
	if child == 0 {
		t.Fatalf("the command's child did not start: %q", b)
	}
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child)); err == nil && !strings.Contains(string(st), ") Z ") {
		syscall.Kill(child, syscall.SIGKILL)
		t.Errorf("the command's child %d still runs after fusescope exited: %s", child, st)
	}
}

// With the kernel's accounting of BPF run time on (sysctl
// kernel.bpf_stats_enabled=1, as for bpftool prog show), the record says
// what each of the tracer's programs cost: the send and end programs ran
// at least once per request traced (they run for every FUSE mount's, and
// other packages' tests may mount some meanwhile).
func TestTraceRecordsProgramCostWhenTheKernelAccountsIt(t *testing.T) {
	// Not parallel: it turns on kernel.bpf_stats_enabled, the machine's.
	const sysctl = "/proc/sys/kernel/bpf_stats_enabled"
	was, err := os.ReadFile(sysctl)
	if err != nil {
		t.Skipf("no %s: %v", sysctl, err)
	}
	if err := os.WriteFile(sysctl, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.WriteFile(sysctl, was, 0o644) })
	const nFiles = 20
	mnt, _ := mountLab(t, nFiles, 1, 0)
	rec := filepath.Join(t.TempDir(), "rec.json")
	tr := e2e.StartTrace(t, "--mount", mnt, "--stages", "-o", rec)
	for i := 0; i < nFiles; i++ {
		if _, err := os.Stat(filepath.Join(mnt, "files", fmt.Sprintf("f%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	e2e.WaitIdle(t, e2e.ConnOf(t, mnt))
	tr.Stop(t)
	r := e2e.LoadRecord(t, rec)
	var reqs uint64
	for _, op := range r.Profile.Ops {
		reqs += op.Count
	}
	runs := map[string]uint64{}
	for _, p := range r.Programs {
		runs[p.Program] = p.Runs
		if p.Runs > 0 && p.Runtime <= 0 {
			t.Errorf("%s ran %d times in no time", p.Program, p.Runs)
		}
	}
	if reqs < nFiles || runs["fuse_send"] < reqs || runs["fuse_end"] < reqs {
		t.Errorf("%d requests; programs ran %v", reqs, runs)
	}
	if runs["stage:sys_exit_read"] == 0 {
		t.Errorf("no stage program accounted: %v", runs)
	}
}
