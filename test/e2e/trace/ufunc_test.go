package trace

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/labfs"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/test/e2e"
	"github.com/fusescope/fusescope/test/proctest"
)

const libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"

// ufuncRecord runs fusescope ufunc with args and returns its record's
// functions by name.
func ufuncRecord(t *testing.T, args ...string) map[string]profile.FunctionCalls {
	t.Helper()
	rec := filepath.Join(t.TempDir(), "ufunc.json")
	out, err := exec.Command(e2e.Fusescope, append([]string{"ufunc", "-o", rec}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("fusescope ufunc %v: %v\n%s", args, err, out)
	}
	r := e2e.LoadRecord(t, rec)
	if r.DaemonFunctions == nil {
		t.Fatalf("the record has no daemon_functions section:\n%s", out)
	}
	got := map[string]profile.FunctionCalls{}
	for _, f := range r.DaemonFunctions.Functions {
		got[f.Name] = f
	}
	return got
}

// The calls of libc's statx under ls -l of a directory of 50 files on the
// lab fs, counted by uprobes in ls alone (-p: the other tests' processes
// call statx too), are the statx system calls strace counts for the same
// command.
func TestUfuncAgainstStrace(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "strace", "ls")
	src, mnt, _ := e2e.MountLabFS(t, labfs.Config{})
	os.Mkdir(filepath.Join(src, "d"), 0o755)
	for i := range 50 {
		os.WriteFile(filepath.Join(src, "d", "f"+strconv.Itoa(i)), nil, 0o644)
	}
	dir := filepath.Join(mnt, "d")
	// ls, held until the probes are in it: a shell that execs it.
	ls := exec.Command("sh", "-c", "read go; exec ls -l "+dir)
	ls.Stdout = io.Discard
	release, err := ls.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Start(); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(t.TempDir(), "statx.json")
	u := proctest.Start(t, exec.Command(e2e.Fusescope, "ufunc", "-o", rec, "-p", strconv.Itoa(ls.Process.Pid), libc, "statx"), "Tracing", 30*time.Second)
	io.WriteString(release, "go\n")
	if err := ls.Wait(); err != nil {
		t.Fatalf("ls: %v", err)
	}
	if exited, err := u.Wait(30 * time.Second); !exited || err != nil {
		t.Fatalf("ufunc -p did not end with ls: %v, %v\n%s", exited, err, u.Output())
	}
	got := map[string]profile.FunctionCalls{}
	for _, f := range e2e.LoadRecord(t, rec).DaemonFunctions.Functions {
		got[f.Name] = f
	}
	out, err := exec.Command("strace", "-f", "-c", "-e", "trace=statx", "-o", "/dev/stdout", "ls", "-l", dir).Output()
	if err != nil {
		t.Fatalf("strace: %v", err)
	}
	m := regexp.MustCompile(`(?m)^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?statx$`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no statx line in strace -c's table:\n%s", out)
	}
	want, _ := strconv.ParseUint(string(m[1]), 10, 64)
	if got["statx"].Count != want || want < 50 {
		t.Errorf("ufunc counted %d calls of libc's statx, strace %d statx system calls (50 files and more)", got["statx"].Count, want)
	}
}

// A program whose functions sleep a known time: each function's calls
// counted exactly, and timed at no less than its sleep and less than twice
// it (a loaded machine oversleeps).
func TestUfuncLatencyKnownSleeps(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "cc")
	dir := t.TempDir()
	src := filepath.Join(dir, "sleeps.c")
	os.WriteFile(src, []byte(`#include <unistd.h>
__attribute__((noinline)) void sleep_2ms(void) { usleep(2000); }
__attribute__((noinline)) void sleep_10ms(void) { usleep(10000); }
int main(void) { for (int i = 0; i < 20; i++) sleep_2ms(); for (int i = 0; i < 5; i++) sleep_10ms(); return 0; }
`), 0o644)
	bin := filepath.Join(dir, "sleeps")
	e2e.Run(t, "cc", "-O1", "-o", bin, src)
	e2e.Timed(t, 3, func() (stretched []string) {
		got := ufuncRecord(t, bin, "sleep_*", "--latency", "--", bin)
		for name, c := range map[string]struct {
			calls uint64
			sleep time.Duration
		}{"sleep_2ms": {20, 2 * time.Millisecond}, "sleep_10ms": {5, 10 * time.Millisecond}} {
			f := got[name]
			if f.Count != c.calls || f.Latency == nil || f.Latency.Count != c.calls {
				t.Errorf("%s: %+v, want %d calls, each timed", name, f, c.calls)
				continue
			}
			lo, p50 := time.Duration(f.Latency.Min), time.Duration(f.Latency.Quantile(0.5))
			if lo < c.sleep {
				t.Errorf("%s: a call timed at %v, less than its sleep of %v", name, lo, c.sleep)
			}
			if p50 >= 2*c.sleep {
				stretched = append(stretched, e2e.Stretched("%s: p50 %v, twice its sleep of %v or more", name, p50, c.sleep))
			}
		}
		return stretched
	})
}

// A Go function called 10,000 times from 200 goroutines at once: every
// call counted and timed, and the program runs to its end unharmed (an
// entry probe and probes on its RET instructions leave its stack alone;
// a return probe would not); a function that sleeps 2 ms, whose goroutine
// parks and may wake on another thread, timed at no less than its sleep
// (calls are matched by goroutine, not by thread).
func TestUfuncGoProgram(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "goroutines")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/goroutines").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	e2e.Timed(t, 3, func() (stretched []string) {
		got := ufuncRecord(t, bin, "main.*", "--latency", "--", bin)
		if w := got["main.work"]; w.Count != 200*50 || w.Latency == nil || w.Latency.Count != 200*50 {
			t.Errorf("main.work: %+v, want %d calls, each timed", w, 200*50)
		}
		n := got["main.nap"]
		if n.Count != 20 || n.Latency == nil || n.Latency.Count != 20 {
			t.Fatalf("main.nap: %+v, want 20 calls, each timed", n)
		}
		lo, p50 := time.Duration(n.Latency.Min), time.Duration(n.Latency.Quantile(0.5))
		if lo < 2*time.Millisecond {
			t.Errorf("main.nap: a call timed at %v, less than its 2ms sleep: calls paired wrongly", lo)
		}
		if p50 >= 4*time.Millisecond {
			stretched = append(stretched, e2e.Stretched("main.nap: p50 %v, twice its 2ms sleep or more", p50))
		}
		return stretched
	})
}

// Bad input: one line each, naming the problem and what to give.
func TestUfuncBadInput(t *testing.T) {
	t.Parallel()
	notELF := filepath.Join(t.TempDir(), "script.sh")
	os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755)
	oneLineExit(t, "is not an ELF executable or library", "ufunc", notELF, "main")
	oneLineExit(t, "no such file", "ufunc", "/nonexistent/bin", "x")
	oneLineExit(t, `no function of `+libc+` matches "zzz_no_such_*"`, "ufunc", libc, "zzz_no_such_*")
	oneLineExit(t, "give the binary and a pattern", "ufunc", libc)
	oneLineExit(t, "--arg reads a USDT probe's argument", "ufunc", libc, "statx", "--arg", "1")
	oneLineExit(t, "--arg -1: give an argument's number", "ufunc", "--usdt", libc, "*", "--arg", "-1")
}

// A ufunc record renders again with show, as text and as JSON.
func TestShowUfuncRecord(t *testing.T) {
	t.Parallel()
	rec := filepath.Join(t.TempDir(), "u.json")
	if out, err := exec.Command(e2e.Fusescope, "ufunc", "-o", rec, libc, "getpid", "--", "true").CombinedOutput(); err != nil {
		t.Fatalf("ufunc: %v\n%s", err, out)
	}
	out, err := exec.Command(e2e.Fusescope, "show", rec).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "FUNC") {
		t.Errorf("show: %v\n%s", err, out)
	}
	js, err := exec.Command(e2e.Fusescope, "show", "--json", rec).Output()
	var r struct {
		DF *json.RawMessage `json:"daemon_functions"`
	}
	if err != nil || json.Unmarshal(js, &r) != nil || r.DF == nil {
		t.Errorf("show --json: %v\n%s", err, js)
	}
}

// libfuse's USDT probes (passthrough_hp, libfuse 3.18 built with
// -Denable-usdt): each request the daemon reads fires request_receive,
// each it processes request_process, each reply request_reply; counted
// with -p on the daemon, each equals the requests fusescope trace counted
// of the same workload (no FORGET among them, which the trace does not
// see), and --list names them with their arguments.
func TestUfuncUSDTAgainstTrace(t *testing.T) {
	t.Parallel()
	// Caches dropped meanwhile (other tests' cold runs) send the daemon
	// FORGETs, which libfuse receives and processes: counted here by the
	// trace's --stages, they must not come outside its window.
	e2e.KeepsCaches(t)
	hp := e2e.LibfuseExample(t, "passthrough_hp")
	lib := filepath.Join(filepath.Dir(hp), "..", "lib", "libfuse3.so.4")
	list, err := exec.Command(e2e.Fusescope, "ufunc", "--usdt", "--list", lib, "libfuse:*").CombinedOutput()
	if err != nil || !strings.Contains(string(list), "libfuse:request_process 4@") {
		t.Fatalf("ufunc --usdt --list: %v\n%s", err, list)
	}
	src, mnt := t.TempDir(), t.TempDir()
	for i := range 30 {
		os.WriteFile(filepath.Join(src, "f"+strconv.Itoa(i)), []byte("data\n"), 0o644)
	}
	e2e.MountDaemon(t, mnt, hp, "--nocache", src, mnt)
	conn := e2e.ConnOf(t, mnt)
	daemon := daemonOf(t, conn)
	rec := filepath.Join(t.TempDir(), "usdt.json")
	u := proctest.Start(t, exec.Command(e2e.Fusescope, "ufunc", "--usdt", lib, "libfuse:request_*", "-p", strconv.Itoa(daemon), "-o", rec),
		"Tracing", 30*time.Second)
	trRec := filepath.Join(t.TempDir(), "trace.json")
	work := "stat " + mnt + "/f* > /dev/null; cat " + mnt + "/f* > /dev/null"
	if out, err := exec.Command(e2e.Fusescope, "trace", "--stages", "--mount", mnt, "-o", trRec, "--", "sh", "-c", work).CombinedOutput(); err != nil {
		t.Fatalf("trace: %v\n%s", err, out)
	}
	e2e.WaitIdle(t, conn)
	if err := u.Interrupt(t, 30*time.Second); err != nil {
		t.Fatalf("ufunc: %v\n%s", err, u.Output())
	}
	tr := e2e.LoadRecord(t, trRec)
	var traced, forgets uint64
	for _, n := range e2e.Counts(tr, conn) {
		traced += n
	}
	if m := tr.Mount(conn); m != nil {
		forgets = m.Forgets // FORGET and BATCH_FORGET: read and processed, never replied to
	}
	fns := e2e.LoadRecord(t, rec).DaemonFunctions
	got := map[string]uint64{}
	for _, f := range fns.Functions {
		got[f.Name] = f.Count
	}
	for p, want := range map[string]uint64{"request_receive": traced + forgets, "request_process": traced + forgets, "request_reply": traced} {
		if n := got["usdt:libfuse:"+p]; n != want || traced == 0 {
			t.Errorf("libfuse:%s fired %d times; the trace counted %d requests and %d FORGETs", p, n, traced, forgets)
		}
	}
}

// daemonOf is the process that holds a connection's /dev/fuse.
func daemonOf(t *testing.T, conn uint32) int {
	t.Helper()
	hs, err := fuseconn.HoldersOf(conn)
	if err != nil || len(hs) == 0 {
		t.Fatalf("no daemon holds connection %d: %v", conn, err)
	}
	return hs[0].PID
}

// The lab fs's own timers against ufunc on its Go handler: LOOKUPs the
// daemon delays 2 ms, timed by the daemon (fs stats, from go-fuse's
// handing the request over to the reply) and by ufunc --latency from
// labRaw.Lookup's entry to its RET instructions: as many calls as
// LOOKUPs, and the same mean within 5%.
func TestUfuncAgainstLabFSTimers(t *testing.T) {
	t.Parallel()
	src, mnt := t.TempDir(), t.TempDir()
	for i := range 100 {
		os.WriteFile(filepath.Join(src, "f"+strconv.Itoa(i)), nil, 0o644)
	}
	if out, err := exec.Command(e2e.Fusescope, "fs", "mount", "--background", "--latency", "lookup=2ms", src, mnt).CombinedOutput(); err != nil {
		t.Fatalf("fs mount: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command(e2e.Fusescope, "fs", "umount", mnt).Run() })
	daemon := daemonOf(t, e2e.ConnOf(t, mnt))
	exe, err := os.Readlink("/proc/" + strconv.Itoa(daemon) + "/exe")
	if err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(t.TempDir(), "lookup.json")
	u := proctest.Start(t, exec.Command(e2e.Fusescope, "ufunc", exe, "*/labfs.(?labRaw).Lookup", "--latency", "-p", strconv.Itoa(daemon), "-o", rec),
		"Tracing", 30*time.Second)
	before := labLookups(t, mnt)
	// Each name stat-ed by its path, not listed first (a listing's
	// READDIRPLUS would answer the lookups).
	if out, err := exec.Command("sh", "-c", "for i in $(seq 0 99); do echo "+mnt+"/f$i; done | xargs stat > /dev/null").CombinedOutput(); err != nil {
		t.Fatalf("stat: %v\n%s", err, out)
	}
	after := labLookups(t, mnt)
	if err := u.Interrupt(t, 30*time.Second); err != nil {
		t.Fatalf("ufunc: %v\n%s", err, u.Output())
	}
	fns := e2e.LoadRecord(t, rec).DaemonFunctions.Functions
	if len(fns) != 1 || fns[0].Latency == nil {
		t.Fatalf("ufunc's functions: %+v, want labRaw.Lookup, timed", fns)
	}
	got := fns[0]
	n, sum := after.Count-before.Count, after.Sum-before.Sum
	if got.Count != n || n < 100 {
		t.Errorf("ufunc counted %d calls of labRaw.Lookup; the daemon served %d LOOKUPs (100 files or more)", got.Count, n)
	}
	daemonMean, ufuncMean := float64(sum)/float64(n), got.Latency.Mean()
	if r := ufuncMean / daemonMean; r < 0.95 || r > 1.05 {
		t.Errorf("labRaw.Lookup's mean %v by ufunc, %v by the daemon's timers: %.3f, want within 5%%", time.Duration(ufuncMean), time.Duration(daemonMean), r)
	}
}

// labLookups reads the lab daemon's own LOOKUP statistics (fs stats).
func labLookups(t *testing.T, mnt string) hist.Hist {
	t.Helper()
	out, err := exec.Command(e2e.Fusescope, "fs", "stats", "--json", mnt).Output()
	if err != nil {
		t.Fatalf("fs stats: %v", err)
	}
	r, err := profile.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range r.Profile.Ops {
		if o.Op == "LOOKUP" {
			return o.Latency
		}
	}
	return hist.Hist{}
}

// USDT arguments' values (--arg): passthrough_hp's libfuse counted per
// request_process opcode and per request_reply error, while fusescope
// trace counts the same workload's requests: each opcode's count equals
// the trace's, and the replies with -ENOTEMPTY equal the RMDIRs the trace
// saw fail with ENOTEMPTY (a directory with a file in it, removed 20
// times); --arg past a probe's arguments is refused in one line.
func TestUfuncUSDTArgs(t *testing.T) {
	t.Parallel()
	e2e.KeepsCaches(t) // no FORGET from another test's cache drop
	hp := e2e.LibfuseExample(t, "passthrough_hp")
	lib := filepath.Join(filepath.Dir(hp), "..", "lib", "libfuse3.so.4")
	oneLineExit(t, "--arg 3: libfuse:request_process has 2 arguments", "ufunc", "--usdt", lib, "libfuse:request_process", "--arg", "3")
	src, mnt := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(src, "full"), 0o755)
	os.WriteFile(filepath.Join(src, "full", "f"), nil, 0o644)
	for i := range 30 {
		os.WriteFile(filepath.Join(src, "f"+strconv.Itoa(i)), []byte("data\n"), 0o644)
	}
	e2e.MountDaemon(t, mnt, hp, "--nocache", src, mnt)
	conn := e2e.ConnOf(t, mnt)
	daemon := strconv.Itoa(daemonOf(t, conn))
	ops, errs := filepath.Join(t.TempDir(), "ops.json"), filepath.Join(t.TempDir(), "errs.json")
	u1 := proctest.Start(t, exec.Command(e2e.Fusescope, "ufunc", "--usdt", lib, "libfuse:request_process", "--arg", "1", "-p", daemon, "-o", ops), "Tracing", 30*time.Second)
	u2 := proctest.Start(t, exec.Command(e2e.Fusescope, "ufunc", "--usdt", lib, "libfuse:request_reply", "--arg", "3", "-p", daemon, "-o", errs), "Tracing", 30*time.Second)
	trRec := filepath.Join(t.TempDir(), "trace.json")
	work := "stat " + mnt + "/f* > /dev/null; cat " + mnt + "/f* > /dev/null; for i in $(seq 20); do rmdir " + mnt + "/full 2>/dev/null; done; true"
	if out, err := exec.Command(e2e.Fusescope, "trace", "--mount", mnt, "-o", trRec, "--", "sh", "-c", work).CombinedOutput(); err != nil {
		t.Fatalf("trace: %v\n%s", err, out)
	}
	e2e.WaitIdle(t, conn)
	for _, u := range []*proctest.Process{u1, u2} {
		if err := u.Interrupt(t, 30*time.Second); err != nil {
			t.Fatalf("ufunc: %v\n%s", err, u.Output())
		}
	}
	tr := e2e.LoadRecord(t, trRec)
	counts := e2e.Counts(tr, conn)
	values := func(rec string) map[int64]uint64 {
		out := map[int64]uint64{}
		for _, f := range e2e.LoadRecord(t, rec).DaemonFunctions.Functions {
			for _, v := range f.Values {
				out[v.Value] = v.Count
			}
		}
		return out
	}
	byOpcode := map[string]uint64{}
	for v, n := range values(ops) {
		byOpcode[fuseproto.Opcode(v).String()] = n
	}
	for op, n := range counts {
		if byOpcode[op] != n {
			t.Errorf("%s: request_process fired %d times with its opcode; the trace counted %d", op, byOpcode[op], n)
		}
	}
	t.Logf("opcodes by request_process: %v; by the trace: %v", byOpcode, counts)
	if len(byOpcode) != len(counts) || counts["RMDIR"] != 20 {
		t.Errorf("opcodes by request_process %v; by the trace %v (20 RMDIRs)", byOpcode, counts)
	}
	var notEmpty uint64
	for _, o := range tr.Profile.Ops {
		if o.Conn == conn && o.Op == "RMDIR" {
			notEmpty = o.Errnos["ENOTEMPTY"]
		}
	}
	if got := values(errs)[-int64(syscall.ENOTEMPTY)]; got != notEmpty || notEmpty != 20 {
		t.Errorf("request_reply's error was -ENOTEMPTY %d times; the trace saw %d RMDIRs fail with it (20)", got, notEmpty)
	}
}
