package ktrace

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/fusescope/fusescope/internal/kernel"
)

// load sets spec's constants and loads it into objs; what names the tracer
// in the one line a failure gives (the verifier's last lines included).
func load(spec *ebpf.CollectionSpec, consts map[string]any, objs any, what string) error {
	for name, v := range consts {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("setting %s: %w", name, err)
		}
	}
	if err := spec.LoadAndAssign(objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return fmt.Errorf("the kernel's verifier rejected the %s: %v", what, strings.Join(ve.Log[max(0, len(ve.Log)-5):], " | "))
		}
		return fmt.Errorf("loading the %s into kernel %s: %w", what, kernel.Release(), err)
	}
	return nil
}

// eachPerCPU calls fn with every key of a per-CPU array and its values on
// all CPUs, reading the map in batches.
func eachPerCPU[V any](m *ebpf.Map, fn func(key uint32, perCPU []V)) error {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	const chunk = 4096
	keys := make([]uint32, chunk)
	vals := make([]V, chunk*ncpu)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, keys, vals, nil)
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
