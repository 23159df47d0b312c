package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fusescope/fusescope/test/e2e"
)

// Bad input gets one line that names the problem and a non-zero exit.
func TestTraceBadInput(t *testing.T) {
	t.Parallel()
	plain := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"trace", "--mount", plain}, "not FUSE"},
		{[]string{"trace", "--mount", "/nonexistent/x"}, "no such file"},
		{[]string{"trace", "--op", "LOOKUPP"}, "unknown FUSE opcode"},
		{[]string{"trace", "0"}, "give a number of seconds from 0.01"},
		{[]string{"trace", "NaN"}, "give a number of seconds from 0.01"},
		{[]string{"trace", "1e12"}, "give a number of seconds from 0.01"}, // overflowed time.Duration: no interval at all
		{[]string{"trace", "1", "x"}, "positive number of reports"},
		{[]string{"trace", "--conn", "999999"}, "does not exist"},
		{[]string{"trace", "-p", "999999999"}, "no such process"},
		{[]string{"trace", "--comm", "a-very-long-command-name"}, "15-character"},
		{[]string{"trace", "--comm", ""}, "--comm was given an empty value: give it one, or leave it out"},
		{[]string{"trace", "--op", ""}, "--op was given an empty value"},
		{[]string{"trace", "--op", "LOOKUP,"}, "--op was given an empty value"},
		{[]string{"trace", "--conn", "abc"}, `--conn "abc": give a whole number of 0 or more, like --conn 12`},
		{[]string{"trace", "-p", "abc"}, `--pid "abc": give a whole number, like --pid 12`},
		{[]string{"trace", "--slower", "10"}, `--slower "10": give a duration with its unit, like --slower 10ms`},
		{[]string{"trace", "--bogus"}, "unknown flag"},
		{[]string{"trace", "-m", "--ns"}, "-m and --ns cannot be used together: give one of -m, -u, --ns"},
		{[]string{"trace", "--json", "--csv"}, "give one of --json, --csv"},
		{[]string{"trace", "--slower", "0"}, "--slower 0s: give a positive duration"},
		{[]string{"trace", "--slower", "-5ms"}, "--slower -5ms: give a positive duration"},
		{[]string{"trace", "--calls"}, "--calls counts one application's calls: name it with -p PID, --comm NAME or -- CMD"},
		{[]string{"trace", "--files", "5", "--attach", "tracepoint"}, "--files needs the raw tracepoints with BTF"},
		{[]string{"trace", "--calls", "--comm", "x", "--attach", "tracepoint"}, "--calls needs the raw tracepoints with BTF"},
		{[]string{"trace", "--files", "-1"}, "--files -1: give how many files to list"},
		{[]string{"trace", "--hung", "-1s"}, "--hung -1s: give a positive duration"},
		{[]string{"trace", "--reap-age", "-1s"}, "--reap-age -1s: give a positive duration"},
		{[]string{"trace", "1", "-5"}, "-5: an interval or a count is a positive number: usage: fusescope trace"},
		{[]string{"fs", "umount", "/nonexistent"}, "/nonexistent does not exist: give the mount point of a lab file system"},
		{[]string{"fs", "umount", plain}, "is not a mount point: nothing to unmount"},
		{[]string{"fs", "stats", plain, "-1"}, "-1: an interval or a count is a positive number: usage: fusescope fs stats"},
		{[]string{"trace", "--slower", "10ms", "--counts"}, "leave out --counts"},
		{[]string{"trace", "--slower", "soon"}, `--slower "soon": give a duration with its unit`},
		{[]string{"trace", "1", "2", "3"}, "usage: fusescope trace [flags] [interval [count]]"},
		{[]string{"trace", "1", "2", "3", "--", "ls"}, "accepts at most 2 arg(s), received 3"},
		{[]string{"trace", "--"}, "nothing after --: give the command to trace"},
		{[]string{"trace", "-p", "1", "--", "ls"}, "-p and -- CMD both say what to trace: give one"},
		{[]string{"trace", "--", "/nonexistent/cmd"}, "/nonexistent/cmd: command not found"},
		{[]string{"trace", "--", plain}, "is a directory: give a program"},
		{[]string{"show"}, "show takes one record file, or - for standard input (got 0): usage: fusescope show RECORD.json | -"},
		{[]string{"report"}, "give the records to report on: usage: fusescope report RECORD.json..."},
		{[]string{"diff", "a.json"}, "diff takes two records, A and B (got 1): usage: fusescope diff A.json B.json"},
		{[]string{"trace", "-o", filepath.Join(plain, "missing", "run.json"), "60"}, "writable directory"}, // at once, not after 60 s
		{[]string{"show", filepath.Join(plain, "missing.json")}, "no such file"},
		{[]string{"show", "/etc/hostname"}, "/etc/hostname is not JSON: give a record"},
		{[]string{"show", "--csv", "--table", "files", "../../../internal/report/testdata/record.json.golden"}, `--table "files": ../../../internal/report/testdata/record.json.golden is a record: give opcodes, slow (its trace --slower requests), findings (fusescope doctor's), functions or daemon-stage`},
		{[]string{"show", "--table", "slow", "../../../internal/report/testdata/record.json.golden"}, "--table chooses the table --csv prints: add --csv"},
		{[]string{"show", "--csv", "--counts", "--table", "slow", "../../../internal/report/testdata/record.json.golden"}, "leave out --counts"},
	}
	for _, c := range cases {
		out, err := exec.Command(e2e.Fusescope, c.args...).CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() == 0 {
			t.Errorf("%v: want a non-zero exit, got %v", c.args, err)
		}
		text := strings.TrimSpace(string(out))
		if strings.Count(text, "\n") != 0 || !strings.Contains(text, c.want) || !strings.HasPrefix(text, "fusescope: ") || strings.Count(text, "usage:") > 1 {
			t.Errorf("%v: want one line containing %q, got:\n%s", c.args, c.want, out)
		}
	}
}

// A saved record renders exactly as the live trace printed it.
func TestShowMatchesLive(t *testing.T) {
	t.Parallel()
	_, mnt := e2e.MountBindfs(t, 5)
	rec := filepath.Join(t.TempDir(), "rec.json")
	for _, flags := range [][]string{{}, {"-m", "--no-hist"}, {"--csv"}, {"--counts"}, {"--json"}} {
		tr := e2e.StartTrace(t, append([]string{"--mount", mnt, "-o", rec}, flags...)...)
		e2e.Run(t, "ls", "-l", mnt)
		live := tr.Stop(t)
		shown, err := exec.Command(e2e.Fusescope, append([]string{"show", rec}, flags...)...).Output()
		if err != nil {
			t.Fatal(err)
		}
		if live != string(shown) {
			t.Errorf("%v: show differs from live:\n--- live\n%s\n--- show\n%s", flags, live, shown)
		}
		if !strings.Contains(live, "LOOKUP") && !strings.Contains(live, "READDIR") {
			t.Errorf("%v: no requests in output:\n%s", flags, live)
		}
	}
}

// An interval trace's --json lines render as its reports did: show --json
// gives the lines back, --csv writes one header and every interval's rows,
// and text (with -T) is each interval's report in turn, a blank line
// between them (as bcc's tools print intervals).
func TestShowIntervalRecords(t *testing.T) {
	t.Parallel()
	_, mnt := e2e.MountBindfs(t, 5)
	tr := e2e.StartTrace(t, "--mount", mnt, "--json", "0.3", "3")
	for range 6 {
		e2e.Run(t, "ls", "-l", mnt)
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case err := <-tr.Done:
		if err != nil {
			t.Fatalf("trace: %v\n%s", err, tr.Stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("trace 0.3 3 did not end by itself")
	}
	lines := strings.SplitAfter(strings.TrimSuffix(tr.Stdout.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d JSON lines, want 3:\n%s", len(lines), tr.Stdout.String())
	}
	dir := t.TempDir()
	all := filepath.Join(dir, "run.jsonl")
	os.WriteFile(all, tr.Stdout.Bytes(), 0o644)
	if got := e2e.MustRead(t, e2e.Fusescope, "show", "--json", all); string(got) != tr.Stdout.String() {
		t.Errorf("show --json changed the lines:\n%s\nwant\n%s", got, tr.Stdout.String())
	}
	var wantText, wantCSV strings.Builder
	for i, line := range lines {
		one := filepath.Join(dir, fmt.Sprintf("%d.json", i))
		os.WriteFile(one, []byte(line), 0o644)
		if i > 0 {
			wantText.WriteString("\n")
		}
		wantText.Write(e2e.MustRead(t, e2e.Fusescope, "show", "-T", "--no-hist", one))
		csv := string(e2e.MustRead(t, e2e.Fusescope, "show", "--csv", one))
		if i > 0 {
			_, csv, _ = strings.Cut(csv, "\n")
		}
		wantCSV.WriteString(csv)
	}
	text := string(e2e.MustRead(t, e2e.Fusescope, "show", "-T", "--no-hist", all))
	if text != wantText.String() || !strings.Contains(text, "LOOKUP") {
		t.Errorf("show -T of the three records:\n%s\nwant each one's report in turn:\n%s", text, wantText.String())
	}
	if got := string(e2e.MustRead(t, e2e.Fusescope, "show", "--csv", all)); got != wantCSV.String() || strings.Count(got, "end_time,") != 1 {
		t.Errorf("show --csv of the three records:\n%s\nwant one header and each one's rows:\n%s", got, wantCSV.String())
	}
	os.WriteFile(all, append(tr.Stdout.Bytes(), "{"...), 0o644)
	out, err := exec.Command(e2e.Fusescope, "show", all).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "record 4: not a fusescope record") {
		t.Errorf("a truncated fourth record: %v %s", err, out)
	}
}

// A traced mount that goes away ends the trace with one line and a non-zero
// exit, after printing what was measured; nothing stays attached.
func TestTraceMountDisappears(t *testing.T) {
	t.Parallel()
	probes := e2e.WatchProbes(t)
	_, mnt := e2e.MountBindfs(t, 3)
	tr := e2e.StartTrace(t, "--mount", mnt)
	e2e.Run(t, "stat", filepath.Join(mnt, "f000"))
	e2e.Run(t, "fusermount3", "-u", mnt)
	var err error
	// It looks every second; under make test's load, the race-built
	// trace's look, its report and its detach took more than 10 s once.
	select {
	case err = <-tr.Done:
	case <-time.After(30 * time.Second):
		// Where was it? SIGQUIT has the Go runtime print every goroutine.
		tr.Cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-tr.Done:
		case <-time.After(5 * time.Second):
		}
		t.Fatalf("fusescope trace did not notice the unmount within 30 s; its stderr, with its goroutines at SIGQUIT:\n%s", tr.Stderr.String())
	}
	if err == nil {
		t.Fatal("want a non-zero exit when the traced mount disappears")
	}
	if !strings.Contains(tr.Stderr.String(), "disappeared while traced") {
		t.Errorf("stderr does not say the mount disappeared:\n%s", tr.Stderr.String())
	}
	if !strings.Contains(tr.Stdout.String(), "LOOKUP") {
		t.Errorf("the statistics gathered before the unmount were not printed:\n%s", tr.Stdout.String())
	}
	probes.AssertNoneLeft(t, tr.Cmd.Process.Pid)
	os.MkdirAll(mnt, 0o755) // the cleanup's fusermount3 -u now fails harmlessly
}

// A traced mount unmounted and its number taken at once by the next FUSE
// mount (the kernel gives out the lowest free one; make test mounts
// dozens a minute) still ends the trace: the new mount is another file
// system, whose requests are not the traced mount's.
func TestTraceMountNumberReused(t *testing.T) {
	t.Parallel()
	_, mnt := e2e.MountBindfs(t, 3)
	conn := e2e.ConnOf(t, mnt)
	tr := e2e.StartTrace(t, "--mount", mnt)
	e2e.Run(t, "fusermount3", "-u", mnt)
	gone := filepath.Join("/sys/fs/fuse/connections", strconv.FormatUint(uint64(conn), 10))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(gone); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("connection %d still in fusectl 10 s after its unmount", conn)
		}
	}
	_, other := e2e.MountBindfs(t, 1)
	if c := e2e.ConnOf(t, other); c != conn {
		t.Skipf("another test's mount took number %d; the new one got %d", conn, c)
	}
	select {
	case err := <-tr.Done:
		if err == nil || !strings.Contains(tr.Stderr.String(), "disappeared while traced") {
			t.Errorf("exit %v; stderr:\n%s", err, tr.Stderr.String())
		}
	case <-time.After(30 * time.Second):
		tr.Cmd.Process.Signal(syscall.SIGINT)
		<-tr.Done
		t.Fatalf("fusescope trace took the new mount with the traced one's number for it, for 30 s:\n%s", tr.Stderr.String())
	}
	os.MkdirAll(mnt, 0o755)
}

// Interval mode prints count reports and exits 0 by itself.
func TestTraceIntervalCount(t *testing.T) {
	t.Parallel()
	_, mnt := e2e.MountBindfs(t, 3)
	done := make(chan []byte, 1)
	go func() {
		out, _ := exec.Command(e2e.Fusescope, "trace", "--mount", mnt, "--counts", "--csv", "0.3", "3").Output()
		done <- out
	}()
	// 0.9 s of intervals after the programs attach: the deadline only
	// catches a trace that never ends (attaching took over 5 s once under
	// make test's load).
	deadline := time.After(30 * time.Second)
	var out []byte
loop:
	for {
		select {
		case out = <-done:
			break loop
		case <-deadline:
			t.Fatal("trace 0.3 3 did not finish in 30 s")
		case <-time.After(50 * time.Millisecond):
			os.Stat(filepath.Join(mnt, "f000")) // a request in every interval
		}
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if lines[0] != "end_time,mount,fs_type,conn,op,count,errors,uring" {
		t.Fatalf("CSV header %q", lines[0])
	}
	stamps := map[string]bool{}
	for _, l := range lines[1:] {
		stamps[strings.SplitN(l, ",", 2)[0]] = true
	}
	if len(stamps) != 3 {
		t.Errorf("want 3 intervals in the CSV, got %d:\n%s", len(stamps), out)
	}
}

// Without privileges, one line says what is needed.
func TestTraceNotRoot(t *testing.T) {
	t.Parallel()
	bin := e2e.BinaryForNobody(t)
	out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", bin, "trace").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("want a non-zero exit as nobody, got %v: %s", err, out)
	}
	text := strings.TrimSpace(string(out))
	if strings.Contains(text, "\n") || !strings.Contains(text, "needs root, or CAP_BPF and CAP_PERFMON") {
		t.Errorf("want one line about privileges, got:\n%s", out)
	}
}

// A run that fails after -o named its file leaves no temporary file:
// -p with a thread that is not a process's leader fails once the record's
// temporary file exists.
func TestTraceOutputNotLeftOnError(t *testing.T) {
	t.Parallel()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	tid := ""
	for _, task := range tasks {
		if task.Name() != fmt.Sprint(os.Getpid()) {
			tid = task.Name()
			break
		}
	}
	if tid == "" {
		t.Skip("this test process has one thread")
	}
	dir := t.TempDir()
	out, err := exec.Command(e2e.Fusescope, "trace", "-p", tid, "-o", filepath.Join(dir, "run.json")).CombinedOutput()
	if err == nil {
		t.Fatalf("trace -p %s (a thread, not a process): exit 0\n%s", tid, out)
	}
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Errorf("after %q, left behind: %s", strings.TrimSpace(string(out)), left[0].Name())
	}
}
