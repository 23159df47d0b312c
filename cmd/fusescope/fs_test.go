package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/labfs"
)

// mountConfig runs fusescope fs mount with args up to the mount and returns
// the configuration its flags resolved to.
func mountConfig(t *testing.T, args ...string) labfs.Config {
	t.Helper()
	var got labfs.Config
	saved := mountConfigured
	defer func() { mountConfigured = saved }()
	mountConfigured = func(_, _ string, cfg labfs.Config, _ bool, _ string) error {
		got = cfg
		return nil
	}
	c := newFSMountCmd()
	c.SetArgs(append([]string{"/src", "/mnt"}, args...))
	if err := c.Execute(); err != nil {
		t.Fatalf("fs mount %v: %v", args, err)
	}
	if len(got.Latency) == 0 {
		got.Latency = nil
	}
	return got
}

// The flags stats shows for a configuration mount the same configuration
// again, for every preset and for every switch changed.
func TestConfigFlagsRoundTrip(t *testing.T) {
	var configs []labfs.Config
	for _, name := range labfs.PresetNames() {
		cfg, err := labfs.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		configs = append(configs, cfg)
	}
	all, _ := labfs.Preset("nocache")
	all.EntryTimeout, all.AttrTimeout, all.NegativeTimeout = labfs.Timeout(1500*time.Millisecond), labfs.Timeout(time.Minute), 250*time.Microsecond
	all.DirectIO, all.KeepCache, all.NoAutoInvalData, all.SerialDirops = false, true, true, true
	all.Readdirplus, all.MaxRead, all.MaxWrite, all.MaxReadahead = "on", 65536, 1<<17, 1<<20
	all.MaxBackground, all.Congestion, all.Threads, all.NoKillprivV2 = 64, 48, 8, true
	all.MDCacheTTL, all.ReadPipeline, all.ReadChunk, all.WriteBehind = 2*time.Second, 4, 32<<20, 8
	all.ReaddirAhead, all.MaxInodes, all.Bandwidth = true, 1000, 100e6
	all.Latency, _ = labfs.ParseLatency("lookup=1ms,read=2ms+-500us,*=100us")
	configs = append(configs, all)
	wb, _ := labfs.Preset("writeback")
	wb.Bandwidth, wb.ReadChunk = 12345, 4097
	configs = append(configs, wb)

	for _, cfg := range configs {
		flags := cfg.Flags()
		// The shell would remove the quotes around the latency spec.
		var args []string
		for _, f := range flags {
			args = append(args, strings.ReplaceAll(f, "'", ""))
		}
		if got := mountConfig(t, args...); !reflect.DeepEqual(got, cfg) {
			t.Errorf("flags %v:\n got %+v\nwant %+v", flags, got, cfg)
		}
	}
	// The zero Config is the default preset: the documented default, written once.
	if def, _ := labfs.Preset("default"); !reflect.DeepEqual(def, labfs.Config{}) || len((labfs.Config{}).Flags()) != 0 {
		t.Errorf("the default preset is %+v (flags %v), want the zero Config", def, (labfs.Config{}).Flags())
	}
	if got := mountConfig(t); !reflect.DeepEqual(got, labfs.Config{}) {
		t.Errorf("fs mount with no flags: %+v, want the zero Config", got)
	}
	if def, _ := labfs.Preset("default"); len(def.Flags()) != 0 {
		t.Errorf("the default preset needs no flags, got %v", def.Flags())
	}
	if pt, _ := labfs.Preset("passthrough"); strings.Join(pt.Flags(), " ") != "--passthrough" {
		t.Errorf("passthrough preset: got %v, want --passthrough (a tie goes to the default preset)", pt.Flags())
	}
	nc, _ := labfs.Preset("nocache")
	nc.ReadPipeline = 4
	if got := strings.Join(nc.Flags(), " "); got != "--preset=nocache --read-pipeline=4" {
		t.Errorf("nocache preset with a read pipeline: got %v, want the flags over the nocache preset", got)
	}
}

// Size flags take units, as --read-chunk always did.
func TestSizeFlags(t *testing.T) {
	got := mountConfig(t, "--max-write=128KiB", "--max-read", "65536", "--max-readahead=1MB", "--read-chunk=32MiB")
	if got.MaxWrite != 128<<10 || got.MaxRead != 65536 || got.MaxReadahead != 1e6 || got.ReadChunk != 32<<20 {
		t.Errorf("got max-write %d, max-read %d, max-readahead %d, read-chunk %d", got.MaxWrite, got.MaxRead, got.MaxReadahead, got.ReadChunk)
	}
	if s := strings.Join(got.Flags(), " "); !strings.Contains(s, "--max-write=128KiB") || !strings.Contains(s, "--max-read=64KiB") {
		t.Errorf("flags %s: want the sizes in units", s)
	}
}

// fs mount words the lab fs's option errors as its flags, the options it
// names beside the one at fault too.
func TestFSMountWordsOptionsAsFlags(t *testing.T) {
	for args, want := range map[string]string{
		"fs mount --keep-cache --direct-io a b":          "--keep-cache and --direct-io contradict each other: choose one",
		"fs mount --latency lookup=1ms+-2ms a b":         "--latency lookup=1ms+-2ms: jitter larger than the delay would make it negative",
		"fs mount --preset passthrough --keep-cache a b": "--keep-cache does not combine with --passthrough",
		"fs mount --read-pipeline 1000 a b":              "(each holds a --read-chunk per open file)",
	} {
		root := newRootCmd()
		root.SetArgs(strings.Fields(args))
		if err := root.Execute(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}
