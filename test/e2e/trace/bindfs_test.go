package trace

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/test/e2e"
	"github.com/fusescope/fusescope/test/proctest"
)

// bpftraceCounts runs a bpftrace program that does the tracer's matching of
// sends and ends on the same tracepoints, independently, and returns the
// per-opcode counts of completed requests on one connection.
type bpftraceOracle struct{ proc *proctest.Process }

func startBpftrace(t *testing.T, conn uint32) *bpftraceOracle {
	t.Helper()
	e2e.Need(t, "bpftrace")
	prog := fmt.Sprintf(`tracepoint:fuse:fuse_request_send /args->connection == %d/ { @op[args->unique] = args->opcode + 1; }
tracepoint:fuse:fuse_request_end /args->connection == %d && @op[args->unique]/ { @done[@op[args->unique] - 1] = count(); delete(@op[args->unique]); }
END { clear(@op); }`, conn, conn) + proctest.BpftraceReady
	return &bpftraceOracle{proctest.StartBpftrace(t, exec.Command("bpftrace", "-e", prog), 60*time.Second)}
}

var bpftraceLine = regexp.MustCompile(`^@done\[(\d+)\]: (\d+)$`)

func (o *bpftraceOracle) stop(t *testing.T) map[string]uint64 {
	t.Helper()
	o.proc.Interrupt(t, 30*time.Second)
	out := map[string]uint64{}
	for _, line := range strings.Split(o.proc.Output(), "\n") {
		if m := bpftraceLine.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			op, _ := strconv.ParseUint(m[1], 10, 32)
			n, _ := strconv.ParseUint(m[2], 10, 64)
			out[fuseproto.Opcode(op).String()] = n
		}
	}
	return out
}

func TestTraceBindfsAgainstBpftrace(t *testing.T) {
	t.Parallel()
	const n = 40
	_, mnt := e2e.MountBindfs(t, n)
	conn := e2e.ConnOf(t, mnt)
	rec := filepath.Join(t.TempDir(), "rec.json")
	oracle := startBpftrace(t, conn)
	tr := e2e.StartTrace(t, "--mount", mnt, "-o", rec)

	// An independent process does the work: N lstat()s of distinct files
	// cost exactly N LOOKUPs with entry_timeout=0.
	names := make([]string, n)
	for i := range names {
		names[i] = filepath.Join(mnt, fmt.Sprintf("f%03d", i))
	}
	e2e.Run(t, "stat", append([]string{"--format=%s"}, names...)...)
	e2e.Run(t, "cat", names[0], names[1])
	if _, err := os.Stat(filepath.Join(mnt, "missing")); err == nil {
		t.Fatal("missing file exists")
	}
	e2e.WaitIdle(t, conn) // the RELEASEs that cat's exit queued have ended
	tr.Stop(t)
	want := oracle.stop(t)
	r := e2e.LoadRecord(t, rec)
	got := e2e.Counts(r, conn)
	t.Logf("fusescope %v\nbpftrace %v", got, want)
	// The record names the mount's daemon: bindfs, as /proc says.
	if m := r.Mount(conn); m == nil || len(m.Daemons) != 1 || m.Daemons[0].Comm != "bindfs" {
		t.Errorf("the record's daemons of conn %d: %+v, want bindfs", conn, m)
	}

	if got["LOOKUP"] < n+2+1 {
		t.Errorf("LOOKUP = %d, want at least %d (stat of %d files, cat of 2, one missing)", got["LOOKUP"], n+3, n)
	}
	if len(want) == 0 {
		t.Fatalf("bpftrace saw nothing:\n%s", oracle.proc.Output())
	}
	for op, w := range want {
		if got[op] != w {
			t.Errorf("%s: fusescope %d, bpftrace %d", op, got[op], w)
		}
	}
	for op, g := range got {
		if _, ok := want[op]; !ok {
			t.Errorf("%s: fusescope %d, bpftrace none", op, g)
		}
	}
	lookup := r.Profile.Find(conn, fuseproto.Lookup)
	if lookup == nil || lookup.Errnos["ENOENT"] < 1 {
		t.Errorf("the lookup of a missing file must show as ENOENT: %+v", lookup)
	}
	if m := r.Mount(conn); m == nil || m.MountPoint != mnt || m.Connection == nil {
		t.Errorf("record does not describe the mount: %+v", r.Meta.Mounts)
	}
}

// --comm keeps only the requests made by the named command, and -p only those
// of one process.
func TestTraceFilters(t *testing.T) {
	t.Parallel()
	const n = 10
	_, mnt := e2e.MountBindfs(t, n)
	conn := e2e.ConnOf(t, mnt)
	names := make([]string, n)
	for i := range names {
		names[i] = filepath.Join(mnt, fmt.Sprintf("f%03d", i))
	}

	rec := filepath.Join(t.TempDir(), "comm.json")
	tr := e2e.StartTrace(t, "--mount", mnt, "--comm", "stat", "-o", rec)
	for _, name := range names[:5] { // this test process: not "stat"
		os.Stat(name)
	}
	e2e.Run(t, "stat", append([]string{"-c", "%s"}, names...)...)
	tr.Stop(t)
	if got := e2e.Counts(e2e.LoadRecord(t, rec), conn)["LOOKUP"]; got != n {
		t.Errorf("--comm stat: LOOKUP = %d, want %d", got, n)
	}

	// A process that waits for a line on stdin, then lstat()s the files.
	e2e.Need(t, "python3")
	child := exec.Command("python3", "-c", "import os,sys\nsys.stdin.readline()\nfor p in sys.argv[1:]: os.lstat(p)", names[0], names[1], names[2])
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	rec = filepath.Join(t.TempDir(), "pid.json")
	tr = e2e.StartTrace(t, "--mount", mnt, "-p", strconv.Itoa(child.Process.Pid), "-o", rec)
	e2e.Run(t, "stat", append([]string{"-c", "%s"}, names...)...) // another process
	stdin.Write([]byte("go\n"))
	stdin.Close()
	if err := child.Wait(); err != nil {
		t.Fatal(err)
	}
	// The process's exit ends the trace, as strace -p's does.
	select {
	case err := <-tr.Done:
		if err != nil {
			t.Fatalf("fusescope trace -p: %v\n%s", err, tr.Stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("fusescope trace -p did not end within 10 s of its process's exit\n%s", tr.Stderr.String())
	}
	want := fmt.Sprintf("Process %d exited: tracing ended.", child.Process.Pid)
	if !strings.Contains(tr.Stderr.String(), want) {
		t.Errorf("stderr %q, want %q", tr.Stderr.String(), want)
	}
	if got := e2e.Counts(e2e.LoadRecord(t, rec), conn)["LOOKUP"]; got != 3 {
		t.Errorf("-p: LOOKUP = %d, want 3", got)
	}
}
