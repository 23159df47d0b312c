// Package labmodes names the lab file system's configurations that the
// correctness tests (test/e2e) and the model checker's long runs
// (test/bench) check: every preset, and the user-space features over the
// kernel's caches and over direct_io.
package labmodes

import (
	"time"

	"github.com/fusescope/fusescope/internal/labfs"
)

// presets is every preset, by name, and every user-space feature at once
// over write-through and over the kernel's write-back cache (whose
// flushes meet write-behind's queue), on an emulated backend of 20 us.
func presets() map[string]labfs.Config {
	m := map[string]labfs.Config{}
	for _, name := range labfs.PresetNames() {
		m[name] = must(labfs.Preset(name))
	}
	for _, base := range []string{"default", "writeback"} {
		all := must(labfs.Preset(base))
		all.MDCacheTTL, all.ReadPipeline, all.ReadChunk, all.WriteBehind, all.MaxInodes = time.Second, 4, 64<<10, 8, 20
		all.Invalidation, all.ReaddirAhead = "cto", true
		all.Latency = labfs.LatencySpec{"*": {Base: 20 * time.Microsecond, Jitter: 10 * time.Microsecond}}
		m[base+"+userspace"] = all
	}
	return m
}

// All is every preset, every user-space feature at once over
// write-through and over write-back, and the modes where the user-space
// features see every read and write: the features over direct_io (which the page cache of the
// other modes hides from them), and the md-cache over passthrough (whose
// writes never reach the daemon).
func All() map[string]labfs.Config {
	m := presets()
	direct := must(labfs.Preset("nocache"))
	direct.MDCacheTTL, direct.ReadPipeline, direct.ReadChunk, direct.WriteBehind = time.Second, 4, 256<<10, 8
	direct.Latency = labfs.LatencySpec{"*": {Base: 20 * time.Microsecond, Jitter: 10 * time.Microsecond}}
	m["nocache+userspace"] = direct
	pt := must(labfs.Preset("passthrough"))
	pt.MDCacheTTL = time.Second
	m["passthrough+md-cache"] = pt
	// Invalidations from inotify of the mount's own writes, over pages
	// write-back keeps dirty.
	notify := must(labfs.Preset("writeback"))
	notify.Invalidation = "notify"
	m["writeback+notify"] = notify
	return m
}

func must(c labfs.Config, err error) labfs.Config {
	if err != nil {
		panic(err)
	}
	return c
}
