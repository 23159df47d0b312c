package ktrace

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/option"
)

// load sets spec's constants and loads it into objs; what names the tracer
// in the one line a failure gives (kernelLacks).
func load(spec *ebpf.CollectionSpec, consts map[string]any, objs any, what string) error {
	for name, v := range consts {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("setting %s: %w", name, err)
		}
	}
	if err := spec.LoadAndAssign(objs, nil); err != nil {
		return loadError(err, what)
	}
	return nil
}

func loadError(err error, what string) error {
	return kernelLacks(err, "the "+what)
}

// LoadError is a program the running kernel would not load, said in one
// line: what it lacks, in fusescope's words, never the verifier's log
// (Unwrap has it, for FUSESCOPE_DEBUG). What names settings as {key}s
// (package option); a What that begins with one is that setting's
// programs, and the line says the rest of the trace works without it.
type LoadError struct {
	Release, What, Lacks string
	Err                  error
}

func (e *LoadError) sentence() *option.Error {
	if key, ok := leadingKey(e.What); ok {
		return option.Errorf("kernel %s cannot run %s: %s; leave out {%s} and the rest of the trace works", e.Release, e.What, e.Lacks, key)
	}
	return option.Errorf("kernel %s cannot run %s: %s", e.Release, e.What, e.Lacks)
}

// leadingKey is the {key} what begins with.
func leadingKey(what string) (string, bool) {
	rest, ok := strings.CutPrefix(what, "{")
	if !ok {
		return "", false
	}
	key, _, ok := strings.Cut(rest, "}")
	return key, ok
}

func (e *LoadError) Error() string { return e.sentence().Error() }

// Unwrap has the kernel's error, and the sentence for front ends that
// spell settings their own way (option.Reword).
func (e *LoadError) Unwrap() []error { return []error{e.sentence(), e.Err} }

// kernelLacks words a load failure of what (a feature and its programs).
func kernelLacks(err error, what string) error {
	e := &LoadError{Release: kernel.Release(), What: what, Err: err}
	var ve *ebpf.VerifierError
	log := ""
	if errors.As(err, &ve) {
		log = strings.Join(ve.Log, "\n")
	}
	switch {
	case strings.Contains(log, "poisoned by CO-RE") || strings.Contains(log, "unknown#195896080") ||
		strings.Contains(err.Error(), "relocat"):
		e.Lacks = "a kernel type it reads is laid out in a way this fusescope does not know (a CO-RE relocation failed)"
	case errors.Is(err, ebpf.ErrNotSupported) || strings.Contains(log, "unknown func"):
		e.Lacks = "a BPF feature it needs is missing from this kernel"
	case strings.Contains(err.Error(), "attach target") || strings.Contains(err.Error(), "find target") ||
		strings.Contains(log, "attach_btf_id"):
		e.Lacks = "the kernel function or tracepoint it attaches to is missing"
	case ve != nil:
		e.Lacks = "the kernel's verifier rejected it"
	default:
		e.Lacks = err.Error()
	}
	if os.Getenv("FUSESCOPE_DEBUG") != "" {
		e.Lacks += " (" + strings.ReplaceAll(err.Error()+" "+log, "\n", " | ") + ")"
	}
	return e
}

// loadParallel is load for a short run's set-up (the live system-call
// source): the maps are created while another goroutine decodes the
// kernel's BTF (~10 ms each on this machine), then each group of programs
// is verified in its own goroutine, so that the verifier runs on every
// CPU. One LoadAndAssign does all of it one after another.
func loadParallel(spec *ebpf.CollectionSpec, consts map[string]any, objs any, groups [][]string, what string) error {
	for name, v := range consts {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("setting %s: %w", name, err)
		}
	}
	cache := btf.NewCache()
	kernelBTF := make(chan error, 1)
	go func() {
		_, err := cache.Kernel()
		kernelBTF <- err
	}()
	mapsOnly := spec.Copy()
	mapsOnly.Programs = nil
	maps, err := ebpf.NewCollectionWithOptions(mapsOnly, ebpf.CollectionOptions{Cache: cache})
	if err != nil {
		<-kernelBTF
		return loadError(err, what)
	}
	defer maps.Close()
	if err := <-kernelBTF; err != nil {
		return loadError(err, what)
	}
	progs := make([]*ebpf.Collection, len(groups))
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i, group := range groups {
		one := spec.Copy()
		one.Programs = map[string]*ebpf.ProgramSpec{}
		for _, name := range group {
			if one.Programs[name] = spec.Programs[name]; one.Programs[name] == nil {
				return fmt.Errorf("internal error: no program %s", name)
			}
		}
		wg.Go(func() {
			progs[i], errs[i] = ebpf.NewCollectionWithOptions(one, ebpf.CollectionOptions{MapReplacements: maps.Maps, Cache: cache})
		})
	}
	wg.Wait()
	defer func() {
		for _, c := range progs {
			if c != nil {
				c.Close() // the maps' clones; the programs were assigned
			}
		}
	}()
	if err := errors.Join(errs...); err != nil {
		return loadError(err, what)
	}
	all := &ebpf.Collection{Maps: maps.Maps, Variables: maps.Variables, Programs: map[string]*ebpf.Program{}}
	for _, c := range progs {
		for name, p := range c.Programs {
			all.Programs[name] = p
		}
	}
	if err := all.Assign(objs); err != nil {
		return fmt.Errorf("internal error: %w", err)
	}
	for _, c := range progs {
		for name := range c.Programs {
			if _, kept := all.Programs[name]; !kept {
				delete(c.Programs, name) // assigned: closing c must not close it
			}
		}
	}
	return nil // the deferred Closes free what was not assigned
}

// eachStriped calls fn with every key of an array striped by CPU (key +
// cpu * stripe, the BPF side's STRIPE) that holds a value on some CPU, and
// its values on all CPUs. The array is read in one copy of its memory: a
// lookup of 4,096 keys at a time took 140 ms for the call counters.
//
// scratch holds the copy, kept for the next call: a fresh 1.3 MB for the
// errno counters was half of what reading them took.
func eachStriped[V comparable](m *ebpf.Map, stripe, ncpu int, scratch *[]byte, fn func(key uint32, perCPU []V)) error {
	mem, err := m.Memory()
	if err != nil {
		return err
	}
	var zero V
	size := int(unsafe.Sizeof(zero))
	if int(mem.Size()) < stripe*ncpu*size {
		return fmt.Errorf("internal error: %s holds %d bytes, not %d stripes of %d", m, mem.Size(), ncpu, stripe)
	}
	n := stripe * ncpu * size
	if cap(*scratch) < n {
		*scratch = make([]byte, n)
	}
	raw := (*scratch)[:n]
	if _, err := mem.ReadAt(raw, 0); err != nil {
		return err
	}
	buf := unsafe.Slice((*V)(unsafe.Pointer(&raw[0])), stripe*ncpu)
	perCPU := make([]V, ncpu)
	for k := 0; k < stripe; k++ {
		any := false
		for c := range perCPU {
			perCPU[c] = buf[c*stripe+k]
			any = any || perCPU[c] != zero
		}
		if any {
			fn(uint32(k), perCPU)
		}
	}
	return nil
}

// readStriped reads key's values on every CPU (len(perCPU)) from an array
// striped by CPU.
func readStriped[V any](m *ebpf.Map, stripe, key int, perCPU []V) error {
	mem, err := m.Memory()
	if err != nil {
		return err
	}
	size := int(unsafe.Sizeof(perCPU[0]))
	for c := range perCPU {
		b := unsafe.Slice((*byte)(unsafe.Pointer(&perCPU[c])), size)
		if _, err := mem.ReadAt(b, int64((c*stripe+key)*size)); err != nil {
			return err
		}
	}
	return nil
}

// readWords reads an array of n words (a bitmap) through its memory: a
// batch lookup of its 2,048 words took half a millisecond.
func readWords(m *ebpf.Map, n int) ([]uint64, error) {
	mem, err := m.Memory()
	if err != nil {
		return nil, err
	}
	words := make([]uint64, n)
	if _, err := mem.ReadAt(unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n*8), 0); err != nil {
		return nil, err
	}
	return words, nil
}

// stripeCPUs sizes the arrays spec stripes by CPU (names) for ncpu CPUs.
func stripeCPUs(spec *ebpf.CollectionSpec, ncpu int, names ...string) error {
	for _, name := range names {
		m := spec.Maps[name]
		if m == nil {
			return fmt.Errorf("internal error: no map %s to stripe", name)
		}
		m.MaxEntries *= uint32(ncpu)
	}
	return nil
}

// eachPerCPU calls fn with every key of the per-CPU array m and its
// values on each CPU, read in batches: a few system calls for the whole
// array, where an iterator makes two per key (4,096 keys of stats_fast:
// ~20 ms a snapshot).
func eachPerCPU[V any](m *ebpf.Map, fn func(key uint32, perCPU []V)) error {
	return eachKeyPerCPU(m, fn)
}

// eachKeyPerCPU is eachPerCPU for any per-CPU map, hashes included: their
// keys, read in batches too (a --stages snapshot of 1,600 (connection,
// opcode) keys made 3,200 system calls with an iterator).
func eachKeyPerCPU[K, V any](m *ebpf.Map, fn func(key K, perCPU []V)) error {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	const chunk = 256
	keys := make([]K, chunk)
	vals := make([]V, chunk*ncpu)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, keys, vals, nil)
		if errors.Is(err, ebpf.ErrNotSupported) && n == 0 {
			return eachKeyIterated(m, fn) // Linux 5.10 batches no per-CPU array
		}
		for i := 0; i < n; i++ {
			fn(keys[i], vals[i*ncpu:(i+1)*ncpu])
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// eachKeyIterated is eachKeyPerCPU one key at a time, where the kernel
// has no batch lookups for the map.
func eachKeyIterated[K, V any](m *ebpf.Map, fn func(key K, perCPU []V)) error {
	var key K
	var perCPU []V
	it := m.Iterate()
	for it.Next(&key, &perCPU) {
		fn(key, perCPU)
	}
	return it.Err()
}
