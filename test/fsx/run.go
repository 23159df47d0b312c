package fsx

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Config is one run.
type Config struct {
	Path   string // the file to test; made empty first
	Seed   uint64
	Ops    int
	Procs  int // 1, or 2: each operation done by either process
	Limits Limits
	Kinds  []Kind // the operations to choose from; empty: all
	// Worker returns a command that runs ServeWorker on its standard
	// input and output: the second process.
	Worker func() *exec.Cmd `json:"-"`
	// FullCheckEvery compares the whole file with the model every this many
	// operations (0: 1000), besides the end of the run.
	FullCheckEvery int
	// Backing is the file's path on the backing file system (a FUSE
	// mount's source), compared with the model once the run has closed
	// the file: nothing acknowledged may be lost. Empty: not compared.
	Backing string
	// ShrinkBudget bounds the time spent finding the shortest failing
	// prefix (0: 2 minutes).
	ShrinkBudget time.Duration
}

// Stats counts what a run did.
type Stats struct {
	Ops       int   // operations of the sequence done
	Checks    int   // reads made to compare with the model, besides the sequence's own
	Bytes     int64 // bytes read and written, checks included
	MaxSize   int64 // the file's largest size
	ByKind    [numKinds]int
	Duration  time.Duration
	Replays   int // runs of prefixes while shrinking
	Reproduce bool
}

// Failure is a difference between the file and the model.
type Failure struct {
	Seed   uint64
	Op     Op     // the operation after which it showed
	What   string // what differed
	Prefix int    // the shortest failing prefix found: ops 0 to Prefix-1
	Tail   []Op   // the prefix's last operations
	Note   string // how the prefix was found
}

func (f *Failure) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fsx: seed %d: after %v: %s\n", f.Seed, f.Op, f.What)
	fmt.Fprintf(&b, "fsx: shortest failing prefix: the first %d operations (%s); its last ones:\n", f.Prefix, f.Note)
	for _, op := range f.Tail {
		fmt.Fprintf(&b, "    %v\n", op)
	}
	return strings.TrimRight(b.String(), "\n")
}

// Run does the sequence of cfg.Seed and returns what it did and the first
// difference from the model, shrunk to the shortest failing prefix. err
// is for failures to run at all.
func Run(cfg Config) (Stats, *Failure, error) {
	if cfg.Limits == (Limits{}) {
		cfg.Limits = DefaultLimits
	}
	if cfg.FullCheckEvery <= 0 {
		cfg.FullCheckEvery = 1000
	}
	if cfg.ShrinkBudget <= 0 {
		cfg.ShrinkBudget = 2 * time.Minute
	}
	if cfg.Procs < 1 {
		cfg.Procs = 1
	}
	ops := Generate(cfg.Seed, cfg.Ops, cfg.Procs, cfg.Limits, cfg.Kinds)
	start := time.Now()
	st, fail, err := replay(cfg, ops, false)
	st.Duration = time.Since(start)
	if err != nil || fail == nil {
		return st, nil, err
	}
	fail.Seed = cfg.Seed
	shrink(cfg, ops, fail, &st)
	return st, fail, nil
}

// replay runs ops on a new empty file; with endCheck, the whole file is
// compared after the last operation too (what shrinking needs: a
// difference that the checks after each operation missed).
func replay(cfg Config, ops []Op, endCheck bool) (Stats, *Failure, error) {
	var st Stats
	if err := os.WriteFile(cfg.Path, nil, 0o644); err != nil {
		return st, nil, fmt.Errorf("fsx: making %s: %w", cfg.Path, err)
	}
	procs := make([]executor, cfg.Procs)
	closeAll := func() {
		for _, p := range procs {
			if p != nil {
				p.close()
			}
		}
	}
	defer closeAll()
	for i := range procs {
		var err error
		if i == 0 {
			procs[i], err = openLocal(cfg.Path)
		} else {
			if cfg.Worker == nil {
				return st, nil, fmt.Errorf("fsx: %d processes need a Worker command", cfg.Procs)
			}
			procs[i], err = startRemote(cfg.Worker(), cfg.Path)
		}
		if err != nil {
			return st, nil, err
		}
		if wrapExecutor != nil {
			procs[i] = wrapExecutor(procs[i])
		}
	}
	r := &runner{cfg: cfg, procs: procs, st: &st}
	for i, op := range ops {
		if f := r.step(op); f != nil {
			return st, f, nil
		}
		if (i+1)%cfg.FullCheckEvery == 0 {
			if f := r.full(op, (i/cfg.FullCheckEvery)%len(procs)); f != nil {
				return st, f, nil
			}
		}
	}
	last := Op{Index: len(ops) - 1, Kind: Fsync}
	if len(ops) > 0 {
		last = ops[len(ops)-1]
	}
	for p := range procs {
		if f := r.full(last, p); f != nil {
			return st, f, nil
		}
	}
	if endCheck {
		return st, nil, nil
	}
	// What was written reached the backing file by the last close.
	for _, p := range procs {
		if res := p.do(Op{Kind: Fsync}); res.Err != "" {
			return st, &Failure{Op: last, What: "fsync at the end: " + res.Err}, nil
		}
	}
	closeAll()
	procs = nil
	if cfg.Backing != "" {
		got, err := os.ReadFile(cfg.Backing)
		if err != nil {
			return st, nil, fmt.Errorf("fsx: reading the backing file: %w", err)
		}
		if d := diff(got, r.m.data, 0); d != "" {
			return st, &Failure{Op: last, What: "the backing file after the last close: " + d}, nil
		}
	}
	return st, nil, nil
}

// wrapExecutor, set by this package's tests, stands a file system that
// loses data between the runner and the file.
var wrapExecutor func(executor) executor

type runner struct {
	cfg   Config
	procs []executor
	m     model
	st    *Stats
}

// step does op and checks what it returned, the file's size as each
// process sees it, and the bytes around the range it changed.
func (r *runner) step(op Op) *Failure {
	before := r.m.size()
	res := r.procs[op.Proc].do(op)
	r.st.Ops++
	r.st.ByKind[op.Kind]++
	r.st.Bytes += int64(len(res.Data))
	if res.Err != "" {
		return &Failure{Op: op, What: res.Err}
	}
	switch op.Kind {
	case Read, Pread, MapRead:
		if d := diff(res.Data, r.m.read(op.Off, op.Len), op.Off); d != "" {
			return &Failure{Op: op, What: fmt.Sprintf("%s returned other bytes than the model: %s", op.Kind, d)}
		}
	case Write, Pwrite, MapWrite:
		r.st.Bytes += op.Len
	}
	r.m.apply(op)
	r.st.MaxSize = max(r.st.MaxSize, r.m.size())
	if res.Size != r.m.size() {
		return &Failure{Op: op, What: fmt.Sprintf("fstat by process %d: size %d, the model's %d", op.Proc, res.Size, r.m.size())}
	}
	lo, hi, ok := changed(op, before)
	if !ok {
		return nil
	}
	// Read back by the other process, if there is one: the start and the
	// end of the changed range, a byte beyond each (a read past the end of
	// the file returns less).
	other := (op.Proc + 1) % len(r.procs)
	const edge = 64 << 10
	if f := r.check(op, other, lo-1, min(edge, hi-lo)+2); f != nil || hi-lo <= edge {
		return f
	}
	return r.check(op, other, hi-edge, edge+1)
}

// check has process p read n bytes at off and compares them with the model.
func (r *runner) check(after Op, p int, off, n int64) *Failure {
	if off < 0 {
		off = 0
	}
	res := r.procs[p].do(Op{Index: -1, Kind: Pread, Off: off, Len: n})
	r.st.Checks++
	r.st.Bytes += int64(len(res.Data))
	if res.Err != "" {
		return &Failure{Op: after, What: fmt.Sprintf("reading back by process %d: %s", p, res.Err)}
	}
	if res.Size != r.m.size() {
		return &Failure{Op: after, What: fmt.Sprintf("fstat by process %d: size %d, the model's %d", p, res.Size, r.m.size())}
	}
	if d := diff(res.Data, r.m.read(off, n), off); d != "" {
		return &Failure{Op: after, What: fmt.Sprintf("reading %#x bytes at %#x back by process %d: %s", n, off, p, d)}
	}
	return nil
}

// full compares the whole file, as process p reads it, with the model.
func (r *runner) full(after Op, p int) *Failure {
	return r.check(after, p, 0, r.m.size()+1)
}

// diff describes how got differs from want, or "".
func diff(got, want []byte, base int64) string {
	if bytes.Equal(got, want) {
		return ""
	}
	n := min(len(got), len(want))
	i := 0
	for i < n && got[i] == want[i] {
		i++
	}
	if i == n {
		return fmt.Sprintf("%d bytes, want %d (the first %d agree): a short read, or data past the end", len(got), len(want), n)
	}
	j := i
	for j < n && got[j] != want[j] {
		j++
	}
	show := func(b []byte) string { return fmt.Sprintf("% x", b[i:min(i+16, len(b))]) }
	zeros := ""
	if got[i] == 0 {
		zeros = " (zeros: a hole, or a lost write)"
	}
	return fmt.Sprintf("%d bytes differ from file offset %#x on (%d bytes read, want %d): got %s, want %s%s",
		j-i, base+int64(i), len(got), len(want), show(got), show(want), zeros)
}

// shrink finds the shortest failing prefix: the failure showed after
// fail.Op, and a prefix that ends before the operation that broke the file
// can only fail at its end check. Prefixes are replayed with a whole-file
// comparison at their end, by bisection, within the time budget.
func shrink(cfg Config, ops []Op, fail *Failure, st *Stats) {
	deadline := time.Now().Add(cfg.ShrinkBudget)
	hi := fail.Op.Index + 1 // fails
	fails := func(k int) bool {
		st.Replays++
		_, f, err := replay(cfg, ops[:k], true)
		if f != nil && f.Op.Index+1 < k {
			hi = f.Op.Index + 1 // failed earlier than its end
		}
		return err == nil && f != nil
	}
	if !fails(hi) {
		fail.Prefix = hi
		fail.Note = "not reproduced by a replay of it: the failure depends on timing"
		fail.Tail = ops[max(0, hi-8):hi]
		return
	}
	st.Reproduce = true
	lo := 0 // a prefix this short passes (the empty one does)
	for lo+1 < hi && time.Now().Before(deadline) {
		mid := (lo + hi) / 2
		if fails(mid) {
			hi = min(hi, mid)
		} else {
			lo = mid
		}
	}
	fail.Prefix = hi
	fail.Note = fmt.Sprintf("replayed %d times", st.Replays)
	if lo+1 < hi {
		fail.Note += fmt.Sprintf("; bisection stopped at the time budget, the shortest is %d to %d", lo+1, hi)
	}
	fail.Tail = ops[max(0, hi-8):hi]
}
