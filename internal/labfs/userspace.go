package labfs

import (
	"sync/atomic"
)

// Counters of the user-space features, shown by fs stats (each feature's
// count).
type counters struct {
	pipeHits, pipeMisses         atomic.Uint64
	pipeFetched, pipeWasted      atomic.Uint64 // bytes
	wbQueued, wbDrains, wbErrors atomic.Uint64
	wbMaxDepth                   atomic.Uint64
	evictions                    atomic.Uint64
	rdaFetches, rdaHits          atomic.Uint64
	rdaMisses                    atomic.Uint64
}
