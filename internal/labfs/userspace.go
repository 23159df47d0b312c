package labfs

import (
	"sync/atomic"
)

// Counters of the user-space features, shown by fs stats.
type counters struct {
	mdHits, mdMisses             atomic.Uint64
	pipeHits, pipeMisses         atomic.Uint64
	pipeFetched, pipeWasted      atomic.Uint64 // bytes
	wbQueued, wbDrains, wbErrors atomic.Uint64
	wbMaxDepth                   atomic.Uint64
	invalidations                atomic.Uint64
	evictions                    atomic.Uint64
	rdaFetches, rdaHits          atomic.Uint64
	rdaMisses                    atomic.Uint64
}

func (c *counters) snapshot(cfg *Config) map[string]uint64 {
	m := map[string]uint64{}
	if cfg.MDCacheTTL > 0 {
		m["md_cache_hits"], m["md_cache_misses"] = c.mdHits.Load(), c.mdMisses.Load()
	}
	if cfg.ReadPipeline > 0 {
		m["read_pipeline_hits"], m["read_pipeline_misses"] = c.pipeHits.Load(), c.pipeMisses.Load()
		m["read_pipeline_fetched_bytes"], m["read_pipeline_wasted_bytes"] = c.pipeFetched.Load(), c.pipeWasted.Load()
	}
	if cfg.WriteBehind > 0 {
		m["write_behind_queued"], m["write_behind_drains"] = c.wbQueued.Load(), c.wbDrains.Load()
		m["write_behind_errors"], m["write_behind_max_depth"] = c.wbErrors.Load(), c.wbMaxDepth.Load()
	}
	if cfg.ReaddirAhead {
		m["readdir_ahead_fetches"], m["readdir_ahead_hits"] = c.rdaFetches.Load(), c.rdaHits.Load()
		m["readdir_ahead_misses"] = c.rdaMisses.Load()
	}
	if cfg.Invalidation == "cto" {
		m["cto_invalidations"] = c.invalidations.Load()
	}
	if cfg.MaxInodes > 0 {
		m["inode_evictions"] = c.evictions.Load()
	}
	return m
}
