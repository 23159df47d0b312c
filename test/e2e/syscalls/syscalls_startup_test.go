package syscalls

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/test/e2e"
)

// The slow-startup hunt of seed 002, on a log and live: the questions a
// performance engineer asks of a slow start, with answers known in advance.

// bothSources runs argv under strace -f (the log's report) and under
// fusescope syscalls (the live report), in dir, with env added.
func bothSources(t *testing.T, dir string, env []string, argv ...string) map[string]*profile.SyscallReport {
	t.Helper()
	log := filepath.Join(dir, "trace.log")
	cmd := exec.Command("strace", append([]string{"-f", "-tt", "-T", "-y", "-o", log}, argv...)...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	cmd.Run() // the command's own status (getent's 2) is not the test's
	out := filepath.Join(dir, "live.json")
	cmd = exec.Command(e2e.Fusescope, append([]string{"syscalls", "--json", "--top", "0", "-o", out, "--"}, argv...)...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		if _, exited := err.(*exec.ExitError); !exited { // the command's own status is passed on
			t.Fatalf("%v: %v\n%s", cmd.Args, err, msg)
		}
	}
	return map[string]*profile.SyscallReport{"log": logReport(t, log), "live": decodeReport(t, out)}
}

// A shim chain (three scripts, each sleeping 100 ms, then exec'ing the
// next, as a pyenv shim execs bash then python): the critical path is
// three programs of ~100 ms one after another in the root process, each
// with its arguments, and its waits are the sleeps it waited for.
func TestSyscallsShimChain(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "strace", "sleep")
	dir := t.TempDir()
	for i := 1; i <= 3; i++ {
		next := fmt.Sprintf("exec %s/shim%d --from-shim%d\n", dir, i+1, i)
		if i == 3 {
			next = ""
		}
		script := fmt.Sprintf("#!/bin/sh\nsleep 0.1\n%s", next)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("shim%d", i)), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for source, r := range bothSources(t, dir, nil, filepath.Join(dir, "shim1")) {
		var steps []profile.PathStep
		for _, st := range r.CriticalPath {
			if st.Depth == 0 {
				steps = append(steps, st)
			}
		}
		if len(steps) != 3 {
			t.Errorf("%s: %d programs on the critical path, want 3: %+v", source, len(steps), r.CriticalPath)
			continue
		}
		for i, st := range steps {
			want := filepath.Join(dir, fmt.Sprintf("shim%d", i+1))
			// At most a second: its 0.1 s sleep and its start-up, which
			// strace's ptrace and make test's parallel packages stretch
			// (0.424 s once); a step that held two sleeps would also be
			// one program too few above.
			if st.Program != want || st.DurS < 0.095 || st.DurS > 1 {
				t.Errorf("%s: step %d is %s for %.3f s, want %s for ~0.1 s", source, i+1, st.Program, st.DurS, want)
			}
			if i > 0 && !strings.Contains(strings.Join(st.Args, " "), fmt.Sprintf("--from-shim%d", i)) {
				t.Errorf("%s: step %d's arguments %q lack --from-shim%d", source, i+1, st.Args, i)
			}
		}
		// Each program's time is the sleep it waited for: a wait for a
		// child that ran sleep.
		waits := 0
		for _, st := range r.CriticalPath {
			if st.Kind == "exec" && st.Depth == 2 && strings.HasSuffix(st.Program, "sleep") && st.DurS >= 0.09 {
				waits++
			}
		}
		if waits != 3 {
			t.Errorf("%s: %d sleeps of ~0.1 s on the critical path, want 3: %+v", source, waits, r.CriticalPath)
		}
		var root profile.Process
		for _, p := range r.Processes {
			if p.PID == steps[0].PID {
				root = p
			}
		}
		if len(root.Execs) != 3 {
			t.Errorf("%s: the root's exec chain is %+v, want the three shims", source, root.Execs)
		}
	}
}

// A search path probed in vain: env finds its program by trying each
// directory of PATH with execve, and each failure is a row of the files
// table with its exact count.
func TestSyscallsMissingProbes(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "strace", "env")
	dir := t.TempDir()
	const runs = 7
	search := []string{filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")}
	script := fmt.Sprintf("#!/bin/sh\nfor i in $(seq %d); do /usr/bin/env PATH=%s:/usr/bin:/bin true; done\n", runs, strings.Join(search, ":"))
	if err := os.WriteFile(filepath.Join(dir, "probe.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for source, r := range bothSources(t, dir, nil, filepath.Join(dir, "probe.sh")) {
		files := map[string]profile.FileStat{}
		for _, f := range r.Files {
			files[f.Target] = f
		}
		for _, d := range search {
			f := files[filepath.Join(d, "true")]
			if f.Missing != runs || f.Kind != "missing" {
				t.Errorf("%s: %s: %d lookups that failed with ENOENT (kind %q), want %d", source, filepath.Join(d, "true"), f.Missing, f.Kind, runs)
			}
		}
	}
	// --file keeps them.
	out := e2e.MustRead(t, e2e.Fusescope, "syscalls", "--file", filepath.Join(dir, "b", "*"), "--csv", "--table", "files", filepath.Join(dir, "trace.log"))
	if !strings.Contains(string(out), filepath.Join(dir, "b", "true")) {
		t.Errorf("--file %s/b/* lost the missing path:\n%s", dir, out)
	}
}

// Seed 002's DNS case: a resolver that never answers (a UDP socket on
// 127.0.0.1:53 that reads and says nothing, in a private network and mount
// namespace with its own resolv.conf: timeout 1 s, one attempt). The top
// item of the critical path is the wait on that socket.
func TestSyscallsDNSTimeoutCriticalPath(t *testing.T) {
	// Not parallel: it measures the waits on the critical path, which other tests' load would stretch.
	e2e.Need(t, "strace", "unshare", "ip", "getent", "python3")
	dir := t.TempDir()
	resolv := filepath.Join(dir, "resolv.conf")
	os.WriteFile(resolv, []byte("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"), 0o644)
	silent := filepath.Join(dir, "silent.py")
	os.WriteFile(silent, []byte("import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.bind(('127.0.0.1', 53))\nopen('"+dir+"/ready', 'w').close()\nwhile True:\n    s.recvfrom(512)\n"), 0o644)
	inner := filepath.Join(dir, "inner.sh")
	os.WriteFile(inner, []byte(fmt.Sprintf(`#!/bin/sh
ip link set lo up
mount --bind %[1]s/resolv.conf /etc/resolv.conf
python3 %[1]s/silent.py >/dev/null 2>&1 &
silent=$!
while [ ! -e %[1]s/ready ]; do sleep 0.01; done
strace -f -tt -T -y -o %[1]s/trace.log getent hosts nohost.fusescope.invalid
%[2]s syscalls --json --top 0 -o %[1]s/live.json -- getent hosts nohost.fusescope.invalid
kill $silent
exit 0
`, dir, e2e.Fusescope)), 0o755)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if msg, err := exec.CommandContext(ctx, "unshare", "--net", "--mount", inner).CombinedOutput(); err != nil {
		t.Fatalf("unshare: %v\n%s", err, msg)
	}
	for source, r := range map[string]*profile.SyscallReport{"log": logReport(t, filepath.Join(dir, "trace.log")), "live": decodeReport(t, filepath.Join(dir, "live.json"))} {
		if len(r.CriticalTop) == 0 {
			t.Errorf("%s: no critical path", source)
			continue
		}
		top := r.CriticalTop[0]
		if top.Kind != "wait" || !strings.Contains(top.Target, "127.0.0.1:53") || top.DurS < 0.9 || top.Share < 0.8 {
			t.Errorf("%s: the top of the critical path is %+v, want the wait on the resolver's socket (~1 s)", source, top)
		}
		found := false
		for _, g := range r.WaitGroups {
			found = found || strings.Contains(g.Target, "127.0.0.1:53") && g.TimeS >= 0.9
		}
		if !found {
			t.Errorf("%s: no wait group on the resolver's socket: %+v", source, r.WaitGroups)
		}
		for _, c := range r.Categories {
			if c.Category == "network" && c.TimeS < 0.9 {
				t.Errorf("%s: network time %.3f s: the poll on the resolver's socket is network", source, c.TimeS)
			}
		}
	}
}

// --summary prints strace -c's table, with strace -c's counts, and its
// seconds are wall-clock time in the calls, as strace -w -c's of the same
// run (strace -c alone would count the 0.2 s sleep as almost nothing),
// which --help says.
func TestSyscallsSummaryLikeStraceC(t *testing.T) {
	// Not parallel: it compares the time in each call with strace -w -c's, which other tests' load would skew.
	e2e.Need(t, "strace")
	dir := t.TempDir()
	log := filepath.Join(dir, "trace.log")
	e2e.Run(t, "strace", "-f", "-w", "-C", "-tt", "-T", "-y", "-o", log, "sh", "-c", "ls /usr/share >/dev/null; sleep 0.2; ls /nonexistent 2>/dev/null; true")
	out := string(e2e.MustRead(t, e2e.Fusescope, "syscalls", "--summary", log))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[0] != "% time     seconds  usecs/call     calls    errors syscall" || !strings.HasPrefix(lines[1], "------ ") || !strings.HasSuffix(lines[len(lines)-1], " total") {
		t.Fatalf("not strace -c's table:\n%s", out)
	}
	calls, errors := straceTable(t, log)
	seconds := straceSeconds(t, log)
	long := 0
	for _, l := range lines[2 : len(lines)-2] {
		f := strings.Fields(l)
		name := f[len(f)-1]
		n := f[3]
		e := "0"
		if len(f) == 6 {
			e = f[4]
		}
		if n != fmt.Sprint(calls[name]) || e != fmt.Sprint(errors[name]) {
			t.Errorf("%s: %s calls, %s errors; strace -c: %d, %d", name, n, e, calls[name], errors[name])
		}
		// The -T durations are strace's own measure of the same calls,
		// printed to the microsecond: the long calls' sums agree to 1%.
		if want := seconds[name]; want >= 0.05 {
			long++
			if got, _ := strconv.ParseFloat(f[1], 64); math.Abs(got-want) > 0.01*want {
				t.Errorf("%s: %.6f s, strace -w -c: %.6f s", name, got, want)
			}
		}
	}
	if long < 2 { // the sleep, and sh's wait for it
		t.Errorf("%d calls of at least 50 ms in strace -w -c's table, want the sleep's and the wait for it:\n%s", long, out)
	}
	help := string(e2e.MustRead(t, e2e.Fusescope, "syscalls", "--help"))
	if !strings.Contains(help, "as strace -w -c does") || strings.Contains(help, "as strace -c does") {
		t.Errorf("--help does not say that --summary's seconds are strace -w -c's:\n%s", help)
	}
}

// straceSeconds reads the seconds column of strace -C's summary table.
func straceSeconds(t *testing.T, log string) map[string]float64 {
	t.Helper()
	seconds := map[string]float64{}
	in := false
	eachLogLine(t, log, func(line string) {
		if strings.HasPrefix(line, "% time") {
			in = true
			return
		}
		f := strings.Fields(line)
		if !in || len(f) < 5 || strings.HasPrefix(line, "---") || f[len(f)-1] == "total" {
			return
		}
		s, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			t.Fatalf("summary line %q", line)
		}
		seconds[f[len(f)-1]] = s
	})
	return seconds
}

// TestSyscallsFiltersLiveAsInLogs: --comm and --since/--until select the
// same calls live as in a log of the same workload. The script opens one
// file three times with cat, sleeps 3 s, then opens another four times
// with head and once with cat; the window starts in the sleep, 1.5 s in:
// the three cats under strace -f took more than 0.6 s once, beside the
// other packages' tests (make test), when the script slept 1 s.
func TestSyscallsFiltersLiveAsInLogs(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "strace", "cat", "head", "sleep")
	dir := t.TempDir()
	early, late := filepath.Join(dir, "early"), filepath.Join(dir, "late")
	for _, f := range []string{early, late} {
		if err := os.WriteFile(f, []byte("data\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(dir, "work.sh")
	body := fmt.Sprintf("#!/bin/sh\nfor i in 1 2 3; do cat %s >/dev/null; done\nsleep 3\nfor i in 1 2 3 4; do head -c 1 %s >/dev/null; done\ncat %s >/dev/null\n", early, late, late)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "trace.log")
	if msg, err := exec.Command("strace", "-f", "-tt", "-T", "-y", "-o", log, script).CombinedOutput(); err != nil {
		t.Fatalf("strace: %v\n%s", err, msg)
	}
	// Opens are sent whole and kept or dropped in user space; bytes
	// read are counted in the kernel, which applies the window itself.
	opens := func(r *profile.SyscallReport) (map[string]int, map[string]int64) {
		m, b := map[string]int{}, map[string]int64{}
		for _, f := range r.Files {
			if f.Target == early || f.Target == late {
				m[filepath.Base(f.Target)], b[filepath.Base(f.Target)] = f.Opens, f.BytesRead
			}
		}
		return m, b
	}
	calls := func(r *profile.SyscallReport, name string) int {
		for _, s := range r.Syscalls {
			if s.Name == name {
				return s.Calls
			}
		}
		return 0
	}
	for _, c := range []struct {
		flags  []string
		opens  map[string]int
		bytes  map[string]int64 // "data\n" by cat, one byte by head -c 1
		execs  int              // successful or not: the shell's PATH lookups fail first
		procs  int
		reason string
	}{
		{[]string{"--comm", "cat"}, map[string]int{"early": 3, "late": 1}, map[string]int64{"early": 15, "late": 5}, 4, 4, "the four cats, from their exec on"},
		{[]string{"--comm", "he?d", "--file", late}, map[string]int{"late": 4}, map[string]int64{"late": 4}, 0, 4, "the four heads' opens of late"},
		{[]string{"--since", "1.5", "--until", "60"}, map[string]int{"late": 5}, map[string]int64{"late": 9}, -1, -1, "from the sleep's middle on"},
	} {
		for source, r := range map[string]*profile.SyscallReport{
			"log":  logReport(t, append(c.flags, log)...),
			"live": liveReport(t, append(c.flags, "--", script)...),
		} {
			if got, bytes := opens(r); !maps.Equal(got, c.opens) || !maps.Equal(bytes, c.bytes) {
				t.Errorf("%s %v (%s): opens %v and bytes read %v, want %v and %v", source, c.flags, c.reason, got, bytes, c.opens, c.bytes)
			}
			if c.execs >= 0 && calls(r, "execve") != c.execs {
				t.Errorf("%s %v (%s): %d execve, want %d", source, c.flags, c.reason, calls(r, "execve"), c.execs)
			}
			if c.procs >= 0 && len(r.Processes) != c.procs {
				t.Errorf("%s %v (%s): %d processes, want %d", source, c.flags, c.reason, len(r.Processes), c.procs)
			}
		}
	}
	// Combinations the kernel side cannot honour are refused in one line.
	for _, args := range [][]string{
		{"syscalls", "--comm", "cat", "--timeline", "1", "--", "true"},
		{"syscalls", "--comm", "cat", "-p", "1", log},
		{"syscalls", "--comm", "a/b", log},
	} {
		out, err := exec.Command(e2e.Fusescope, args...).CombinedOutput()
		if err == nil || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Errorf("%v: want one line and a failure, got %v:\n%s", args, err, out)
		}
	}
}
