package ktrace

import (
	"fmt"
	mathbits "math/bits"
	"sync"
	"unsafe"

	"github.com/fusescope/fusescope/internal/bpf"
	"github.com/fusescope/fusescope/internal/sysevent"
)

// SyscallCount is one process's calls of one system call so far.
type SyscallCount struct {
	TGID   int
	Name   string
	Calls  uint64
	Errors uint64
	Ns     uint64
}

type countKey struct {
	tgid int
	name string
}

// liveCounts is what Counts adds to the counters still in the maps: the
// counts that left them while tracing went on (a thread's at its exit, an
// fd's at its close, the calls sent whole). Counts and the reader share
// it, and the slot tables, under mu.
type liveCounts struct {
	mu      sync.Mutex
	on      bool
	retired map[countKey]*SyscallCount
}

// CountLive has the tracer keep the counts Counts needs (fusescope top
// --syscalls); without it nothing is kept.
func (t *SyscallTracer) CountLive() {
	t.live.mu.Lock()
	t.live.on, t.live.retired = true, map[countKey]*SyscallCount{}
	t.live.mu.Unlock()
}

// retire adds counts that left the maps. Called with live.mu held.
func (t *SyscallTracer) retire(tgid int, name string, calls, errors, ns uint64) {
	if !t.live.on || calls == 0 {
		return
	}
	k := countKey{tgid, name}
	c := t.live.retired[k]
	if c == nil {
		c = &SyscallCount{TGID: tgid, Name: name}
		t.live.retired[k] = c
	}
	c.Calls += calls
	c.Errors += errors
	c.Ns += ns
}

func (t *SyscallTracer) retireIO(tgid int, io []sysevent.IOCount) {
	for _, c := range io {
		if !c.Peer { // a transfer's second fd is the same call again
			t.retire(tgid, c.Name, uint64(c.Calls), uint64(c.Errors), c.Ns)
		}
	}
}

// Counts returns every traced process's calls of each system call so far:
// the counters in the maps (threads alive, fds open) and those that left
// them. It may be called while Run reads events.
func (t *SyscallTracer) Counts() ([]SyscallCount, error) {
	t.live.mu.Lock()
	defer t.live.mu.Unlock()
	sum := map[countKey]*SyscallCount{}
	add := func(tgid int, name string, calls, errors, ns uint64) {
		if calls == 0 {
			return
		}
		k := countKey{tgid, name}
		c := sum[k]
		if c == nil {
			c = &SyscallCount{TGID: tgid, Name: name}
			sum[k] = c
		}
		c.Calls += calls
		c.Errors += errors
		c.Ns += ns
	}
	for _, c := range t.live.retired {
		add(c.TGID, c.Name, c.Calls, c.Errors, c.Ns)
	}
	err := t.eachUsedCall(func(key int, perCPU []bpf.SysTraceSysStats) {
		tgid, ok := t.tgids[uint32(key/sysMaxNR)]
		if !ok {
			return
		}
		var s bpf.SysTraceSysStats
		for _, v := range perCPU {
			s.Calls, s.Errors, s.Ns = s.Calls+v.Calls, s.Errors+v.Errors, s.Ns+v.Ns
		}
		add(int(tgid), syscallName(uint32(key%sysMaxNR)), s.Calls, s.Errors, s.Ns)
	})
	if err != nil {
		return nil, err
	}
	err = t.eachUsedFD(func(fdi int, counters []bpf.SysTraceFdIo) {
		tgid, ok := t.pslots[uint32(fdi/sysMaxFDs)]
		if !ok {
			return
		}
		for _, c := range ioCounts(counters, 1<<sysIOKinds-1) {
			if !c.Peer {
				add(int(tgid), c.Name, uint64(c.Calls), uint64(c.Errors), c.Ns)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	out := make([]SyscallCount, 0, len(sum))
	for _, c := range sum {
		out = append(out, *c)
	}
	return out, nil
}

// eachUsedFD calls fn with each fd slot the used_fds bitmap marks and its
// counters, read from the counters' memory one fd at a time (all 11 MiB
// of it took 30 ms); counters is reused between calls.
func (t *SyscallTracer) eachUsedFD(fn func(fdi int, counters []bpf.SysTraceFdIo)) error {
	words, err := readWords(t.objs.UsedFds, sysMaxPSlots*sysMaxFDs/64)
	if err != nil {
		return fmt.Errorf("reading the fd bitmap: %w", err)
	}
	var one bpf.SysTraceFdIo
	size := int(unsafe.Sizeof(one))
	counters := make([]bpf.SysTraceFdIo, sysIOKinds)
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&counters[0])), sysIOKinds*size)
	for w, bits := range words {
		for ; bits != 0; bits &= bits - 1 {
			fdi := w*64 + mathbits.TrailingZeros64(bits)
			if _, err := t.fdmem.ReadAt(buf, int64(fdi*sysIOKinds*size)); err != nil {
				return fmt.Errorf("reading the fd counters: %w", err)
			}
			fn(fdi, counters)
		}
	}
	return nil
}

// eachUsedCall calls fn with each (thread slot, system call) key the
// used_nrs bitmap marks and its counters on each CPU (reused between calls).
func (t *SyscallTracer) eachUsedCall(fn func(key int, perCPU []bpf.SysTraceSysStats)) error {
	words, err := readWords(t.objs.UsedNrs, sysMaxTSlots*sysMaxNR/64)
	if err != nil {
		return fmt.Errorf("reading the call bitmap: %w", err)
	}
	perCPU := make([]bpf.SysTraceSysStats, t.ncpu)
	for w, bits := range words {
		for ; bits != 0; bits &= bits - 1 {
			key := w*64 + mathbits.TrailingZeros64(bits)
			if err := readStriped(t.objs.Sysstats, sysMaxTSlots*sysMaxNR, key, perCPU); err != nil {
				return fmt.Errorf("reading the call counters: %w", err)
			}
			fn(key, perCPU)
		}
	}
	return nil
}
