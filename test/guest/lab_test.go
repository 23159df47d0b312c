package guest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// result is one run of fusescope.
type result struct {
	args           []string
	exit           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("fusescope %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.exit, r.stdout, r.stderr)
}

// runFusescope runs fusescope to its end (two minutes at most: what a
// guest under emulation may need), with extra environment for the
// workload it starts.
func runFusescope(args ...string) result { return runFusescopeEnv(nil, args...) }

func runFusescopeEnv(env []string, args ...string) result {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, fusescopeBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.exit = exit.ExitCode()
	case err != nil:
		r.exit, r.stderr = -1, r.stderr+err.Error()
	}
	return r
}

// machine skips a test where this machine cannot run it (TestMain said
// why, once).
func machine(t *testing.T) {
	t.Helper()
	if onlyDocs {
		t.Skip("not root, or no FUSE")
	}
}

// verifierText matches what the BPF verifier and the Go runtime print:
// neither should reach a user.
var verifierText = regexp.MustCompile(`processed \d+ insns|\bR\d+(_w)?=|invalid func|poisoned by CO-RE|unknown#\d+|\(\d\d\) (call|r\d)|goroutine \d+ \[|^panic: `)

// classify says what fusescope did: flag is the feature's option, which a
// refusal may name instead of the kernel release.
func classify(r result, flag string) Support {
	if r.exit == 0 {
		if verifierText.MatchString(r.stderr) {
			return Noisy
		}
		return Works
	}
	msg := strings.TrimSpace(r.stderr + r.stdout)
	oneLine := msg != "" && !strings.Contains(msg, "\n")
	names := strings.Contains(msg, "kernel "+release) || flag != "" && strings.Contains(msg, flag)
	if oneLine && names && strings.HasPrefix(msg, "fusescope: ") && !verifierText.MatchString(msg) {
		return Refused
	}
	return Fails
}

// expect holds a run of a feature to the kernel's row, and says whether
// its oracle applies: it ran, and the row does not know it to measure
// wrong. check is the same with the oracle in hand.
//
//lint:ignore U1000 for the tests of features that leave known-wrong rows aside
func expect(t *testing.T, f Feature, flag string, r result) bool {
	t.Helper()
	o := check(t, f, flag, r)
	if o != nil && o.knownWrong() {
		t.Logf("kernel %s: %s runs, and measures wrong as its row says", release, f)
		return false
	}
	return o != nil
}

// check holds a run of a feature to the kernel's row and, where the
// feature ran (exit 0), gives the oracle its test holds it to; nil where
// it did not run. A feature that works where its row says it does not is
// an error, and its oracle still runs, so that the run says whether the
// entry may be updated.
func check(t *testing.T, f Feature, flag string, r result) *oracle {
	t.Helper()
	want, got := row.Support[f], classify(r, flag)
	if want == Wrong {
		want = Works // it runs; its oracle says the rest
	}
	ran := got == Works || got == Noisy
	if got != want {
		hint := "fusescope regressed, or the row is wrong"
		if got == Works || want == Fails || want == Refused && got == Noisy {
			hint = "if that is the fix landing, update the entry"
		}
		t.Errorf("kernel %s (row %s of test/guest/kernels.go): %s %s, the row says %s (%s)\n%s", release, rowKey, f, got, row.Support[f], hint, r)
		if !ran {
			t.FailNow()
		}
	} else if !ran {
		t.Logf("kernel %s: %s %s as its row says: %s", release, f, got, firstLine(r.stderr+r.stdout))
	}
	if !ran {
		return nil
	}
	return &oracle{t: t, f: f}
}

// oracle takes what a feature's test finds wrong with its measurements:
// failures of the test, unless the kernel's row says the feature measures
// wrong (a known bug), where the test expects at least one. done says
// which; a test defers it.
type oracle struct {
	t      *testing.T
	f      Feature
	wrongs []string
	ended  bool
}

// reporter is where the checks shared by several tests report.
type reporter interface {
	Errorf(format string, args ...any)
}

func (o *oracle) knownWrong() bool { return row.Support[o.f] == Wrong }

func (o *oracle) Errorf(format string, args ...any) {
	o.t.Helper()
	if o.knownWrong() {
		o.wrongs = append(o.wrongs, fmt.Sprintf(format, args...))
		return
	}
	o.t.Errorf(format, args...)
}

func (o *oracle) Fatalf(format string, args ...any) {
	o.t.Helper()
	if !o.knownWrong() {
		o.t.Fatalf(format, args...)
	}
	o.Errorf(format, args...)
	o.done()
	runtime.Goexit()
}

func (o *oracle) done() {
	o.t.Helper()
	if o.ended || !o.knownWrong() {
		return
	}
	o.ended = true
	if len(o.wrongs) == 0 {
		o.t.Errorf("kernel %s (row %s of test/guest/kernels.go): %s measures right, the row says wrong (if that is the fix landing, update the entry)", release, rowKey, o.f)
		return
	}
	o.t.Logf("kernel %s: %s wrong as its row says: %s", release, o.f, strings.Join(o.wrongs, "; "))
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}

// lab is a mounted lab file system.
type lab struct {
	src, mnt string
	conn     uint32
}

// idle is the workload step that waits for the mount's requests to end.
func (l *lab) idle() string { return fmt.Sprintf("idle:%d", l.conn) }

// mountLab mounts the lab file system over a new directory with the given
// options, and unmounts it when the test ends, checking that its daemon
// went with it.
func mountLab(t *testing.T, opts ...string) *lab {
	t.Helper()
	dir := t.TempDir()
	l := &lab{src: filepath.Join(dir, "src"), mnt: filepath.Join(dir, "mnt")}
	os.Mkdir(l.src, 0o755)
	os.Mkdir(l.mnt, 0o755)
	args := append([]string{"fs", "mount", l.src, l.mnt, "--background"}, opts...)
	if r := runFusescope(args...); r.exit != 0 {
		t.Fatalf("%v", r)
	}
	t.Cleanup(func() {
		if r := runFusescope("fs", "umount", l.mnt); r.exit != 0 {
			t.Errorf("%v", r)
		}
		if isMount(l.mnt) {
			t.Errorf("%s is still mounted", l.mnt)
			unix.Unmount(l.mnt, unix.MNT_DETACH)
		}
	})
	var st unix.Stat_t
	if err := unix.Stat(l.mnt, &st); err != nil {
		t.Fatal(err)
	}
	l.conn = unix.Minor(st.Dev)
	return l
}

// isMount: path is a mount point in /proc/self/mountinfo.
func isMount(path string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

// files makes n files f000... of one line each in dir (made if needed).
func files(t *testing.T, dir string, n int) {
	t.Helper()
	os.MkdirAll(dir, 0o755)
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i)), []byte("data\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// pages makes a file of n pages of 4 KiB.
func pages(t *testing.T, path string, n int) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, bytes.Repeat([]byte{'x'}, n*pageSize), 0o644); err != nil {
		t.Fatal(err)
	}
}

const pageSize = 4096

// daemonCounts is the lab daemon's own count of the requests it served,
// by opcode (fusescope fs stats).
func daemonCounts(t *testing.T, l *lab) map[string]uint64 {
	t.Helper()
	r := runFusescope("fs", "stats", "--json", l.mnt)
	if r.exit != 0 {
		t.Fatalf("%v", r)
	}
	var rec record
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		t.Fatalf("fs stats --json: %v\n%s", err, r.stdout)
	}
	out := map[string]uint64{}
	for _, o := range rec.Profile.Ops {
		out[o.Op] += o.Count
	}
	return out
}

// record is the part of fusescope's record (docs/record.md) the tests
// read, declared here rather than taken from fusescope's packages.
type record struct {
	Meta struct {
		Kernel string `json:"kernel"`
	} `json:"meta"`
	Profile struct {
		Ops []struct {
			Conn    uint32 `json:"conn"`
			Op      string `json:"op"`
			Count   uint64 `json:"count"`
			Errors  uint64 `json:"errors"`
			URing   uint64 `json:"uring"`
			Latency hist   `json:"latency"`
			Stages  []struct {
				Stage   string `json:"stage"`
				Latency hist   `json:"latency"`
			} `json:"stages"`
		} `json:"ops"`
	} `json:"profile"`
	Findings *struct {
		Findings []struct {
			Rule     string   `json:"rule"`
			Evidence []string `json:"evidence"`
		} `json:"findings"`
		Undecided []struct {
			Rule string `json:"rule"`
		} `json:"undecided"`
	} `json:"findings"`
	Files []struct {
		Conn    uint32 `json:"conn"`
		Path    string `json:"path"`
		Count   uint64 `json:"count"`
		TotalNs uint64 `json:"total_ns"`
	} `json:"files"`
	PageCache []struct {
		Conn      uint32 `json:"conn"`
		Reads     uint64 `json:"reads"`
		ReadPages uint64 `json:"read_pages"`
		Added     uint64 `json:"added"`
	} `json:"page_cache"`
	Calls []struct {
		Syscall      string `json:"syscall"`
		Count        uint64 `json:"count"`
		Errors       uint64 `json:"errors"`
		WithRequests uint64 `json:"with_requests"`
		Requests     uint64 `json:"requests"`
	} `json:"calls"`
	Hung []struct {
		Op         string `json:"op"`
		AgeNs      uint64 `json:"age_ns"`
		MountPoint string `json:"mount_point"`
	} `json:"hung"`
}

type hist struct {
	Count uint64 `json:"count"`
	Sum   uint64 `json:"sum"`
	Min   uint64 `json:"min"`
	Max   uint64 `json:"max"`
}

func readRecord(t *testing.T, path string) record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rec
}

// counts is a record's requests on one connection by opcode.
func (r record) counts(conn uint32) map[string]uint64 {
	out := map[string]uint64{}
	for _, o := range r.Profile.Ops {
		if o.Conn == conn {
			out[o.Op] += o.Count
		}
	}
	return out
}

// csvRows reads trace --csv's rows as maps by column name.
func csvRows(t *testing.T, text string) []map[string]string {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	if err != nil || len(rows) == 0 {
		t.Fatalf("trace --csv: %v\n%s", err, text)
	}
	var out []map[string]string
	for _, row := range rows[1:] {
		m := map[string]string{}
		for i, name := range rows[0] {
			if i < len(row) {
				m[name] = row[i]
			}
		}
		out = append(out, m)
	}
	return out
}

// csvNs is a row's column in nanoseconds.
func csvNs(t *testing.T, row map[string]string, col string) time.Duration {
	t.Helper()
	v, err := strconv.ParseFloat(row[col], 64)
	if err != nil {
		t.Fatalf("column %s: %q", col, row[col])
	}
	return time.Duration(v)
}

// workload is the environment that makes this test binary, started by
// fusescope trace -- (self), run the steps instead of tests.
func workload(steps ...string) []string {
	return []string{envHelper + "=" + strings.Join(steps, " ")}
}

// self is this test binary, for trace's -- CMD.
func self(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// runWorkload runs steps, each VERB:ARG[:N], one system call per file
// and call (not os's, which adds an fstat to each open):
//
//	stat:DIR:N    stat DIR/f000 ... DIR/f{N-1}
//	read:FILE     read FILE 4 KiB a call to its end
//	write:FILE:N  create FILE and write it N times 4 KiB
//	statfs:PATH   statfs PATH
//	idle:CONN     wait until no request is in flight on FUSE connection
//	              CONN (the RELEASE a close sends goes in the background)
func runWorkload(steps []string) error {
	for _, step := range steps {
		verb, arg, _ := strings.Cut(step, ":")
		switch verb {
		case "stat":
			dir, n, _ := strings.Cut(arg, ":")
			count, err := strconv.Atoi(n)
			if err != nil {
				return fmt.Errorf("step %q: %v", step, err)
			}
			var st unix.Stat_t
			for i := range count {
				if err := unix.Stat(filepath.Join(dir, fmt.Sprintf("f%03d", i)), &st); err != nil {
					return err
				}
			}
		case "read":
			fd, err := unix.Open(arg, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("open %s: %w", arg, err)
			}
			buf := make([]byte, pageSize)
			for {
				n, err := unix.Read(fd, buf)
				if err != nil {
					return fmt.Errorf("read %s: %w", arg, err)
				}
				if n == 0 {
					break
				}
			}
			if err := unix.Close(fd); err != nil {
				return err
			}
		case "write":
			file, n, _ := strings.Cut(arg, ":")
			count, err := strconv.Atoi(n)
			if err != nil {
				return fmt.Errorf("step %q: %v", step, err)
			}
			fd, err := unix.Open(file, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
			if err != nil {
				return fmt.Errorf("create %s: %w", file, err)
			}
			buf := make([]byte, pageSize)
			for range count {
				if _, err := unix.Write(fd, buf); err != nil {
					unix.Close(fd)
					return fmt.Errorf("write %s: %w", file, err)
				}
			}
			if err := unix.Close(fd); err != nil {
				return err
			}
		case "statfs":
			var st unix.Statfs_t
			if err := unix.Statfs(arg, &st); err != nil {
				return err
			}
		case "idle":
			if err := waitIdle(arg); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unknown step %q", step)
		}
	}
	return nil
}

// waitIdle polls a connection's waiting count (fusectl) until it is 0.
func waitIdle(conn string) error {
	path := fmt.Sprintf("/sys/fs/fuse/connections/%s/waiting", conn)
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("%v (fusectl mounted?)", err)
		}
		if strings.TrimSpace(string(b)) == "0" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: still %s after 20 s", path, strings.TrimSpace(string(b)))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// jsonLines reads the records of an interval trace's --json, a line each.
func jsonLines(t *testing.T, text string) []record {
	t.Helper()
	var out []record
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("trace --json line: %v\n%s", err, sc.Text())
		}
		out = append(out, r)
	}
	return out
}

// ignoredOps have no reply, so no fuse_request_end: the daemon counts
// them, the trace cannot.
var ignoredOps = map[string]bool{"FORGET": true, "BATCH_FORGET": true, "INTERRUPT": true}

// sameCounts compares two counts by opcode.
func sameCounts(a, b map[string]uint64) error {
	var diffs []string
	for op := range union(a, b) {
		if !ignoredOps[op] && a[op] != b[op] {
			diffs = append(diffs, fmt.Sprintf("%s %d against %d", op, a[op], b[op]))
		}
	}
	if len(diffs) > 0 {
		return errors.New(strings.Join(diffs, ", "))
	}
	return nil
}

func union(a, b map[string]uint64) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// sub is after less before, by opcode.
func sub(after, before map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}
