package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fusescope/fusescope/internal/exporter"
	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/labfs"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/report"
	"github.com/fusescope/fusescope/internal/session"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newFSCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "fs",
		Short: "The lab file system: every FUSE caching and transport mode as a switch",
	}
	c.AddCommand(newFSMountCmd(), newFSUmountCmd(), newFSStatsCmd())
	return c
}

// readyFD is the pipe on which a --background child says it is mounted.

func newFSMountCmd() *cobra.Command {
	var (
		preset     string
		background bool
		metrics    string
		latency    string
		bandwidth  string
		cfg        labfs.Config
	)
	var presetHelp []string
	for _, n := range labfs.PresetNames() {
		presetHelp = append(presetHelp, fmt.Sprintf("  %-12s %s", n, labfs.PresetDoc(n)))
	}
	c := &cobra.Command{
		Use:   "mount SRC MNT [flags]",
		Short: "Mount a passthrough of SRC at MNT with the chosen FUSE modes",
		Long: `Mount a passthrough of the directory SRC at MNT, served by fusescope's own
daemon (go-fuse), which keeps per-operation histograms that "fusescope fs
stats MNT" prints. Start from a preset and change what you study; flags
override the preset.

Presets:
` + strings.Join(presetHelp, "\n") + `

--latency and --bandwidth emulate a remote backend: each request waits its
operation's delay in its own goroutine (like an RPC client with one request
in flight per daemon thread), and READ and WRITE data cross one shared link
of the given rate, one transfer after another.

In the foreground, Ctrl-C unmounts; if the mount is busy (a file open in it,
a shell inside it) it says which processes use it and goes on serving, and a
second Ctrl-C unmounts it cleanly if they are done by then, else forces it
(umount -l: what is still open there fails with ENOTCONN). SIGTERM ends it at
once, forced if busy, after the write-behind queues are written.
--background detaches the daemon; fusescope fs umount MNT ends it.`,
		Example: `  fusescope fs mount /data /mnt/lab --background
  fusescope fs mount /data /mnt/lab --preset nocache --latency 'lookup=1ms,read=2ms+-0.5ms,*=100us'
  fusescope fs mount /data /mnt/lab --preset writeback --bandwidth 100MiB/s --background
  fusescope fs mount /data /mnt/lab --metrics 127.0.0.1:9641 --background   # the daemon's side, for Prometheus
  fusescope fs stats /mnt/lab
  fusescope fs umount /mnt/lab`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			base, err := labfs.Preset(preset)
			if err != nil {
				return fmt.Errorf("--preset: %v", err)
			}
			base.Override(&cfg, cmd.Flags().Changed)
			if base.Latency, err = labfs.ParseLatency(latency); err != nil {
				return err
			}
			if base.Bandwidth, err = labfs.ParseBandwidth(bandwidth); err != nil {
				return err
			}
			if err := base.Validate(); err != nil {
				return err
			}
			return mountConfigured(args[0], args[1], base, background, metrics)
		},
	}
	f := c.Flags()
	// The defaults --help shows are the zero Config's (the default preset),
	// written once in labfs; a flag given overrides the chosen preset
	// (Override).
	def := labfs.Config{}
	f.StringVar(&preset, "preset", "default", "start from this preset: "+strings.Join(labfs.PresetNames(), ", "))
	f.BoolVar(&background, "background", false, "detach, and return once the file system is mounted")
	f.StringVar(&metrics, "metrics", "", "serve the daemon's own statistics as Prometheus metrics on `HOST:PORT` (fusescope export's names, side=\"daemon\")")
	f.Var(timeoutFlag{&cfg.EntryTimeout}, "entry-timeout", "how long the kernel may cache name lookups")
	f.Var(timeoutFlag{&cfg.AttrTimeout}, "attr-timeout", "how long the kernel may cache attributes")
	f.DurationVar(&cfg.NegativeTimeout, "negative-timeout", def.NegativeTimeout, "how long the kernel may cache failed lookups")
	f.BoolVar(&cfg.KeepCache, "keep-cache", def.KeepCache, "keep cached pages across opens (FOPEN_KEEP_CACHE)")
	f.BoolVar(&cfg.DirectIO, "direct-io", def.DirectIO, "bypass the page cache (FOPEN_DIRECT_IO)")
	f.BoolVar(&cfg.WritebackCache, "writeback-cache", def.WritebackCache, "write-back caching in the kernel instead of write-through")
	switchFlag(f, &cfg.NoAutoInvalData, "auto-inval-data", "drop cached pages when mtime or size change (FUSE_AUTO_INVAL_DATA)")
	f.BoolVar(&cfg.Passthrough, "passthrough", def.Passthrough, "FUSE passthrough of reads and writes to the backing file (root, Linux 6.9+)")
	f.StringVar(&cfg.Readdirplus, "readdirplus", labfs.FlagDefault("readdirplus"), "READDIRPLUS: auto, on or off")
	switchFlag(f, &cfg.SerialDirops, "parallel-dirops", "allow parallel lookups and readdirs in one directory")
	f.Var(&sizeFlag{&cfg.MaxRead}, "max-read", "largest READ, e.g. 128KiB (mount option max_read; 0: the kernel's)")
	f.Var(&sizeFlag{&cfg.MaxWrite}, "max-write", "largest WRITE, e.g. 128KiB (0: 1MiB)")
	f.Var(&sizeFlag{&cfg.MaxReadahead}, "max-readahead", "largest read-ahead, e.g. 512KiB (0: the kernel's)")
	f.IntVar(&cfg.MaxBackground, "max-background", 0, "most background requests in flight (default 12)")
	f.IntVar(&cfg.Congestion, "congestion-threshold", 0, "background requests at which the kernel sees congestion (default 3/4 of max-background)")
	f.IntVar(&cfg.Threads, "threads", 0, "most requests the daemon serves at once (0: no limit)")
	switchFlag(f, &cfg.NoKillprivV2, "killpriv-v2", "negotiate HANDLE_KILLPRIV_V2 (false restores a GETXATTR security.capability round trip per write)")
	switchFlag(f, &cfg.NoDefaultPermissions, "default-permissions", "the kernel checks file modes and POSIX ACLs (mount option default_permissions, FUSE_POSIX_ACL); false: no checks, and only the mounting user may use the mount")
	f.DurationVar(&cfg.MDCacheTTL, "md-cache", 0, "answer GETATTR from the daemon's own attribute cache for this long (0: off)")
	f.IntVar(&cfg.ReadPipeline, "read-pipeline", 0, "reads to keep in flight ahead of each open file's reader (0: off; 4 hides a WAN's round trips from a sequential reader)")
	f.Var(&sizeFlag{&cfg.ReadChunk}, "read-chunk", "size of each pipelined read (default "+labfs.FlagDefault("read-chunk")+")")
	f.IntVar(&cfg.WriteBehind, "write-behind", 0, "writes to acknowledge before they reach the backend, per file (0: off); written out by close and fsync, which report their errors")
	f.BoolVar(&cfg.ReaddirAhead, "readdir-ahead", false, "fetch each opened directory's listing in the background at OPENDIR, in one backend request, and answer its READDIRs from it")
	f.StringVar(&cfg.Invalidation, "invalidation", labfs.FlagDefault("invalidation"), "invalidation policy: none; cto (keep pages across opens unless the file changed since its last close); or notify (watch the source with inotify and invalidate the kernel's cache of a file changed behind the mount at once)")
	f.StringVar(&cfg.Xattrs, "xattrs", labfs.FlagDefault("xattrs"), "extended attributes: pass (to the source), or refused with enosys (the kernel stops asking after one) or eopnotsupp (it asks every time)")
	f.IntVar(&cfg.MaxInodes, "max-inodes", 0, "inodes the kernel may keep; past it the least recently used names are invalidated (0: no limit)")
	f.StringVar(&latency, "latency", "", "emulated backend latency per operation, e.g. 'lookup=1ms,getattr=500us,read=2ms+-0.5ms,*=100us' (getattr= delays STATX too, which stat(1) sends, unless statx= is given)")
	f.StringVar(&bandwidth, "bandwidth", "", "emulated backend bandwidth for READ and WRITE data, e.g. 100MiB/s")
	return c
}

// mountConfigured mounts SRC at MNT once the flags are resolved, with the
// daemon's statistics served as Prometheus metrics on metrics (HOST:PORT;
// "": not served); the tests replace it to see the configuration the flags
// gave.
var mountConfigured = func(src, mnt string, cfg labfs.Config, background bool, metrics string) error {
	if background {
		// The same command again, detached, without --background.
		var args []string
		for _, a := range os.Args[1:] {
			if a != "--background" && a != "--background=true" {
				args = append(args, a)
			}
		}
		return labfs.ServeInBackground(mnt, args, os.Stderr)
	}
	var opts labfs.DaemonOptions
	if metrics != "" {
		opts.Publisher = &metricsPublisher{addr: metrics}
	}
	return labfs.ServeWith(src, mnt, cfg, os.Stderr, opts)
}

// metricsPublisher serves the lab daemon's statistics as Prometheus
// metrics (fs mount --metrics), with the exporter's names and
// side="daemon".
type metricsPublisher struct {
	addr string
	l    net.Listener
}

func (p *metricsPublisher) Open() (err error) {
	p.l, err = exporter.Listen("--metrics", p.addr)
	return err
}

func (p *metricsPublisher) Publish(ctx context.Context, record func() (*profile.Record, error)) {
	exporter.Serve(ctx, p.l, exporter.Handler(exporter.New(record, "daemon")))
}

func (p *metricsPublisher) Close() error { return p.l.Close() }

func newFSUmountCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "umount MNT",
		Short: "Unmount a lab file system; its daemon exits",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mnt, _ := filepath.Abs(args[0])
			return labfs.UnmountPath(mnt, os.Stderr)
		},
	}
}

func newFSStatsCmd() *cobra.Command {
	var (
		out   outputFlags
		stamp bool
	)
	c := &cobra.Command{
		Use:   "stats MNT [interval [count]]",
		Short: "The lab file system daemon's own per-operation statistics",
		Long: `Print the daemon's own view of a mounted lab file system: per-operation
latency from request receipt to reply (histograms and table, as trace
prints them), the negotiated FUSE INIT flags and limits, and the cost of the
daemon's timers. --json prints it as a record that "fusescope show" renders.

With an interval, it reports every interval seconds (count times, or until
Ctrl-C) what the daemon served in that interval alone, as gluster's "volume
profile info incremental" does: requests, histograms and the user-space
features' counters of the interval; inodes, the write-behind's deepest
queue and the heap as they stand at its end. The configuration is printed
with the first report.`,
		Example: `  fusescope fs stats /mnt/lab
  fusescope fs stats --no-hist -m /mnt/lab 5      # what the daemon served, every 5 s
  fusescope fs stats --json /mnt/lab 1 60 > lab.jsonl`,
		Args: cobra.RangeArgs(1, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			mnt, _ := filepath.Abs(args[0])
			interval, count, err := parseIntervalCount(args[1:], "fusescope fs stats "+args[0])
			if err != nil {
				return err
			}
			if m, err := fuseconn.TopMount(mnt); err == nil && m != nil && m.FSType != labfs.FSType {
				hint := "fusescope trace --mount " + mnt + " measures any file system's requests from the kernel"
				if !strings.HasPrefix(m.FSType, "fuse") {
					hint = "mount a lab file system with fusescope fs mount SRC MNT"
				}
				return fmt.Errorf("%s is a %s mount, not a fusescope lab file system, whose daemon keeps these statistics: %s", mnt, m.FSType, hint)
			}
			r := &report.Renderer{Format: out.format(), W: os.Stdout, Stamp: stamp, Lines: interval > 0}
			run := session.Config{Interval: interval, Count: count, Immediate: interval == 0,
				Ready: func() {
					if interval > 0 {
						fmt.Fprintf(os.Stderr, "Reporting what the daemon of %s serves every %s... %s\n", mnt, interval, report.EndNote(interval, count))
					}
				},
				Emit: func(rec *profile.Record, _ bool) error { return r.Render(rec) },
			}
			_, err = session.Run(context.Background(), run, func(session.Target) (session.Source, error) {
				src, err := labfs.OpenStats(mnt)
				if err != nil {
					if m, merr := fuseconn.TopMount(mnt); merr == nil && m != nil {
						if owner := m.Owner(); owner >= 0 && owner != os.Geteuid() {
							return nil, fmt.Errorf("%s was mounted by uid %d, whose daemon answers its own user only (its control socket is 0600, in that user's directory): run fusescope fs stats %s as uid %d (sudo, if root)", mnt, owner, mnt, owner)
						}
					}
					return nil, err
				}
				return src, nil
			})
			return err
		},
	}
	out.register(c)
	c.Flags().BoolVarP(&stamp, "timestamp", "T", false, "print a timestamp before each report")
	return c
}

// timeoutFlag sets a timeout of a Config, nil standing for the default's.
type timeoutFlag struct{ p **time.Duration }

func (f timeoutFlag) String() string {
	if f.p == nil || *f.p == nil {
		return labfs.DefaultTimeout.String()
	}
	return (**f.p).String()
}

func (f timeoutFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*f.p = &d
	return nil
}

func (f timeoutFlag) Type() string { return "duration" }

// switchFlag registers --name, on by default, for a Config field that
// says the opposite (NoAutoInvalData for --auto-inval-data): the zero
// Config is the default preset.
func switchFlag(f *pflag.FlagSet, off *bool, name, usage string) {
	f.VarPF(invertedFlag{off}, name, "", usage).NoOptDefVal = "true"
}

type invertedFlag struct{ off *bool }

func (f invertedFlag) String() string {
	if f.off == nil {
		return "true"
	}
	return strconv.FormatBool(!*f.off)
}

func (f invertedFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*f.off = !v
	return nil
}

func (f invertedFlag) Type() string     { return "bool" }
func (f invertedFlag) IsBoolFlag() bool { return true }

// sizeFlag is a byte count given as a size: 128KiB, 1MiB, 4096.
type sizeFlag struct{ p *int }

func (f *sizeFlag) String() string {
	if f.p == nil || *f.p == 0 {
		return "0"
	}
	return labfs.FormatSize(uint64(*f.p))
}

func (f *sizeFlag) Set(s string) error {
	v, err := labfs.ParseSize(s)
	if err != nil || v > 1<<30 {
		return fmt.Errorf("give a size up to 1GiB, like 128KiB")
	}
	*f.p = int(v)
	return nil
}

func (f *sizeFlag) Type() string { return "size" }
