package labfs

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/fusescope/fusescope/internal/option"
)

func TestParseLatency(t *testing.T) {
	spec, err := ParseLatency("lookup=1ms, getattr=500us,read=2ms+-0.5ms,*=100us")
	if err != nil {
		t.Fatal(err)
	}
	if spec["LOOKUP"].Base != time.Millisecond || spec["GETATTR"].Base != 500*time.Microsecond ||
		spec["READ"].Jitter != 500*time.Microsecond || spec["*"].Base != 100*time.Microsecond {
		t.Fatalf("%+v", spec)
	}
	if d := spec.For(fuseproto.Write); d != 100*time.Microsecond {
		t.Errorf("WRITE falls back to *: %v", d)
	}
	for i := 0; i < 1000; i++ {
		if d := spec.For(fuseproto.Read); d < 1500*time.Microsecond || d > 2500*time.Microsecond {
			t.Fatalf("READ delay %v outside 2ms±0.5ms", d)
		}
	}
	back, err := ParseLatency(spec.String())
	if err != nil || back.String() != spec.String() {
		t.Errorf("round trip %q -> %q (%v)", spec.String(), back.String(), err)
	}
	for _, bad := range []string{"lookup", "lookup=x", "nosuchop=1ms", "read=1ms+-2ms", "read=-1ms"} {
		if _, err := ParseLatency(bad); err == nil {
			t.Errorf("ParseLatency(%q) accepted", bad)
		}
	}
}

// getattr= delays STATX too, which the kernel sends for stat(1) (it asks for
// the birth time); a statx= of its own wins, and * comes last.
func TestLatencyGetattrCoversStatx(t *testing.T) {
	for spec, want := range map[string]time.Duration{
		"getattr=2ms":                 2 * time.Millisecond,
		"getattr=2ms,*=100us":         2 * time.Millisecond,
		"getattr=2ms,statx=300us":     300 * time.Microsecond,
		"statx=300us":                 300 * time.Microsecond,
		"*=100us":                     100 * time.Microsecond,
		"lookup=1ms":                  0,
		"statx=0s,getattr=2ms,*=50us": 0,
	} {
		l, err := ParseLatency(spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.For(fuseproto.Statx); got != want {
			t.Errorf("--latency %s: STATX delayed %v, want %v", spec, got, want)
		}
	}
}

func TestParseBandwidth(t *testing.T) {
	for in, want := range map[string]uint64{"100MiB/s": 100 << 20, "10MB/s": 10e6, "1GiB": 1 << 30, "512": 512, "": 0, "1.5KiB/s": 1536} {
		got, err := ParseBandwidth(in)
		if err != nil || got != want {
			t.Errorf("ParseBandwidth(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"fast", "-1MiB/s", "MiB/s"} {
		if _, err := ParseBandwidth(bad); err == nil {
			t.Errorf("ParseBandwidth(%q) accepted", bad)
		}
	}
}

func TestLinkSerialisesTransfers(t *testing.T) {
	l := &link{rate: 10 << 20, sleep: newSleeper()} // 10 MiB/s: 1 MiB takes 100 ms
	start := time.Now()
	done := make(chan bool)
	for i := 0; i < 2; i++ {
		go func() { l.wait(1 << 20); done <- true }()
	}
	<-done
	<-done
	if took := time.Since(start); took < 195*time.Millisecond {
		t.Errorf("two 1 MiB transfers on a 10 MiB/s link took %v, want >= 200 ms", took)
	}
}

func TestPresetsAndCapabilities(t *testing.T) {
	for _, name := range PresetNames() {
		cfg, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("preset %s invalid: %v", name, err)
		}
		if PresetDoc(name) == "" {
			t.Errorf("preset %s undocumented", name)
		}
		extra, disabled := cfg.capabilities()
		if cfg.Passthrough == (disabled&fuse.CAP_PASSTHROUGH != 0) {
			t.Errorf("preset %s: passthrough %v but disabled mask %x", name, cfg.Passthrough, disabled)
		}
		if cfg.WritebackCache != (extra&fuse.CAP_WRITEBACK_CACHE != 0) {
			t.Errorf("preset %s: writeback %v but extra %x", name, cfg.WritebackCache, extra)
		}
	}
	if _, err := Preset("fast"); err == nil || !strings.Contains(err.Error(), "known:") {
		t.Errorf("unknown preset: %v", err)
	}
	bad := Config{KeepCache: true, DirectIO: true}
	if bad.Validate() == nil {
		t.Error("keep-cache with direct-io accepted")
	}
	// Passthrough with a switch that the kernel refuses with it, or that
	// acts on READ and WRITE requests, which passthrough files never send.
	for flag, conflict := range map[string]func(*Config){
		"writeback-cache": func(c *Config) { c.WritebackCache = true },
		"keep-cache":      func(c *Config) { c.KeepCache = true },
		"direct-io":       func(c *Config) { c.DirectIO = true },
		"invalidation":    func(c *Config) { c.Invalidation = "cto" },
		"read-pipeline":   func(c *Config) { c.ReadPipeline = 4 },
		"write-behind":    func(c *Config) { c.WriteBehind = 4 },
		"bandwidth":       func(c *Config) { c.Bandwidth = 1 << 20 },
		"latency read":    func(c *Config) { c.Latency = LatencySpec{"READ": {Base: time.Millisecond}} },
		"latency write": func(c *Config) {
			c.Latency = LatencySpec{"*": {Base: time.Millisecond}, "WRITE": {Base: time.Millisecond}}
		},
	} {
		cfg, _ := Preset("passthrough")
		conflict(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(asFlags(err), "--"+flag) {
			t.Errorf("passthrough with --%s: %v, want an error naming --%s", flag, err, flag)
		}
		cfg.Passthrough = false
		if err := cfg.Validate(); err != nil {
			t.Errorf("--%s without passthrough refused: %v", flag, err)
		}
	}
	// Delays of the requests passthrough still sends are its to study.
	pt, _ := Preset("passthrough")
	pt.Latency = LatencySpec{"*": {Base: time.Millisecond}, "LOOKUP": {Base: time.Millisecond}, "READ": {}}
	if err := pt.Validate(); err != nil {
		t.Errorf("passthrough with --latency '*=1ms,lookup=1ms,read=0': %v", err)
	}
	off := Config{Readdirplus: "off"}
	if _, disabled := off.capabilities(); disabled&fuse.CAP_READDIRPLUS == 0 {
		t.Error("readdirplus off does not disable READDIRPLUS")
	}
}

func TestBackingFlagsUnderWriteback(t *testing.T) {
	w := &labRaw{cfg: &Config{WritebackCache: true}}
	const wronlyAppend = 0x1 | 0x400 // O_WRONLY | O_APPEND
	if got := w.backingFlags(wronlyAppend); got != 0x2 {
		t.Errorf("backingFlags(O_WRONLY|O_APPEND) = %#x, want O_RDWR", got)
	}
	w.cfg.WritebackCache = false
	if got := w.backingFlags(wronlyAppend); got != wronlyAppend {
		t.Errorf("without write-back the flags must pass unchanged, got %#x", got)
	}
}

func FuzzParseLatency(f *testing.F) {
	f.Add("lookup=1ms,getattr=500us,read=2ms+-0.5ms,*=100us")
	f.Add("=,+-")
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := ParseLatency(s)
		if err != nil {
			return
		}
		for _, d := range spec {
			if d.Base < 0 || d.Jitter > d.Base {
				t.Fatalf("accepted a negative delay: %+v", d)
			}
		}
	})
}

func FuzzParseBandwidth(f *testing.F) {
	f.Add("100MiB/s")
	f.Add("1e3KB")
	f.Add("Inf/s")
	f.Add("0.001B/s")
	f.Add("0")
	f.Fuzz(func(t *testing.T, s string) {
		// A rate is a limit: an accepted one is at least a byte a second,
		// never 0 (which means none) unless it was asked for ("0").
		v, err := ParseBandwidth(s)
		none := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "/s"))
		if err == nil && (v > maxSize || v == 0 && none != "0" && none != "") {
			t.Fatalf("ParseBandwidth(%q) = %d", s, v)
		}
	})
}

func TestSleeperIsPrecise(t *testing.T) {
	s := newSleeper()
	var total time.Duration
	const n, d = 50, 200 * time.Microsecond
	for i := 0; i < n; i++ {
		start := time.Now()
		s.sleep(d)
		total += time.Since(start)
	}
	// Go's time.Sleep would average ~1.1 ms here; allow scheduling noise.
	// Never early; how late depends on the machine's load, so the upper
	// bound is checked only without the race detector.
	avg := total / n
	if avg < d-20*time.Microsecond || !raceEnabled && avg > d+400*time.Microsecond {
		t.Errorf("sleep(%v) took %v on average", d, avg)
	}
	t.Logf("sleep(%v) took %v on average", d, avg)
}

// A lateness measured on a busy machine (here, as if every wakeup had been
// 190 us late) must not make every later delay short: a sleep that wakes
// early sleeps the rest.
func TestSleeperRecoversFromABusyCalibration(t *testing.T) {
	s := newSleeper()
	quiet := time.Duration(s.late.Load())
	s.late.Store(int64(190 * time.Microsecond))
	const n, d = 50, 200 * time.Microsecond
	var total time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		s.sleep(d)
		total += time.Since(start)
	}
	if avg := total / n; avg < d-20*time.Microsecond {
		t.Errorf("after a busy calibration, sleep(%v) took %v on average", d, avg)
	}
	// Where it went depends on the machine's load while the test runs.
	t.Logf("expected lateness %v after %d sleeps (measured at the start: %v)", time.Duration(s.late.Load()), n, quiet)
}

// Out-of-range sizes are refused with the flag named, where the kernel
// would silently change them (16-bit background limits, 4 KiB minimum
// requests) or a feature could hold unbounded memory.
func TestValidateRanges(t *testing.T) {
	for flag, set := range map[string]func(*Config){
		"max-background":       func(c *Config) { c.MaxBackground = 70000 },
		"congestion-threshold": func(c *Config) { c.Congestion = 1 << 16 },
		"max-write":            func(c *Config) { c.MaxWrite = 1 },
		"max-read":             func(c *Config) { c.MaxRead = 100 },
		"max-readahead":        func(c *Config) { c.MaxReadahead = -1 },
		"threads":              func(c *Config) { c.Threads = -1 },
		"read-pipeline":        func(c *Config) { c.ReadPipeline = 100000 },
		"read-chunk":           func(c *Config) { c.ReadChunk = 1 << 30 },
		"write-behind":         func(c *Config) { c.WriteBehind = 5000 },
		"max-inodes":           func(c *Config) { c.MaxInodes = -3 },
		"md-cache":             func(c *Config) { c.MDCacheTTL = -time.Second },
		"entry-timeout":        func(c *Config) { c.EntryTimeout = Timeout(-time.Second) },
		"attr-timeout":         func(c *Config) { c.AttrTimeout = Timeout(-time.Second) },
		"negative-timeout":     func(c *Config) { c.NegativeTimeout = -time.Second },
	} {
		cfg, _ := Preset("default")
		set(&cfg)
		if err := cfg.Validate(); err == nil || !strings.HasPrefix(asFlags(err), "--"+flag+" ") {
			t.Errorf("--%s out of range: %v, want an error naming it", flag, err)
		}
	}
	cfg, _ := Preset("default")
	cfg.MaxBackground, cfg.Congestion, cfg.MaxWrite, cfg.MaxRead, cfg.ReadPipeline, cfg.WriteBehind = 65535, 65535, 4096, 4096, 256, 4096
	if err := cfg.Validate(); err != nil {
		t.Errorf("the largest or smallest values allowed were refused: %v", err)
	}
}

// asFlags is err as fs mount words it: each option a --flag.
func asFlags(err error) string {
	var oe *option.Error
	if !errors.As(err, &oe) {
		return "not an *option.Error: " + err.Error()
	}
	return oe.Error()
}

// The lab fs's option errors name options, never a front end's spelling of
// them (they named --flags, which bench's users had not typed): each is an
// *option.Error that fs mount words as --flags and another front end as its
// own keys.
func TestOptionErrorsNameOptions(t *testing.T) {
	pt, _ := Preset("passthrough")
	pt.KeepCache = true
	chunk, _ := Preset("default")
	chunk.ReadPipeline = 1000
	_, latency := ParseLatency("lookup=1ms+-2ms")
	_, bandwidth := ParseBandwidth("fast")
	for _, c := range []struct {
		err          error
		flags, keyed string
	}{
		{(&Config{KeepCache: true, DirectIO: true}).Validate(),
			"--keep-cache and --direct-io contradict each other: choose one",
			"fs.keep-cache and fs.direct-io contradict each other: choose one"},
		{pt.Validate(),
			"--keep-cache does not combine with --passthrough: the kernel fails opens",
			"fs.keep-cache does not combine with fs.passthrough: the kernel fails opens"},
		{chunk.Validate(),
			"--read-pipeline 1000: give 0 for the default or 0 to 256 (each holds a --read-chunk per open file)",
			"fs.read-pipeline 1000: give 0 for the default or 0 to 256 (each holds a fs.read-chunk per open file)"},
		{latency,
			"--latency lookup=1ms+-2ms: jitter larger than the delay would make it negative",
			"fs.latency lookup=1ms+-2ms: jitter larger than the delay"},
		{bandwidth, `--bandwidth "fast": give a rate like 100MiB/s`, `fs.bandwidth "fast": give a rate like 100MiB/s`},
	} {
		var oe *option.Error
		if !errors.As(c.err, &oe) {
			t.Errorf("%v: not an *option.Error", c.err)
			continue
		}
		if got := c.err.Error(); !strings.HasPrefix(got, c.flags) {
			t.Errorf("as flags: %q, want %q", got, c.flags)
		}
		if got := option.Reword(c.err, func(o string) string { return "fs." + o }); !strings.HasPrefix(got, c.keyed) || strings.Contains(got, "--") {
			t.Errorf("as keys: %q, want %q", got, c.keyed)
		}
	}
}
