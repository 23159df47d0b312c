package fsx

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	if os.Getenv("FSX_TEST_WORKER") != "" {
		if err := ServeWorker(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func worker() *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "FSX_TEST_WORKER=1")
	return cmd
}

// The model agrees with a native file system, with one process and with
// two: a failure here is the model's.
func TestNativeAgreesWithModel(t *testing.T) {
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprintf("procs=%d", procs), func(t *testing.T) {
			dir := t.TempDir()
			st, fail, err := Run(Config{Path: filepath.Join(dir, "f"), Seed: 42, Ops: 3000, Procs: procs, Worker: worker,
				FullCheckEvery: 250})
			if err != nil {
				t.Fatal(err)
			}
			if fail != nil {
				t.Fatalf("native file system:\n%v", fail)
			}
			t.Logf("%d operations, %d checks, %.0f MiB, largest file %d bytes, %v; by kind %v", st.Ops, st.Checks, float64(st.Bytes)/(1<<20), st.MaxSize, st.Duration, st.ByKind)
			for k, n := range st.ByKind {
				if n == 0 {
					t.Errorf("no %v in 3,000 operations", Kind(k))
				}
			}
			if st.MaxSize < 4<<20 {
				t.Errorf("the file grew to %d bytes only, want several MiB", st.MaxSize)
			}
		})
	}
}

// The same seed gives the same sequence; another seed another.
func TestGenerateIsDeterministic(t *testing.T) {
	a, b, c := Generate(7, 500, 2, DefaultLimits, nil), Generate(7, 500, 2, DefaultLimits, nil), Generate(8, 500, 2, DefaultLimits, nil)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Error("seed 7 gave two sequences")
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Error("seeds 7 and 8 gave one sequence")
	}
	for _, op := range a {
		if op.Off < 0 || op.Len < 0 || op.Off+op.Len > DefaultLimits.MaxLen+DefaultLimits.MaxOpLen || op.Proc > 1 {
			t.Fatalf("out of bounds: %v", op)
		}
		if op.Kind == CopyRange && op.Dst < op.Off+op.Len && op.Off < op.Dst+op.Len {
			t.Fatalf("a copy onto itself: %v", op)
		}
	}
}

// corrupting loses one byte in the middle of one large write, where the
// reads after that write do not look: only a later read or a whole-file
// comparison sees it.
type corrupting struct {
	executor
	at  int
	off int64
}

func (c corrupting) do(op Op) Result {
	res := c.executor.do(op)
	if op.Index == c.at {
		if l, ok := c.executor.(*local); ok {
			unix.Pwrite(l.fd, []byte{0}, c.off)
		}
	}
	return res
}

// A lost byte is found, and the failing prefix is shrunk to end with the
// write that lost it, however much later it showed.
func TestFindsAndShrinksALostWrite(t *testing.T) {
	const seed = 3
	ops := Generate(seed, 4000, 1, DefaultLimits, nil)
	// A large write whose middle byte no later operation of the next 50
	// changes, and that is still in the file after them.
	target, off, n := -1, int64(0), 0
	for _, op := range ops {
		if op.Index < 200 || op.Kind != Pwrite || op.Len < 1<<20 {
			continue
		}
		off, n = op.Off+op.Len/2, op.Index+50
		var m model
		survives := true
		for _, later := range ops[:n] {
			before := m.size()
			m.apply(later)
			if lo, hi, ok := changed(later, before); later.Index > op.Index && ok && lo <= off && off < hi {
				survives = false
			}
		}
		if survives && off < m.size() {
			target = op.Index
			break
		}
	}
	if target < 0 {
		t.Fatal("no large pwrite that stays in the file")
	}
	wrapExecutor = func(e executor) executor { return corrupting{e, target, off} }
	defer func() { wrapExecutor = nil }()
	st, fail, err := Run(Config{Path: filepath.Join(t.TempDir(), "f"), Seed: seed, Ops: n, FullCheckEvery: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if fail == nil {
		t.Fatal("a lost byte went unnoticed")
	}
	t.Logf("found after op %d, lost by op %d, %d replays:\n%v", fail.Op.Index, target, st.Replays, fail)
	if fail.Prefix != target+1 {
		t.Errorf("shortest failing prefix %d, want %d (through the write that lost the byte)", fail.Prefix, target+1)
	}
	if msg := fail.Error(); !strings.Contains(msg, "seed 3") || !strings.Contains(msg, fmt.Sprintf("#%d ", target)) {
		t.Errorf("the report names neither the seed nor the write:\n%s", msg)
	}
}

// fill copies the pattern that Pattern defines byte by byte.
func TestFillIsPattern(t *testing.T) {
	b := make([]byte, 3<<20+17)
	fill(b, 12345, 999)
	for i := range b {
		if b[i] != Pattern(12345, 999+int64(i)) {
			t.Fatalf("byte %d: %d, want %d", i, b[i], Pattern(12345, 999+int64(i)))
		}
	}
}
