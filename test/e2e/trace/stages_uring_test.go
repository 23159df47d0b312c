package trace

import (
	"debug/elf"
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
	"github.com/fusescope/fusescope/internal/labfs"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/test/e2e"
	"github.com/fusescope/fusescope/test/proctest"
)

// libfuseSymbol is the address of the function of libfuse that passthrough_hp
// runs with whose name begins with prefix (the compiler may have renamed a
// static function, as fuse_uring_commit_sqe.isra.0), and the library's path.
func libfuseSymbol(t *testing.T, prefix string) (lib string, addr uint64) {
	t.Helper()
	lib, err := filepath.EvalSymlinks(filepath.Join(filepath.Dir(e2e.LibfuseExample(t, "passthrough_hp")), "..", "lib", "libfuse3.so.4"))
	if err != nil {
		t.Fatalf("passthrough_hp's libfuse: %v", err)
	}
	f, err := elf.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatalf("%s: %v", lib, err)
	}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 && (s.Name == prefix || strings.HasPrefix(s.Name, prefix+".")) {
			return lib, s.Value
		}
	}
	t.Fatalf("%s has no function %s", lib, prefix)
	return "", 0
}

var daemonLine = regexp.MustCompile(`^@(n|sum)\[(\d+)\]: (\d+)$`)

// The ring's daemon stage against the daemon's own timing. passthrough_hp
// on its ring serves a lab file system that delays every operation by 2
// ms, so each request's time is the daemon's. bpftrace's uprobes in its
// libfuse time, per request, from the start of its handling of the ring's
// completion (fuse_session_process_uring_cqe) to its commit of the reply
// (fuse_uring_commit_sqe): code and probes that share nothing with
// fusescope's programs on io_uring's tracepoints. Per opcode the counts
// are equal; fusescope's daemon stage, which also holds the completion's
// way to the daemon's code and the commit's submission, is at least the
// daemon's own time and exceeds it by little; the injected delay is in it,
// not in the queue.
func TestStagesIOURingAgainstDaemon(t *testing.T) {
	// Not parallel: it changes fuse's enable_uring, every mount's.
	e2e.Need(t, "bpftrace")
	e2e.HoldURing(t)
	e2e.SetURing(t, "Y")
	const delay = 2 * time.Millisecond
	cfg := e2e.Preset(t, "nocache")
	cfg.Latency = labfs.LatencySpec{"*": {Base: delay}}
	_, backing, _ := e2e.MountLabFS(t, cfg)
	const files = 20
	for i := range files {
		if err := os.WriteFile(filepath.Join(backing, fmt.Sprintf("f%02d", i)), []byte("data\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mnt := t.TempDir()
	e2e.MountDaemon(t, mnt, e2e.LibfuseExample(t, "passthrough_hp"), "--nocache", "--nopassthrough", "-o", "io_uring", backing, mnt)
	conn := e2e.ConnOf(t, mnt)
	lib, process := libfuseSymbol(t, "fuse_session_process_uring_cqe")
	_, commit := libfuseSymbol(t, "fuse_uring_commit_sqe")
	// The third argument is the request's fuse_in_header: its opcode at 4.
	prog := fmt.Sprintf(`uprobe:%[1]s:%#[2]x { @start[tid] = nsecs; @op[tid] = *(uint32 *)(arg2 + 4); }
uprobe:%[1]s:%#[3]x /@start[tid]/ { @n[@op[tid]] = count(); @sum[@op[tid]] = sum(nsecs - @start[tid]); delete(@start[tid]); delete(@op[tid]); }
END { clear(@start); clear(@op); }`, lib, process, commit) + proctest.BpftraceReady

	e2e.Timed(t, 3, func() (stretched []string) {
		oracle := proctest.StartBpftrace(t, exec.Command("bpftrace", "-e", prog), 60*time.Second)
		rec := filepath.Join(t.TempDir(), "staged.json")
		tr := e2e.StartTrace(t, "--mount", mnt, "--stages", "-o", rec)
		for i := range files {
			if _, err := os.Stat(filepath.Join(mnt, fmt.Sprintf("f%02d", i))); err != nil {
				t.Fatal(err)
			}
		}
		e2e.WaitIdle(t, conn)
		tr.Stop(t)
		oracle.Interrupt(t, 30*time.Second)
		own := map[string][2]uint64{} // opcode name: count, sum of ns
		for _, line := range strings.Split(oracle.Output(), "\n") {
			m := daemonLine.FindStringSubmatch(strings.TrimSpace(line))
			if m == nil {
				continue
			}
			op, _ := strconv.ParseUint(m[2], 10, 32)
			v, _ := strconv.ParseUint(m[3], 10, 64)
			name := fuseproto.Opcode(op).String()
			cur := own[name]
			if m[1] == "n" {
				cur[0] = v
			} else {
				cur[1] = v
			}
			own[name] = cur
		}
		var lookups uint64
		for _, s := range e2e.LoadRecord(t, rec).Profile.Ops {
			if s.Conn != conn {
				continue
			}
			q, d := s.Stage(profile.StageQueue), s.Stage(profile.StageDaemon)
			if d == nil || d.Count != s.Count || s.URing != s.Count {
				t.Errorf("%s: %d requests, %d over the ring, daemon stage %v: want every one over the ring and split", s.Op, s.Count, s.URing, d)
				continue
			}
			n, sum := own[s.Op][0], own[s.Op][1]
			if n != s.Count {
				t.Errorf("%s: fusescope split %d requests over the ring, the daemon's libfuse handled %d", s.Op, s.Count, n)
				continue
			}
			t.Logf("%s: %d requests, daemon stage mean %v, the daemon's own mean %v, queue mean %v", s.Op, n,
				time.Duration(d.Sum/n), time.Duration(sum/n), time.Duration(q.Sum/n))
			if d.Sum < sum {
				t.Errorf("%s: the daemon stage (%v in all) is shorter than the daemon's own time inside it (%v)", s.Op, time.Duration(d.Sum), time.Duration(sum))
			}
			if extra := time.Duration((d.Sum - min(d.Sum, sum)) / n); extra > 300*time.Microsecond {
				stretched = append(stretched, e2e.Stretched("%s: the daemon stage exceeds the daemon's own time by %v a request", s.Op, extra))
			}
			if s.Op == "LOOKUP" {
				lookups = n
				if time.Duration(d.Sum/n) < delay {
					t.Errorf("LOOKUP: daemon stage mean %v, under the %v its backend delays each", time.Duration(d.Sum/n), delay)
				}
				if time.Duration(q.Sum/n) >= delay {
					stretched = append(stretched, e2e.Stretched("LOOKUP: queue mean %v, the delay's own size", time.Duration(q.Sum/n)))
				}
			}
		}
		if lookups < files {
			t.Errorf("%d LOOKUPs over the ring, want at least %d (a stat of each file)", lookups, files)
		}
		return stretched
	})
}
