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
)

// tmuxPane is a tmux session of its own (a private server socket) with
// one pane of a fixed size.
type tmuxPane struct {
	t      *testing.T
	socket string
}

func newTmux(t *testing.T, width, height int, command string) *tmuxPane {
	t.Helper()
	p := &tmuxPane{t: t, socket: filepath.Join(t.TempDir(), "tmux.sock")}
	p.run("new-session", "-d", "-s", "top", "-x", strconv.Itoa(width), "-y", strconv.Itoa(height), command)
	t.Cleanup(func() { exec.Command("tmux", "-S", p.socket, "kill-server").Run() })
	// Keys typed before sh prints its prompt are echoed first and the
	// prompt lands in front of the command's output: wait for it.
	p.waitFor("the shell's prompt", func(s string) bool { return strings.Contains(s, "#") })
	return p
}

// exitStatus is the status an "echo rc=$?" printed, "" before it did; the
// line may begin with a prompt.
func exitStatus(screen string) string {
	if m := exitLine.FindStringSubmatch(screen); m != nil {
		return m[1]
	}
	return ""
}

var exitLine = regexp.MustCompile(`(?m)(?:^|# )rc=(\d+)\s*$`)

func (p *tmuxPane) run(args ...string) string {
	p.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", p.socket}, args...)...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (p *tmuxPane) capture() string { return p.run("capture-pane", "-p", "-t", "top") }

// pid is the tmux server's: the pane's processes are its descendants.
func (p *tmuxPane) pid() int {
	pid, err := strconv.Atoi(strings.TrimSpace(p.run("display-message", "-p", "#{pid}")))
	if err != nil {
		p.t.Fatalf("tmux's pid: %v", err)
	}
	return pid
}

func (p *tmuxPane) keys(keys ...string) {
	p.run(append([]string{"send-keys", "-t", "top"}, keys...)...)
}

// waitFor polls the pane until cond holds, for at most 20 s, and
// returns the screen it held on.
func (p *tmuxPane) waitFor(what string, cond func(screen string) bool) string {
	p.t.Helper()
	var screen string
	e2e.Eventually(p.t, 20*time.Second, "the pane to show "+what, func() (bool, string) {
		screen = p.capture()
		return cond(screen), "\n" + screen
	})
	return screen
}

// topRows reads the opcode table: op -> REQ/s, in screen order.
func topRows(screen string) (ops []string, rates map[string]float64) {
	rates = map[string]float64{}
	in := false
	for _, line := range strings.Split(screen, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "MOUNT" && f[1] == "OP" {
			in = true
			continue
		}
		if in {
			if len(f) < 7 {
				break
			}
			v, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				break
			}
			ops = append(ops, f[1])
			rates[f[1]] = v
		}
	}
	return ops, rates
}

// TestTopUnderTmux runs fusescope top in a tmux pane while a workload
// stats files at a known pace: the screen shows the workload's opcodes at
// about its rate; s sorts by rate, m picks the mount, p pauses; q leaves
// the shell's screen as it was, with no probe left.
func TestTopUnderTmux(t *testing.T) {
	// Not parallel: it compares the rates top shows with the workload's.
	probes := e2e.WatchProbes(t)
	e2e.Need(t, "tmux")
	mnt, cfs := mountLab(t, 50, 1, 0)
	pane := newTmux(t, 130, 40, "sh")
	pane.keys("echo MARKER-BEFORE-TOP", "Enter")
	pane.keys(fmt.Sprintf("%s top --mount %s --interval 500ms", e2e.Fusescope, mnt), "Enter")
	pane.waitFor("top's first screen", func(s string) bool { return strings.Contains(s, "fusescope top") })

	// 50 stats every 50 ms, for as long as the test looks.
	every(t, 50*time.Millisecond, func() {
		for i := 0; i < 50; i++ {
			os.Stat(filepath.Join(mnt, "files", fmt.Sprintf("f%03d", i)))
		}
	})
	pane.waitFor("LOOKUP", func(s string) bool { _, rates := topRows(s); return rates["LOOKUP"] > 0 })
	// The rate on the screen against the daemon's own count over the
	// same seconds: within what one interval's jitter allows.
	before, start := cfs.snapshot()[fuseproto.Lookup], time.Now()
	time.Sleep(3 * time.Second)
	daemonRate := float64(cfs.snapshot()[fuseproto.Lookup]-before) / time.Since(start).Seconds()
	screen := pane.capture()
	if _, rates := topRows(screen); rates["LOOKUP"] < 0.6*daemonRate || rates["LOOKUP"] > 1.5*daemonRate {
		t.Errorf("LOOKUP at %.0f/s on the screen, the daemon served %.0f/s:\n%s", rates["LOOKUP"], daemonRate, screen)
	}
	if !strings.Contains(screen, "GETATTR") {
		t.Errorf("the workload's GETATTRs are missing:\n%s", screen)
	}
	// The busiest files are named as the file system names them, though
	// go-fuse gives the ids of forgotten nodes to others.
	named := regexp.MustCompile(`^(/|/files|/files/f0[0-4][0-9])$`)
	files := 0
	for _, line := range strings.Split(screen, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && strings.HasPrefix(f[0], "/") && !strings.HasPrefix(f[0], "/tmp") {
			files++
			if !named.MatchString(f[0]) {
				t.Errorf("file %q is not a name the file system has:\n%s", f[0], screen)
			}
		}
	}
	if files == 0 {
		t.Errorf("no busiest files on the screen:\n%s", screen)
	}
	// s: sorted by rate, highest first.
	pane.keys("s")
	screen = pane.waitFor("sort: rate", func(s string) bool { ops, _ := topRows(s); return strings.Contains(s, "sort: rate") && len(ops) > 1 })
	ops, rates := topRows(screen)
	for i := 1; i < len(ops); i++ {
		if rates[ops[i]] > rates[ops[i-1]] {
			t.Errorf("sort: rate, but %s (%.1f/s) is below %s (%.1f/s):\n%s", ops[i-1], rates[ops[i-1]], ops[i], rates[ops[i]], screen)
		}
	}
	// m: the one mount, by name.
	pane.keys("m")
	pane.waitFor("mount: "+mnt, func(s string) bool { return strings.Contains(s, "mount: "+mnt) })
	// p: paused, the screen stays as it is across intervals.
	pane.keys("p")
	paused := pane.waitFor("[paused]", func(s string) bool { return strings.Contains(s, "[paused]") })
	time.Sleep(1200 * time.Millisecond)
	if again := pane.capture(); again != paused {
		t.Errorf("the paused screen changed:\n%s\n---\n%s", paused, again)
	}
	// q: back to the shell's screen.
	pane.keys("q")
	screen = pane.waitFor("the shell again", func(s string) bool { return strings.Contains(s, "MARKER-BEFORE-TOP") })
	if strings.Contains(screen, "fusescope top ") && strings.Contains(screen, "REQ/s") {
		t.Errorf("q left top's screen behind:\n%s", screen)
	}
	pane.waitFor("the prompt", func(s string) bool {
		lines := strings.Split(strings.TrimRight(s, "\n "), "\n")
		// The prompt after top's command line, which may wrap.
		return strings.TrimSpace(lines[len(lines)-1]) == "#" && strings.Contains(strings.Join(lines, ""), " top --mount ") && !strings.Contains(s, "keys: s sort")
	})
	// top's exit status, asked again if the shell lost the keys: under
	// load they can come while it still reads the terminal's answers to
	// top's leaving the alternate screen (an empty line, once). An empty
	// line leaves $? as it was.
	status := ""
	for try := 0; try < 3 && status == ""; try++ {
		pane.keys("echo rc=$?", "Enter")
		for deadline := time.Now().Add(5 * time.Second); status == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			status = exitStatus(pane.capture())
		}
	}
	if status != "0" {
		t.Errorf("top's exit status %q, want 0:\n%s", status, pane.capture())
	}
	probes.AssertNoneLeft(t, pane.pid())

	// A terminal too small: one line, a failure.
	small := newTmux(t, 60, 10, "sh")
	small.keys(e2e.Fusescope+" top; echo rc=$?", "Enter")
	screen = small.waitFor("the refusal", func(s string) bool { return exitStatus(s) != "" })
	if !strings.Contains(strings.ReplaceAll(screen, "\n", ""), "the terminal is 60x10: fusescope top needs at least 80x12") || exitStatus(screen) == "0" {
		t.Errorf("a 60x10 terminal:\n%s", screen)
	}
}

// TestTopSyscallsUnderTmux: top --syscalls -p on a Python loop that
// counts its own getppid calls: the screen's getppid rate is the loop's,
// its failed stats show as errors, and the process's exit ends top.
func TestTopSyscallsUnderTmux(t *testing.T) {
	// Not parallel: it compares the rates top shows with the workload's.
	probes := e2e.WatchProbes(t)
	e2e.Need(t, "tmux", "python3")
	dir := t.TempDir()
	counter := filepath.Join(dir, "count")
	script := fmt.Sprintf(`
import os, time
n = 0
while True:
    for i in range(500):
        os.getppid()
    n += 500
    try:
        os.stat("/nonexistent-%d")
    except OSError:
        pass
    with open(%q, "w") as f:
        f.write(str(n))
    time.sleep(0.005)
`, os.Getpid(), counter)
	work := exec.Command("python3", "-c", script)
	if err := work.Start(); err != nil {
		t.Fatal(err)
	}
	defer work.Process.Kill()
	pane := newTmux(t, 130, 40, "sh")
	pane.keys(fmt.Sprintf("%s top --syscalls -p %d --interval 1s; echo rc=$?", e2e.Fusescope, work.Process.Pid), "Enter")
	pane.waitFor("getppid", func(s string) bool { return strings.Contains(s, "getppid") })
	count := func() (float64, time.Time) {
		for {
			b, _ := os.ReadFile(counter)
			if v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64); err == nil {
				return v, time.Now()
			}
			time.Sleep(time.Millisecond)
		}
	}
	c0, t0 := count()
	time.Sleep(3 * time.Second)
	c1, t1 := count()
	own := (c1 - c0) / t1.Sub(t0).Seconds()
	screen := pane.capture()
	row := func(name string) []string {
		for _, line := range strings.Split(screen, "\n") {
			if f := strings.Fields(line); len(f) >= 6 && f[0] == name {
				return f
			}
		}
		return nil
	}
	g := row("getppid")
	if g == nil {
		t.Fatalf("no getppid row:\n%s", screen)
	}
	// SYSCALL CATEGORY CALLS/s ERR/s AVG TIME%: the category is one word here.
	rate, _ := strconv.ParseFloat(g[2], 64)
	if rate < 0.6*own || rate > 1.5*own {
		t.Errorf("getppid at %.0f/s on the screen, the loop counted %.0f/s:\n%s", rate, own, screen)
	}
	if st := row("newfstatat"); st == nil || st[3] == "0.0" {
		t.Errorf("the failed stats show no errors:\n%s", screen)
	}
	// The process's exit ends top, which leaves the terminal as it was.
	work.Process.Kill()
	work.Wait()
	screen = pane.waitFor("top's end", func(s string) bool { return exitStatus(s) != "" })
	if exitStatus(screen) != "0" || strings.Contains(screen, "CALLS/s") {
		t.Errorf("after the process's exit:\n%s", screen)
	}
	probes.AssertNoneLeft(t, pane.pid())
}

// TestTopMountsUnderTmux runs top over two mounts, each with its own
// files: m picks one, and its files and processes alone show, the
// RELEASEs the kernel sends after a close as "kernel"; a terminal shrunk
// below 80x12 while top runs shows the whole refusal, wrapped to its
// width, and top's screen comes back when it grows.
func TestTopMountsUnderTmux(t *testing.T) {
	t.Parallel()
	probes := e2e.WatchProbes(t)
	e2e.Need(t, "tmux")
	a, _ := mountLab(t, 50, 1, 0)
	b, _ := mountLab(t, 50, 1, 0)
	pane := newTmux(t, 130, 40, "sh")
	pane.keys(fmt.Sprintf("%s top --mount %s --mount %s --interval 500ms --slower 1us", e2e.Fusescope, a, b), "Enter")
	pane.waitFor("top's first screen", func(s string) bool { return strings.Contains(s, "fusescope top") })
	// Reads of f00x on a and of f04x on b (each close sends a RELEASE in
	// the background: the kernel's, pid 0), so that each mount's files
	// take about as long and each is among the five busiest in turn.
	every(t, 50*time.Millisecond, func() {
		for i := 0; i < 5; i++ {
			os.ReadFile(filepath.Join(a, "files", fmt.Sprintf("f00%d", i)))
			os.ReadFile(filepath.Join(b, "files", fmt.Sprintf("f04%d", i)))
		}
	})
	// Each mount's files, in turn: the five busiest files of both mounts
	// show, and a loaded machine's timing may rank one mount's first for
	// a while.
	pane.waitFor("a's files", func(s string) bool { return strings.Contains(s, "/files/f00") })
	pane.waitFor("b's files", func(s string) bool { return strings.Contains(s, "/files/f04") })
	shown := func(screen string) string {
		if m := regexp.MustCompile(`  mount: (\S+)`).FindStringSubmatch(screen); m != nil {
			return m[1]
		}
		return ""
	}
	for cur := "all"; cur != b; {
		pane.keys("m")
		cur = shown(pane.waitFor("the next mount", func(s string) bool { return shown(s) != "" && shown(s) != cur }))
		if cur == "all" {
			t.Fatalf("m went through the mounts to all without %s", b)
		}
	}
	screen := pane.waitFor("b's files and processes alone", func(s string) bool {
		return strings.Contains(s, "mount: "+b) && strings.Contains(s, "/files/f04") && strings.Contains(s, "kernel")
	})
	if strings.Contains(screen, "/files/f00") || strings.Contains(screen, "[0]") {
		t.Errorf("mount %s picked: a's files, or the kernel's requests as a command's:\n%s", b, screen)
	}

	// Shrunk while it runs: the whole sentence, no line wider than 60.
	pane.run("resize-window", "-t", "top", "-x", "60", "-y", "10")
	want := "terminal too small (60x10): fusescope top needs at least 80x12; q quits"
	squeeze := strings.NewReplacer(" ", "", "\n", "")
	screen = pane.waitFor("the refusal, whole", func(s string) bool { return strings.Contains(squeeze.Replace(s), squeeze.Replace(want)) })
	for _, line := range strings.Split(screen, "\n") {
		if len(line) > 60 {
			t.Errorf("a line wider than the pane: %q", line)
		}
	}
	pane.run("resize-window", "-t", "top", "-x", "130", "-y", "40")
	pane.waitFor("top's screen again", func(s string) bool { return strings.Contains(s, "REQ/s") })
	pane.keys("q")
	pane.waitFor("the prompt", func(s string) bool {
		lines := strings.Split(strings.TrimRight(s, "\n "), "\n")
		return !strings.Contains(s, "REQ/s") && strings.TrimSpace(lines[len(lines)-1]) == "#"
	})
	pane.keys("echo rc=$?", "Enter")
	pane.waitFor("exit status 0", func(s string) bool { return exitStatus(s) == "0" })
	probes.AssertNoneLeft(t, pane.pid())
}

// TestTopStartsAtOnce runs top on a terminal that answers no query
// (script's pseudo-terminal, its output read by the test): its first
// screen comes at once, with no background-colour query sent (Bubble Tea
// v1's init asked, and waited 5 s for an answer that never came), and
// likewise under tmux, which answers.
func TestTopStartsAtOnce(t *testing.T) {
	// Not parallel: it times top's first screen.
	probes := e2e.WatchProbes(t)
	e2e.Need(t, "script", "tmux")
	mnt, _ := mountLab(t, 5, 1, 0)
	top := fmt.Sprintf("%s top --mount %s --interval 200ms", e2e.Fusescope, mnt)
	cmd := exec.Command("script", "-q", "-e", "-c", "stty cols 120 rows 40; exec "+top, "/dev/null")
	cmd.Env = append(os.Environ(), "TERM=xterm-256color")
	keys, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var screen e2e.LockedBuffer
	cmd.Stdout, cmd.Stderr = &screen, &screen
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	e2e.Eventually(t, 20*time.Second, "top's first screen", func() (bool, string) {
		return strings.Contains(screen.String(), "keys: s sort"), fmt.Sprintf("%q", screen.String())
	})
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the first screen took %v on a terminal that answers nothing:\n%q", took.Round(time.Millisecond), screen.String())
	}
	if strings.Contains(screen.String(), "\x1b]11;?") {
		t.Errorf("top asked the terminal for its background colour: %q", screen.String())
	}
	keys.Write([]byte("q"))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("top after q: %v\n%q", err, screen.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("top did not end on q:\n%q", screen.String())
	}

	// Under tmux, with the TERM of a terminal that answers.
	pane := newTmux(t, 120, 40, "sh")
	pane.keys("TERM=xterm-256color "+top, "Enter")
	start = time.Now()
	pane.waitFor("top's first screen", func(s string) bool { return strings.Contains(s, "keys: s sort") })
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the first screen took %v under tmux", took.Round(time.Millisecond))
	}
	pane.keys("q")
	pane.waitFor("the prompt", func(s string) bool {
		lines := strings.Split(strings.TrimRight(s, "\n "), "\n")
		return !strings.Contains(s, "keys: s sort") && strings.TrimSpace(lines[len(lines)-1]) == "#"
	})
	probes.AssertNoneLeft(t, cmd.Process.Pid, pane.pid())
}

// every runs work every period until the test ends, and waits for the
// last run to finish before the test's other cleanups (its unmounts) run.
func every(t *testing.T, period time.Duration, work func()) {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(period):
			}
			work()
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}
