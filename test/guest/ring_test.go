package guest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// passthroughHP is libfuse 3.18's passthrough_hp: in a guest where
// test/kernels/run.sh copied it (with its libraries), on the host where
// scripts/libfuse-examples.sh built it; "" where neither.
func passthroughHP() string {
	p := "/hp/example/passthrough_hp"
	if !inGuest {
		p, _ = filepath.Abs(filepath.Join("..", "..", ".cache", "libfuse", "build", "example", "passthrough_hp"))
	}
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// FUSE over io_uring: libfuse's passthrough_hp on its ring, traced with
// --stages on the tracepoints (tp_btf: the functions' split, which 6.12 to
// 6.17 take where they have fentry, has no ring programs). Every request
// came over the ring, and each is split into its three stages, adding up
// to its total: on 6.14 to 6.17 from io_uring's completion and submission
// with requests found by their address, on 6.18 by their id, on 7.3 with
// fuse_request_sent ending the queue.
func TestStagesRing(t *testing.T) {
	machine(t)
	const param = "/sys/module/fuse/parameters/enable_uring"
	was, err := os.ReadFile(param)
	if err != nil {
		t.Skipf("kernel %s has no FUSE over io_uring", release)
	}
	hp := passthroughHP()
	if hp == "" {
		t.Skip("no passthrough_hp (scripts/libfuse-examples.sh builds it; test/kernels/run.sh copies it into the guests)")
	}
	if err := os.WriteFile(param, []byte("Y"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.WriteFile(param, []byte(strings.TrimSpace(string(was))), 0o644)
	dir := t.TempDir()
	src, mnt := filepath.Join(dir, "src"), filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	files(t, src, 20)
	daemon := exec.Command(hp, "--foreground", "--nocache", "--nopassthrough", "-o", "io_uring", src, mnt)
	var out strings.Builder
	daemon.Stdout, daemon.Stderr = &out, &out
	if err := daemon.Start(); err != nil {
		t.Fatalf("passthrough_hp: %v", err)
	}
	defer func() {
		unix.Unmount(mnt, 0)
		daemon.Wait()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !isMount(mnt) {
		if time.Now().After(deadline) {
			daemon.Process.Kill()
			t.Fatalf("passthrough_hp did not mount in 10 s:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); err != nil {
		t.Fatal(err)
	}
	conn := unix.Minor(st.Dev)
	rec := filepath.Join(dir, "rec.json")
	steps := []string{"stat:" + mnt + ":20", fmt.Sprintf("idle:%d", conn)}
	r := runFusescopeEnv(workload(steps...), "trace", "--stages", "--attach", "tp_btf", "--mount", mnt, "--no-hist", "-o", rec, "--", self(t))
	if r.exit != 0 {
		t.Fatalf("%v", r)
	}
	var n uint64
	for _, op := range readRecord(t, rec).Profile.Ops {
		if op.Conn != conn {
			continue
		}
		n += op.Count
		var sum uint64
		for _, s := range op.Stages {
			if s.Latency.Count != op.Count {
				t.Errorf("kernel %s, %s: stage %s counts %d of %d requests", release, op.Op, s.Stage, s.Latency.Count, op.Count)
			}
			sum += s.Latency.Sum
		}
		if len(op.Stages) != 3 || sum != op.Latency.Sum {
			t.Errorf("kernel %s, %s: %d stages summing to %d ns, total %d ns", release, op.Op, len(op.Stages), sum, op.Latency.Sum)
		}
		if op.URing != op.Count {
			t.Errorf("kernel %s, %s: %d of %d requests over the ring", release, op.Op, op.URing, op.Count)
		}
	}
	if n < 40 { // a LOOKUP and a GETATTR a file at least
		t.Errorf("kernel %s: %d requests traced, want at least 40", release, n)
	}
	t.Logf("kernel %s: %d requests over passthrough_hp's ring, every one split", release, n)
}
