package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
	"golang.org/x/sys/unix"
)

// The gate's process is this test binary, started again: it must execute
// the command it holds.
func TestMain(m *testing.M) {
	RunGateIfAsked()
	os.Exit(m.Run())
}

// fakeSource counts what the runner asks of it.
type fakeSource struct {
	intervals int
	finals    int
	polls     int
	pollErrAt int // Poll fails on this call; 0: never
	closed    int
	finished  *Exit
	finishes  int
}

func (f *fakeSource) record(n int) *profile.Record {
	return &profile.Record{Schema: profile.Schema, Meta: profile.Meta{Tool: strings.Repeat("i", n)}}
}

func (f *fakeSource) Snapshot() (*profile.Record, error) { return f.record(0), nil }
func (f *fakeSource) Close() error                       { f.closed++; return nil }
func (f *fakeSource) Interval(final bool) (*profile.Record, *profile.Record, error) {
	f.intervals++
	if final {
		f.finals++
	}
	return f.record(f.intervals), f.record(100), nil
}
func (f *fakeSource) PollEvery() time.Duration { return time.Millisecond }
func (f *fakeSource) Poll() error {
	f.polls++
	if f.polls == f.pollErrAt {
		return errors.New("the mount went away")
	}
	return nil
}

type finishingSource struct{ fakeSource }

func (f *finishingSource) Finish(e *Exit) (*profile.Record, error) {
	f.finished, f.finishes = e, f.finishes+1
	return f.record(7), nil
}

func opener(s Source) func(Target) (Source, error) {
	return func(Target) (Source, error) { return s, nil }
}

// [interval [count]]: count records, the last marked final and cut by the
// count, then the whole run's; the source is closed once.
func TestRunIntervalCount(t *testing.T) {
	src := &fakeSource{}
	var finals []bool
	whole, err := Run(context.Background(), Config{Interval: 5 * time.Millisecond, Count: 3,
		Emit: func(r *profile.Record, final bool) error { finals = append(finals, final); return nil }}, opener(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(finals) != 3 || finals[0] || finals[1] || !finals[2] || src.finals != 1 {
		t.Errorf("emitted %v (final intervals %d), want three, the last final", finals, src.finals)
	}
	if whole == nil || whole.Meta.Tool != strings.Repeat("i", 100) || src.closed != 1 {
		t.Errorf("whole %+v, closed %d times", whole, src.closed)
	}
}

// A Poll error ends the run after its last report, which -o saves; Run
// returns the error.
func TestRunPollErrorEndsAfterTheReport(t *testing.T) {
	out := filepath.Join(t.TempDir(), "rec.json")
	src := &finishingSource{fakeSource{pollErrAt: 3}}
	emitted := 0
	_, err := Run(context.Background(), Config{Output: out, Emit: func(*profile.Record, bool) error { emitted++; return nil }}, opener(src))
	if err == nil || err.Error() != "the mount went away" {
		t.Fatalf("Run: %v, want the Poll's error", err)
	}
	if emitted != 1 || src.finishes != 1 || src.finished != nil {
		t.Errorf("emitted %d, finished %d (%v), want the whole run's record once, no command", emitted, src.finishes, src.finished)
	}
	b, err := os.ReadFile(out)
	if err != nil || !bytes.Contains(b, []byte(`"iiiiiii"`)) {
		t.Errorf("-o: %v\n%s", err, b)
	}
}

// Immediate: what the source holds now, once, without waiting.
func TestRunImmediate(t *testing.T) {
	src := &fakeSource{}
	start := time.Now()
	n := 0
	if _, err := Run(context.Background(), Config{Immediate: true, Emit: func(*profile.Record, bool) error { n++; return nil }}, opener(src)); err != nil {
		t.Fatal(err)
	}
	if n != 1 || src.polls != 0 || time.Since(start) > 5*time.Second {
		t.Errorf("%d records, %d polls", n, src.polls)
	}
}

// watchingSource learns the command's process while it is held.
type watchingSource struct {
	finishingSource
	started func(pid int, fds []int)
}

func (w *watchingSource) CommandStarted(pid int, fds []int) error {
	w.started(pid, fds)
	return nil
}

// -- CMD: the command is held before its first instruction while the
// source learns its process (stopped after its exec as our tracee, or at
// this binary's gate), then runs; its exit ends the run, the source
// learns how it ended, and Run passes its status on.
func TestRunCommand(t *testing.T) {
	for _, self := range []bool{false, true} {
		selfGate = self
		t.Run(fmt.Sprintf("selfGate=%v", self), testRunCommand)
	}
	selfGate = false
}

func testRunCommand(t *testing.T) {
	self, _ := os.Executable()
	sh, _ := filepath.EvalSymlinks("/bin/sh")
	ran := filepath.Join(t.TempDir(), "ran")
	var parent, held int
	var heldExe, heldState string
	var ranEarly bool
	src := &watchingSource{started: func(pid int, _ []int) {
		held = pid
		heldExe, _ = os.Readlink(filepathProc(pid, "exe"))
		stat, _ := os.ReadFile(filepathProc(pid, "stat"))
		if _, after, ok := strings.Cut(string(stat), ") "); ok {
			heldState = after[:1]
		}
		_, statErr := os.Stat(ran)
		ranEarly = statErr == nil
	}}
	_, err := Run(context.Background(), Config{Command: []string{"sh", "-c", ": > " + ran + "; exit 3"}}, func(tg Target) (Source, error) {
		parent = tg.CommandParent
		return src, nil
	})
	if parent != os.Getpid() {
		t.Errorf("the source was told the command's parent is %d, want us (%d)", parent, os.Getpid())
	}
	// Held, it has not run a single instruction of the command: stopped
	// after its exec (t: tracing stop), or at the gate, this binary.
	switch {
	case held == 0:
		t.Errorf("the source was not told the command's process")
	case !selfGate && (heldExe != sh || heldState != "t"):
		t.Errorf("held, the command's process runs %s in state %q, want %s stopped by its tracer (t)", heldExe, heldState, sh)
	case selfGate && heldExe != self:
		t.Errorf("held, the command's process runs %s, want the gate (%s)", heldExe, self)
	case ranEarly:
		t.Errorf("the command ran before its release")
	}
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 3 {
		t.Fatalf("Run: %v, want exit status 3", err)
	}
	if src.finished == nil || src.finished.Status == nil || *src.finished.Status != 3 || src.finished.Ran <= 0 {
		t.Errorf("the source was told %+v", src.finished)
	}
}

// A source that cannot open leaves no command held and no -o temporary
// file: not started (traced), or its gate killed.
func TestRunOpenFails(t *testing.T) {
	for _, self := range []bool{false, true} {
		selfGate = self
		t.Run(fmt.Sprintf("selfGate=%v", self), testRunOpenFails)
	}
	selfGate = false
}

func testRunOpenFails(t *testing.T) {
	dir := t.TempDir()
	before := children(t)
	var during []int
	_, err := Run(context.Background(), Config{Command: []string{"sleep", "100"}, Output: filepath.Join(dir, "rec.json")},
		func(tg Target) (Source, error) { during = children(t); return nil, errors.New("no probes") })
	if err == nil || err.Error() != "no probes" {
		t.Fatalf("Run: %v", err)
	}
	if selfGate && len(during) != len(before)+1 {
		t.Errorf("at open, our children were %v, after %v before: want the gate among them", during, before)
	}
	if after := children(t); !slices.Equal(after, before) {
		t.Errorf("our children were %v, and are %v: the command is left", before, after)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

// children lists this process's child processes, of all its threads.
func children(t *testing.T) []int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, task := range tasks {
		b, _ := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "children"))
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

// -p: the process's exit ends the run, with a note.
func TestRunPIDExit(t *testing.T) {
	c := exec.Command("sleep", "0.2")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go c.Wait()
	var log bytes.Buffer
	if _, err := Run(context.Background(), Config{PID: c.Process.Pid, Log: &log}, opener(&fakeSource{})); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "exited: tracing ended") {
		t.Errorf("log %q", log.String())
	}
}

func filepathProc(pid int, name string) string {
	return filepath.Join("/proc", strconv.Itoa(pid), name)
}

// A command inherits the fds we were given, at their numbers, as it would
// from a shell (the demo's workload writes to 3>&1), and the sources are
// told which fds it has when it executes.
func TestRunCommandInheritsFDs(t *testing.T) {
	for _, self := range []bool{false, true} {
		selfGate = self
		t.Run(fmt.Sprintf("selfGate=%v", self), testRunCommandInheritsFDs)
	}
	selfGate = false
}

func testRunCommandInheritsFDs(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Give w a number without close-on-exec, as a shell's 3>&1 would.
	fd, err := unix.Dup(int(w.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer unix.Close(fd)
	script := fmt.Sprintf("echo through >/proc/self/fd/%d", fd)
	var fds []int
	src := &watchingSource{started: func(_ int, f []int) { fds = f }}
	_, err = Run(context.Background(), Config{Command: []string{"sh", "-c", script}}, opener(src))
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	b, _ := io.ReadAll(r)
	if string(b) != "through\n" {
		t.Errorf("the command wrote %q to its fd %d, want through", b, fd)
	}
	if len(fds) < 4 || fds[0] != 0 || fds[1] != 1 || fds[2] != 2 || !slices.Contains(fds, fd) {
		t.Errorf("the sources were told the command has fds %v, want 0, 1, 2 and %d among them", fds, fd)
	}
}

// CapEff is read as the kernel prints it: hexadecimal, bit n for
// capability n.
func TestHasCapability(t *testing.T) {
	status := []byte("Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t0000000000080000\nCapBnd:\t000001ffffffffff\n")
	if !hasCapability(status, unix.CAP_SYS_PTRACE) || hasCapability(status, unix.CAP_SYS_ADMIN) {
		t.Errorf("CapEff 0x80000: CAP_SYS_PTRACE %v, CAP_SYS_ADMIN %v; want true, false",
			hasCapability(status, unix.CAP_SYS_PTRACE), hasCapability(status, unix.CAP_SYS_ADMIN))
	}
	if hasCapability([]byte("Name:\tx\n"), unix.CAP_SYS_PTRACE) {
		t.Errorf("no CapEff line: a capability")
	}
}

type settlingSource struct {
	fakeSource
	settles int
	within  time.Duration
}

func (s *settlingSource) Settle(max time.Duration) error {
	s.settles, s.within = s.settles+1, max
	return nil
}

// The requests a command leaves in flight (its last close's RELEASE) are
// waited for when the run ends with the command's exit or -p's, before
// the last record; a run ended by its count, its duration or a signal
// cuts at that moment.
func TestRunSettlesAfterTheProcessExits(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  func() Config
		want int
	}{
		{"command exits", func() Config { return Config{Command: []string{"true"}} }, 1},
		{"command exits, intervals", func() Config { return Config{Command: []string{"true"}, Interval: time.Hour} }, 1},
		{"-p exits", func() Config {
			c := exec.Command("sleep", "0.1")
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			go c.Wait()
			return Config{PID: c.Process.Pid}
		}, 1},
		{"the count ends the command", func() Config {
			return Config{Command: []string{"sleep", "30"}, Interval: 5 * time.Millisecond, Count: 1}
		}, 0},
		{"the count ends the run", func() Config { return Config{Interval: 5 * time.Millisecond, Count: 2} }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := &settlingSource{}
			_, err := Run(context.Background(), c.cfg(), opener(src))
			var ee *ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Fatal(err)
			}
			if src.settles != c.want || (c.want > 0 && src.within != settleMax) {
				t.Errorf("Settle called %d times (within %v), want %d", src.settles, src.within, c.want)
			}
		})
	}
}
