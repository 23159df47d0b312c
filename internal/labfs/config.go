// Package labfs is fusescope's lab file system: a go-fuse passthrough to a
// source directory in which every kernel caching, invalidation and transport
// mode FUSE studies compare is a switch, with a slow remote backend emulated
// on demand and per-operation histograms kept by the daemon itself.
package labfs

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Config is one lab file system's configuration. Its zero value is the
// default preset (kernel caches on: entry and attribute timeouts of 1 s,
// the page cache with auto_inval_data, write-through, readdirplus auto,
// parallel dirops, HANDLE_KILLPRIV_V2, default_permissions), so every
// field says how a configuration differs from it: the switches that are on
// by default are named for turning them off, and a timeout left nil is the
// default's. The other presets (Preset) are such differences.
type Config struct {
	EntryTimeout    *time.Duration `json:"entry_timeout,omitempty" flag:"entry-timeout"` // nil: DefaultTimeout
	AttrTimeout     *time.Duration `json:"attr_timeout,omitempty" flag:"attr-timeout"`   // nil: DefaultTimeout
	NegativeTimeout time.Duration  `json:"negative_timeout,omitempty" flag:"negative-timeout"`
	KeepCache       bool           `json:"keep_cache,omitempty" flag:"keep-cache"`           // FOPEN_KEEP_CACHE: keep cached pages across opens
	DirectIO        bool           `json:"direct_io,omitempty" flag:"direct-io"`             // FOPEN_DIRECT_IO: bypass the page cache
	WritebackCache  bool           `json:"writeback_cache,omitempty" flag:"writeback-cache"` // FUSE_WRITEBACK_CACHE: write-back, not write-through
	// NoAutoInvalData leaves out FUSE_AUTO_INVAL_DATA, which drops cached
	// pages when a file's mtime or size changes.
	NoAutoInvalData bool   `json:"no_auto_inval_data,omitempty" flag:"auto-inval-data" invert:"true"`
	Passthrough     bool   `json:"passthrough,omitempty" flag:"passthrough"` // FUSE_PASSTHROUGH: reads and writes go to the backing file
	Readdirplus     string `json:"readdirplus,omitempty" flag:"readdirplus"` // auto (""), on, off
	// SerialDirops leaves out FUSE_PARALLEL_DIROPS: one lookup or readdir
	// at a time per directory.
	SerialDirops  bool `json:"serial_dirops,omitempty" flag:"parallel-dirops" invert:"true"`
	MaxRead       int  `json:"max_read,omitempty" flag:"max-read"`           // bytes; 0: the kernel's default
	MaxWrite      int  `json:"max_write,omitempty" flag:"max-write"`         // bytes
	MaxReadahead  int  `json:"max_readahead,omitempty" flag:"max-readahead"` // bytes
	MaxBackground int  `json:"max_background,omitempty" flag:"max-background"`
	Congestion    int  `json:"congestion_threshold,omitempty" flag:"congestion-threshold"`
	Threads       int  `json:"threads,omitempty" flag:"threads"` // most requests served at once
	// NoKillprivV2 leaves out FUSE_HANDLE_KILLPRIV_V2, with which the
	// daemon clears suid/sgid on write, truncate and chown, so the kernel
	// does not ask GETXATTR security.capability before every write.
	NoKillprivV2 bool `json:"no_handle_killpriv_v2,omitempty" flag:"killpriv-v2" invert:"true"`
	// NoDefaultPermissions leaves out the mount option default_permissions
	// (and FUSE_POSIX_ACL), with which the kernel checks file modes and
	// POSIX ACLs, as daemons that serve many users do; without it, only the
	// mounting user may use the mount, since the daemon, which may run as
	// root, checks nothing itself.
	NoDefaultPermissions bool `json:"no_default_permissions,omitempty" flag:"default-permissions" invert:"true"`

	// User-space features (seeds 001 and 003), each off by default.
	MDCacheTTL   time.Duration `json:"md_cache_ttl,omitempty" flag:"md-cache"`       // attribute cache in the daemon
	ReadPipeline int           `json:"read_pipeline,omitempty" flag:"read-pipeline"` // reads kept in flight ahead, per open file
	ReadChunk    int           `json:"read_chunk,omitempty" flag:"read-chunk"`       // bytes per pipelined read
	WriteBehind  int           `json:"write_behind,omitempty" flag:"write-behind"`   // acknowledged, unwritten writes per inode
	ReaddirAhead bool          `json:"readdir_ahead,omitempty" flag:"readdir-ahead"` // fetch a directory's listing in the background at OPENDIR
	Invalidation string        `json:"invalidation,omitempty" flag:"invalidation"`   // none, cto, notify
	MaxInodes    int           `json:"max_inodes,omitempty" flag:"max-inodes"`       // inodes the daemon lets the kernel keep
	// Xattrs is how extended attributes are answered: passed through to
	// the source (""), or refused, every GETXATTR, LISTXATTR, SETXATTR
	// and REMOVEXATTR failing with ENOSYS (which the kernel remembers,
	// sending no more) or EOPNOTSUPP (which it does not, asking every
	// time), as daemons without xattrs do.
	Xattrs string `json:"xattrs,omitempty" flag:"xattrs"`

	Latency   LatencySpec `json:"latency,omitempty" flag:"latency"`
	Bandwidth uint64      `json:"bandwidth,omitempty" flag:"bandwidth"` // bytes/s for READ and WRITE data; 0: unlimited
}

// DefaultTimeout is the entry and attribute timeout of a configuration
// that does not set one.
const DefaultTimeout = time.Second

// Timeout is a timeout to set in a Config: Timeout(0) caches nothing.
func Timeout(d time.Duration) *time.Duration { return &d }

// Presets name the configurations the seeds compare: the default is the
// zero Config, the others what they change.
var presets = map[string]struct {
	doc string
	cfg Config
}{
	"default": {"kernel caches on: entry/attr timeouts 1 s, negative 0, page cache with auto_inval_data, write-through, readdirplus auto, parallel dirops, handle_killpriv_v2, default_permissions",
		Config{}},
	"nocache": {"kernel caches off: timeouts 0, direct_io (no page cache), readdirplus off",
		Config{EntryTimeout: Timeout(0), AttrTimeout: Timeout(0), DirectIO: true, NoAutoInvalData: true, Readdirplus: "off"}},
	"writeback": {"default plus write-back caching: writes land in the page cache and are flushed later",
		Config{WritebackCache: true}},
	"passthrough": {"default plus FUSE passthrough: reads and writes of open files go straight to the backing file (root, Linux 6.9+)",
		Config{Passthrough: true}},
	"cto": {"close-to-open: cached pages are kept across opens unless the file's size or mtime changed since it was last closed through this mount; timeouts 1 s",
		Config{Invalidation: "cto", NoAutoInvalData: true}},
}

// entryTimeout and attrTimeout are the timeouts in effect.
func (c *Config) entryTimeout() time.Duration { return timeoutOr(c.EntryTimeout) }
func (c *Config) attrTimeout() time.Duration  { return timeoutOr(c.AttrTimeout) }

func timeoutOr(d *time.Duration) time.Duration {
	if d == nil {
		return DefaultTimeout
	}
	return *d
}

// Preset returns a named configuration.
func Preset(name string) (Config, error) {
	p, ok := presets[name]
	if !ok {
		return Config{}, fmt.Errorf("unknown preset %q (known: %s)", name, strings.Join(PresetNames(), ", "))
	}
	cfg := p.cfg
	for _, d := range []**time.Duration{&cfg.EntryTimeout, &cfg.AttrTimeout} {
		if *d != nil {
			*d = Timeout(**d) // not shared with the preset
		}
	}
	return cfg, nil
}

// PresetNames lists the presets.
func PresetNames() []string {
	var out []string
	for n := range presets {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// PresetDoc says what a preset sets.
func PresetDoc(name string) string { return presets[name].doc }

// Validate checks combinations the kernel would reject or ignore silently;
// its errors are *option.Error.
func (c *Config) Validate() error {
	if c.KeepCache && c.DirectIO {
		return optionErr("keep-cache", "and {direct-io} contradict each other: choose one")
	}
	switch c.Readdirplus {
	case "", "auto", "on", "off":
	default:
		return optionErr("readdirplus", "%q: give auto, on or off", c.Readdirplus)
	}
	switch c.Invalidation {
	case "", "none", "cto", "notify":
	default:
		return optionErr("invalidation", "%q: give none, cto or notify", c.Invalidation)
	}
	switch c.Xattrs {
	case "", "pass", "enosys", "eopnotsupp":
	default:
		return optionErr("xattrs", "%q: give pass, enosys or eopnotsupp", c.Xattrs)
	}
	if c.Invalidation == "cto" && (c.DirectIO || c.KeepCache) {
		return optionErr("invalidation", "cto decides keep_cache per open: leave out {keep-cache} and {direct-io}")
	}
	if c.Passthrough {
		if err := c.passthroughConflict(); err != nil {
			return err
		}
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"entry-timeout", c.entryTimeout()}, {"attr-timeout", c.attrTimeout()}, {"negative-timeout", c.NegativeTimeout}, {"md-cache", c.MDCacheTTL}} {
		if d.v < 0 {
			return optionErr(d.flag, "%v: give a duration of 0 (no caching) or more", d.v)
		}
	}
	// The bounds are the kernel's (INIT carries the background limits in
	// 16 bits, and raises max_read and max_write to 4 KiB) or the memory a
	// feature may hold: read pipeline x chunk per open file, write-behind
	// writes per file.
	for _, r := range []struct {
		flag     string
		v        int
		min, max int
		why      string
	}{
		{"max-read", c.MaxRead, 4 << 10, math.MaxInt32, "the kernel reads at least 4KiB at a time"},
		{"max-write", c.MaxWrite, 4 << 10, math.MaxInt32, "the kernel writes at least 4KiB at a time"},
		{"max-readahead", c.MaxReadahead, 0, math.MaxInt32, ""},
		{"max-background", c.MaxBackground, 1, math.MaxUint16, "the kernel takes 16 bits"},
		{"congestion-threshold", c.Congestion, 1, math.MaxUint16, "the kernel takes 16 bits"},
		{"threads", c.Threads, 0, math.MaxInt32, ""},
		{"read-pipeline", c.ReadPipeline, 0, 256, "each holds a {read-chunk} per open file"},
		{"read-chunk", c.ReadChunk, 4 << 10, 256 << 20, "each pipelined read holds one in memory"},
		{"write-behind", c.WriteBehind, 0, 4096, "each holds a write of up to {max-write} per file"},
		{"max-inodes", c.MaxInodes, 0, math.MaxInt32, ""},
	} {
		if r.v == 0 || (r.v >= r.min && r.v <= r.max) {
			continue // 0: the default, or off
		}
		why := ""
		if r.why != "" {
			why = " (" + r.why + ")"
		}
		if r.min == 0 && r.max == math.MaxInt32 {
			return optionErr(r.flag, "%d: must not be negative", r.v)
		}
		if r.max == math.MaxInt32 {
			return optionErr(r.flag, "%d: give 0 for the default or at least %d%s", r.v, r.min, why)
		}
		return optionErr(r.flag, "%d: give 0 for the default or %d to %d%s", r.v, r.min, r.max, why)
	}
	if c.Congestion > 0 && c.MaxBackground > 0 && c.Congestion > c.MaxBackground {
		return optionErr("congestion-threshold", "%d exceeds {max-background} %d: the kernel would cap it", c.Congestion, c.MaxBackground)
	}
	return nil
}

// passthroughConflict names a switch that passthrough would make fail or do
// nothing: the kernel serves a passthrough file's reads and writes from the
// backing file, so no READ or WRITE reaches the daemon, and the FUSE inode
// has no page cache of its own.
func (c *Config) passthroughConflict() error {
	switch {
	case c.WritebackCache:
		return optionErr("passthrough", "and {writeback-cache} exclude each other: the kernel turns passthrough off when write-back caching is negotiated; leave out one of them")
	case c.KeepCache:
		return optionErr("keep-cache", "does not combine with {passthrough}: the kernel fails opens that ask for both (EIO); leave it out, passthrough reads use the backing file's page cache")
	case c.DirectIO:
		return optionErr("direct-io", "turns passthrough off for every open: leave out {direct-io} or {passthrough}")
	case c.Invalidation == "cto":
		return optionErr("invalidation", "cto keeps or drops the FUSE page cache, which passthrough files do not use: leave out one of them")
	case c.ReadPipeline > 0:
		return optionErr("read-pipeline", "acts on READ requests, which passthrough files never send to the daemon: leave out one of them")
	case c.WriteBehind > 0:
		return optionErr("write-behind", "acts on WRITE requests, which passthrough files never send to the daemon: leave out one of them")
	case c.Bandwidth > 0:
		return optionErr("bandwidth", "throttles READ and WRITE data, which passthrough files never send to the daemon: leave out one of them")
	}
	for _, op := range []string{"READ", "WRITE"} {
		if d, ok := c.Latency[op]; ok && d.Base > 0 {
			return optionErr("latency", "%s=%v delays %s requests, which passthrough files never send to the daemon: leave it out, or leave out {passthrough}", strings.ToLower(op), d.Base, op)
		}
	}
	return nil
}
