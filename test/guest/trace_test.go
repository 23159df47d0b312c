package guest

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The build the tests run prints the version it was built with: in a
// guest, the release binary's.
func TestVersion(t *testing.T) {
	machine(t)
	r := runFusescope("--version")
	if want := "fusescope version " + wantVersion; r.exit != 0 || strings.TrimSpace(r.stdout) != want {
		t.Fatalf("want %q\n%v", want, r)
	}
	t.Logf("kernel %s (row %s): %s", release, rowKey, strings.TrimSpace(r.stdout))
}

// Where fuse is a module, fusescope asked before it was inserted says so
// in one line.
func TestNoFuseRefused(t *testing.T) {
	machine(t)
	if noFuse == nil {
		t.Skip("fuse was loaded before the tests (built in, or already inserted)")
	}
	if classify(*noFuse, "fuse") != Refused || !strings.Contains(noFuse.stderr, "modprobe fuse") {
		t.Fatalf("want one line asking to load fuse\n%v", *noFuse)
	}
	t.Logf("before fuse.ko: %s", strings.TrimSpace(noFuse.stderr))
}

// The table's facts about each kernel's tracepoints, from tracefs alone:
// whether fuse_request_send exists, whether its records carry the
// request's id, and whether fuse_request_sent exists.
func TestKernelFacts(t *testing.T) {
	machine(t)
	l := mountLab(t, "--preset", "nocache")
	files(t, filepath.Join(l.src, "files"), 3)
	records := kernelRecords(t, l, "stat:"+filepath.Join(l.mnt, "files")+":3")
	var send, sent, end, zero int
	sendLine := regexp.MustCompile(fmt.Sprintf(`fuse_request_send: connection %d req (\d+) `, l.conn))
	for _, line := range records {
		if m := sendLine.FindStringSubmatch(line); m != nil {
			send++
			if m[1] == "0" {
				zero++
			}
		}
		if strings.Contains(line, fmt.Sprintf("fuse_request_sent: connection %d ", l.conn)) {
			sent++
		}
		if strings.Contains(line, fmt.Sprintf("fuse_request_end: connection %d req ", l.conn)) {
			end++
		}
	}
	t.Logf("kernel %s: %d send records (%d with req 0), %d sent, %d end", release, send, zero, sent, end)
	var have Tracepoints
	switch {
	case records == nil:
		have = NoTracepoints
	case send == 0 || end != send:
		t.Fatalf("%d send records and %d end records for a workload of 3 stats:\n%s", send, end, strings.Join(records, "\n"))
	case zero == send:
		have = ZeroIDs
	case zero == 0:
		have = IDs
	default:
		t.Fatalf("%d of %d send records carry req 0", zero, send)
	}
	if have != row.Tracepoints {
		t.Errorf("kernel %s: fuse tracepoints %q, its row (%s) says %q", release, have, rowKey, row.Tracepoints)
	}
	if hasSent := tracepointExists("fuse_request_sent"); hasSent != row.Sent {
		t.Errorf("kernel %s: fuse_request_sent exists: %v, its row (%s) says %v", release, hasSent, rowKey, row.Sent)
	}
	if hasSent := tracepointExists("fuse_request_sent"); hasSent && sent != send {
		t.Errorf("%d sent records for %d sends (the daemon took every request)", sent, send)
	}
}

// stat of N distinct files with the kernel's caches off costs 2N
// LOOKUPs (the directory and the file, entry timeout 0), and a file of P
// pages read 4 KiB a call with direct_io P+1 READs (the last finds the
// end); every opcode's count must equal what the lab daemon served.
func TestTraceCounts(t *testing.T) {
	machine(t)
	l, steps := countsWorkload(t)
	before := daemonCounts(t, l)
	rec := filepath.Join(t.TempDir(), "rec.json")
	r := runFusescopeEnv(workload(steps...), "trace", "--mount", l.mnt, "--no-hist", "-o", rec, "--", self(t))
	o := check(t, Trace, "", r)
	if o == nil {
		return
	}
	defer o.done()
	got := readRecord(t, rec).counts(l.conn)
	t.Logf("kernel %s: traced %v", release, got)
	knownCounts(o, got)
	if err := sameCounts(got, sub(daemonCounts(t, l), before)); err != nil {
		o.Errorf("traced against the daemon's own counts: %v", err)
	}
}

const countFiles, countPages = 20, 8

// countsWorkload mounts the lab file system with its caches off and gives
// the workload whose requests knownCounts knows.
func countsWorkload(t *testing.T) (*lab, []string) {
	l := mountLab(t, "--preset", "nocache")
	files(t, filepath.Join(l.src, "files"), countFiles)
	pages(t, filepath.Join(l.src, "big.bin"), countPages)
	return l, []string{"stat:" + filepath.Join(l.mnt, "files") + fmt.Sprintf(":%d", countFiles), "read:" + filepath.Join(l.mnt, "big.bin"), l.idle()}
}

func knownCounts(o reporter, got map[string]uint64) {
	want := map[string]uint64{"LOOKUP": 2*countFiles + 1, "READ": countPages + 1, "OPEN": 1, "FLUSH": 1, "RELEASE": 1}
	for op, n := range want {
		if got[op] != n {
			o.Errorf("%s = %d, want %d", op, got[op], n)
		}
	}
	// Each stat asks for the file's attributes, by GETATTR or, where
	// the kernel has it, STATX.
	if n := got["GETATTR"] + got["STATX"]; n < countFiles {
		o.Errorf("GETATTR + STATX = %d, want at least %d (one per stat)", n, countFiles)
	}
}

// The same workload through each way of attaching: where a kernel has more
// than one, their counts agree with each other (those its row does not
// know to measure wrong), with the workload and with the daemon.
func TestMechanismsAgree(t *testing.T) {
	machine(t)
	l, steps := countsWorkload(t)
	byMechanism := map[Feature]map[string]uint64{}
	var working []Feature
	for _, f := range Mechanisms {
		before := daemonCounts(t, l)
		rec := filepath.Join(t.TempDir(), string(f)+".json")
		r := runFusescopeEnv(workload(steps...), "trace", "--attach", string(f), "--mount", l.mnt, "--no-hist", "-o", rec, "--", self(t))
		t.Run(string(f), func(t *testing.T) {
			o := check(t, f, "--attach", r)
			if o == nil {
				return
			}
			defer o.done()
			got := readRecord(t, rec).counts(l.conn)
			knownCounts(o, got)
			if err := sameCounts(got, sub(daemonCounts(t, l), before)); err != nil {
				o.Errorf("traced against the daemon's own counts: %v", err)
			}
			if !o.knownWrong() {
				byMechanism[f] = got
				working = append(working, f)
			}
		})
	}
	if len(working) < 2 {
		t.Logf("kernel %s: %d way of attaching works (%v), nothing to compare", release, len(working), working)
		return
	}
	for _, f := range working[1:] {
		if err := sameCounts(byMechanism[working[0]], byMechanism[f]); err != nil {
			t.Errorf("%s against %s: %v", working[0], f, err)
		}
	}
	t.Logf("kernel %s: %v agree: %v", release, working, byMechanism[working[0]])
}

// injected is the lab daemon's GETATTR delay the latency oracles use.
const injected = 5 * time.Millisecond

// within is how far above the injected delay a p50 may be: a few per cent
// here; under qemu's emulation each round trip to the daemon adds 0.3 to
// 1 ms, with the host's load, so that a guest's p50 is held to the kernel's
// own records instead, and to this bound only as a sanity check.
func within() time.Duration {
	if inGuest {
		return injected * 3 / 2
	}
	return injected * 105 / 100
}

// subBucket is the precision of a quantile from fusescope's histograms: the
// exact value's sub-bucket, 1/16 of its power of two (docs/record.md).
const subBucket = 0.0625

// latencyWorkload stats files on a lab mount whose GETATTR (and STATX)
// take the injected delay.
func latencyWorkload(t *testing.T) (*lab, []string) {
	l := mountLab(t, "--preset", "nocache", "--latency", "getattr="+injected.String())
	files(t, filepath.Join(l.src, "files"), countFiles)
	return l, []string{"stat:" + filepath.Join(l.mnt, "files") + fmt.Sprintf(":%d", countFiles)}
}

// attrOp is the row of the opcode that carried the workload's stats.
func attrOp(t *testing.T, rows []map[string]string) map[string]string {
	t.Helper()
	var best map[string]string
	var most int
	for _, row := range rows {
		if n, _ := strconv.Atoi(row["count"]); (row["op"] == "GETATTR" || row["op"] == "STATX") && n > most {
			best, most = row, n
		}
	}
	if best == nil {
		t.Fatalf("no GETATTR or STATX row in %v", rows)
	}
	return best
}

// --latency getattr=5ms: no request is faster than the injected delay,
// the trace's p50 is that delay and a little more, and it is the p50 of
// the kernel's own records of the same requests (ftrace, where the kernel
// has the tracepoints) to within fusescope's sub-bucket.
func TestInjectedLatency(t *testing.T) {
	machine(t)
	l, steps := latencyWorkload(t)
	var r result
	trace := func() { r = runFusescopeEnv(workload(steps...), "trace", "--mount", l.mnt, "--csv", "--", self(t)) }
	records := recordKernel(t, l, trace)
	if records == nil {
		trace()
	}
	o := check(t, Latency, "", r)
	if o == nil {
		return
	}
	defer o.done()
	op := attrOp(t, csvRows(t, r.stdout))
	p50, lo := csvNs(t, op, "p50_ns"), csvNs(t, op, "min_ns")
	t.Logf("kernel %s: %s count %s min %v p50 %v (injected %v)", release, op["op"], op["count"], lo, p50, injected)
	if lo < injected {
		o.Errorf("%s min %v is below the injected %v", op["op"], lo, injected)
	}
	if p50 < injected || p50 > within() {
		o.Errorf("%s p50 %v, want %v to %v", op["op"], p50, injected, within())
	}
	exact := kernelLatencies(records, l.conn, opcodes[op["op"]])
	if len(exact) == 0 {
		t.Logf("kernel %s: no fuse records to pair: the injected delay is the only oracle", release)
		return
	}
	median := (exact[(len(exact)-1)/2] + exact[len(exact)/2]) / 2
	t.Logf("kernel %s: the kernel's records: %d %s, min %v, p50 %v; fusescope's p50 %+.2f%% off", release, len(exact), op["op"], exact[0], median, 100*(float64(p50)/float64(median)-1))
	if strconv.Itoa(len(exact)) != op["count"] {
		o.Errorf("%s: the kernel recorded %d, fusescope counted %s", op["op"], len(exact), op["count"])
	}
	if off := math.Abs(float64(p50)/float64(median) - 1); off > subBucket {
		o.Errorf("%s p50 %v, the kernel's records' %v: %.1f%% off, more than a sub-bucket (%.2f%%)", op["op"], p50, median, 100*off, 100*subBucket)
	}
}

// opcodes of the requests attrOp picks from.
var opcodes = map[string]int{"GETATTR": 3, "STATX": 52}

// --stages: every request split, queue + daemon + reply = total to the
// nanosecond, and the daemon stage holds the injected delay: at least it,
// at most the total, and a few per cent over it here.
func TestStages(t *testing.T) {
	machine(t)
	l, steps := latencyWorkload(t)
	rec := filepath.Join(t.TempDir(), "rec.json")
	r := runFusescopeEnv(workload(steps...), "trace", "--stages", "--mount", l.mnt, "--csv", "-o", rec, "--", self(t))
	o := check(t, Stages, "--stages", r)
	if o == nil {
		return
	}
	defer o.done()
	op := attrOp(t, csvRows(t, r.stdout))
	daemon, total := csvNs(t, op, "daemon_p50_ns"), csvNs(t, op, "p50_ns")
	t.Logf("kernel %s: %s p50 %v; stages' p50s: queue %v, daemon %v, reply %v", release, op["op"], total, csvNs(t, op, "queue_p50_ns"), daemon, csvNs(t, op, "reply_p50_ns"))
	if daemon < injected || daemon > total || daemon > within() {
		o.Errorf("%s daemon stage p50 %v, want %v to %v and no more than the total's %v", op["op"], daemon, injected, within(), total)
	}
	for _, op := range readRecord(t, rec).Profile.Ops {
		if op.Conn != l.conn {
			continue
		}
		var sum uint64
		for _, s := range op.Stages {
			if s.Latency.Count != op.Count {
				o.Errorf("%s: stage %s counts %d of %d requests", op.Op, s.Stage, s.Latency.Count, op.Count)
			}
			sum += s.Latency.Sum
		}
		if len(op.Stages) != 3 || sum != op.Latency.Sum {
			o.Errorf("%s: %d stages summing to %d ns, total %d ns", op.Op, len(op.Stages), sum, op.Latency.Sum)
		}
	}
}

// --files names the files read by their path in the mount, with their
// READs (--op READ: the other requests about a file vary with the kernel),
// each of which the daemon delays: a file's time is at least its READs'
// delays, and here, where nothing is emulated, the file with the most
// READs has the most time (10 ms a READ: at 2 ms, under make test's load,
// /d/a's 2 READs once took 12.6 ms and /d/b's 5 took 10.9 ms).
func TestFiles(t *testing.T) {
	machine(t)
	const delay = 10 * time.Millisecond
	l := mountLab(t, "--preset", "nocache", "--latency", "read="+delay.String())
	sizes := map[string]int{"/d/a": 1, "/d/b": 4, "/d/c": 12}
	var steps []string
	for _, name := range []string{"/d/a", "/d/b", "/d/c"} {
		pages(t, filepath.Join(l.src, name), sizes[name])
		steps = append(steps, "read:"+filepath.Join(l.mnt, name))
	}
	steps = append(steps, l.idle())
	rec := filepath.Join(t.TempDir(), "rec.json")
	r := runFusescopeEnv(workload(steps...), "trace", "--files", "20", "--op", "READ", "--mount", l.mnt, "--no-hist", "-o", rec, "--", self(t))
	o := check(t, Files, "--files", r)
	if o == nil {
		return
	}
	defer o.done()
	var order, seen []string
	for _, f := range readRecord(t, rec).Files {
		n, read := sizes[f.Path]
		if !read {
			continue // the directories the lookups were about
		}
		order = append(order, fmt.Sprintf("%s %d READs %v", f.Path, f.Count, time.Duration(f.TotalNs).Round(time.Microsecond)))
		seen = append(seen, f.Path)
		// A READ a page, and one that finds the end.
		if want := uint64(n + 1); f.Count != want {
			o.Errorf("%s: %d requests, want %d", f.Path, f.Count, want)
		}
		if floor := time.Duration(n+1) * delay; time.Duration(f.TotalNs) < floor {
			o.Errorf("%s: %v of FUSE time, less than its %d READs' delays, %v", f.Path, time.Duration(f.TotalNs), n+1, floor)
		}
	}
	t.Logf("kernel %s: files by time: %s", release, strings.Join(order, ", "))
	want := []string{"/d/c", "/d/b", "/d/a"}
	if inGuest {
		slices.Sort(seen)
		slices.Reverse(seen)
	}
	if !slices.Equal(seen, want) {
		o.Errorf("files by time %v, want %v", seen, want)
	}
}

// --calls: the workload's stats and reads, each call counted once, each
// sending requests (the caches are off).
func TestCalls(t *testing.T) {
	machine(t)
	l, steps := countsWorkload(t)
	rec := filepath.Join(t.TempDir(), "rec.json")
	r := runFusescopeEnv(workload(steps...), "trace", "--calls", "--mount", l.mnt, "--no-hist", "-o", rec, "--", self(t))
	o := check(t, Calls, "--calls", r)
	if o == nil {
		return
	}
	defer o.done()
	got := map[string]string{}
	for _, c := range readRecord(t, rec).Calls {
		got[c.Syscall] = fmt.Sprintf("%d calls, %d errors, %d with requests", c.Count, c.Errors, c.WithRequests)
	}
	t.Logf("kernel %s: %v", release, got)
	want := map[string]string{
		"newfstatat": fmt.Sprintf("%d calls, 0 errors, %d with requests", countFiles, countFiles),
		"read":       fmt.Sprintf("%d calls, 0 errors, %d with requests", countPages+1, countPages+1),
		"openat":     "1 calls, 0 errors, 1 with requests",
	}
	for call, w := range want {
		if got[call] != w {
			o.Errorf("%s: %s, want %s", call, got[call], w)
		}
	}
}

// --page-cache: a file of P pages read twice with keep_cache, in one run:
// the first read adds its P pages, the second finds them all (2P pages
// read, P added). The file's pages are dropped first (fadvise DONTNEED).
// On the host other packages' tests drop every cache meanwhile (bench's
// cold runs do, many times a second), so a run in which the pages were
// evicted between the two reads (more than P added) is made again, up to
// three times.
func TestPageCache(t *testing.T) {
	machine(t)
	const p = 16
	l := mountLab(t, "--keep-cache")
	pages(t, filepath.Join(l.src, "file"), p)
	file := filepath.Join(l.mnt, "file")
	steps := []string{"read:" + file, "read:" + file, l.idle()}
	for try := 1; ; try++ {
		dropPages(t, file)
		rec := filepath.Join(t.TempDir(), "rec.json")
		r := runFusescopeEnv(workload(steps...), "trace", "--page-cache", "--mount", l.mnt, "--no-hist", "-o", rec, "--", self(t))
		o := check(t, PageCache, "--page-cache", r)
		if o == nil {
			return
		}
		defer o.done()
		pc := readRecord(t, rec).PageCache
		if len(pc) != 1 {
			o.Fatalf("page_cache %+v, want one mount", pc)
		}
		t.Logf("kernel %s: try %d: %+v", release, try, pc[0])
		if pc[0].ReadPages == 2*p && pc[0].Added == p {
			return
		}
		if try == 3 || pc[0].ReadPages != 2*p || pc[0].Added < p {
			o.Errorf("%d pages read, %d added; want %d read, %d added (the second read all from the cache)", pc[0].ReadPages, pc[0].Added, 2*p, p)
			return
		}
		t.Logf("try %d: the pages were evicted between the two reads; once more", try)
	}
}

// dropPages drops a file's pages from the page cache.
func dropPages(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// --hung: a STATFS the daemon holds for 2 s is listed at the first
// interval, while it is in flight.
func TestHung(t *testing.T) {
	machine(t)
	const hold = 2 * time.Second
	l := mountLab(t, "--preset", "nocache", "--latency", "statfs="+hold.String())
	r := runFusescopeEnv(workload("statfs:"+l.mnt), "trace", "--hung", "300ms", "--mount", l.mnt, "--json", "1", "--", self(t))
	o := check(t, Hung, "--hung", r)
	if o == nil {
		return
	}
	defer o.done()
	found := false
	for _, rec := range jsonLines(t, r.stdout) {
		for _, h := range rec.Hung {
			t.Logf("kernel %s: hung %+v", release, h)
			if h.Op == "STATFS" && h.MountPoint == l.mnt && h.AgeNs >= uint64(300*time.Millisecond) && h.AgeNs < uint64(hold) {
				found = true
			}
		}
	}
	if !found {
		o.Errorf("no STATFS in flight 300ms to %v listed\n%v", hold, r)
	}
}

// kernelRecords runs steps with the fuse tracepoints enabled in a tracefs
// instance of its own and returns their records; nil where the kernel has
// no fuse tracepoints.
func kernelRecords(t *testing.T, l *lab, steps ...string) []string {
	t.Helper()
	return recordKernel(t, l, func() {
		if err := runWorkload(append(steps, l.idle())); err != nil {
			t.Fatal(err)
		}
	})
}

// recordKernel runs do with the fuse tracepoints enabled in a tracefs
// instance of its own (its own buffer: other tracers go on undisturbed)
// and returns their records; nil, without running do, where the kernel
// has no fuse tracepoints.
func recordKernel(t *testing.T, l *lab, do func()) []string {
	t.Helper()
	tracefs := tracefsRoot(t)
	if _, err := os.Stat(filepath.Join(tracefs, "events/fuse/fuse_request_send")); err != nil {
		return nil
	}
	inst := filepath.Join(tracefs, "instances", fmt.Sprintf("fusescope-guest-%d", os.Getpid()))
	if err := os.Mkdir(inst, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(inst)
	os.WriteFile(filepath.Join(inst, "buffer_size_kb"), []byte("1024"), 0)
	// What the mount sent before (its first requests) ends first.
	if err := runWorkload([]string{l.idle()}); err != nil {
		t.Fatal(err)
	}
	enable := filepath.Join(inst, "events/fuse/enable")
	if err := os.WriteFile(enable, []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	do()
	os.WriteFile(enable, []byte("0"), 0)
	b, err := os.ReadFile(filepath.Join(inst, "trace"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

// recordLine is a fuse_request_send or _end record: its timestamp (us),
// connection, request id and, at send, opcode.
var recordLine = regexp.MustCompile(`\s(\d+)\.(\d{6}): fuse_request_(send|end): connection (\d+) req (\d+)(?: opcode (\d+))?`)

// kernelLatencies is each request's time from send to end by the kernel's
// own records (ftrace's clock, to the microsecond), for one opcode on one
// connection. Where sends record req 0 (6.12 to 6.17), a send is paired
// with the next end, which a workload of one thread making one request at
// a time allows; nil if two sends come before an end.
func kernelLatencies(records []string, conn uint32, opcode int) []time.Duration {
	type send struct {
		at     time.Duration
		opcode string
	}
	byID := map[string]send{}
	var pending *send // a send of req 0 not yet ended
	var out []time.Duration
	end := func(s send, at time.Duration) {
		if s.opcode == strconv.Itoa(opcode) {
			out = append(out, at-s.at)
		}
	}
	for _, line := range records {
		m := recordLine.FindStringSubmatch(line)
		if m == nil || m[4] != strconv.Itoa(int(conn)) {
			continue
		}
		sec, _ := strconv.Atoi(m[1])
		usec, _ := strconv.Atoi(m[2])
		at := time.Duration(sec)*time.Second + time.Duration(usec)*time.Microsecond
		id := m[5]
		switch {
		case m[3] == "send" && id == "0":
			if pending != nil {
				return nil
			}
			pending = &send{at, m[6]}
		case m[3] == "send":
			byID[id] = send{at, m[6]}
		case byID[id] != send{}:
			end(byID[id], at)
			delete(byID, id)
		case pending != nil:
			end(*pending, at)
			pending = nil
		}
	}
	slices.Sort(out)
	return out
}

// tracefsRoot finds tracefs, mounting it where no one has.
func tracefsRoot(t *testing.T) string {
	t.Helper()
	for _, dir := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		if _, err := os.Stat(filepath.Join(dir, "events")); err == nil {
			return dir
		}
	}
	if err := mountTracefs("/sys/kernel/tracing"); err != nil {
		t.Fatalf("tracefs: %v", err)
	}
	return "/sys/kernel/tracing"
}

func mountTracefs(dir string) error {
	return unix.Mount("tracefs", dir, "tracefs", 0, "")
}

func tracepointExists(name string) bool {
	for _, dir := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		if _, err := os.Stat(filepath.Join(dir, "events/fuse", name)); err == nil {
			return true
		}
	}
	return false
}
