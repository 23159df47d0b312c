package main

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/fusescope/fusescope/internal/exporter"
	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/session"
	"github.com/spf13/cobra"
)

func newExportCmd() *cobra.Command {
	var (
		listen    string
		mounts    []string
		stages    bool
		hung      time.Duration
		maxMounts int
		maxSeries int
		attach    string
	)
	c := &cobra.Command{
		Use:   "export [--listen 127.0.0.1:9640] [--mount PATH]...",
		Short: "Serve a running trace's FUSE metrics to Prometheus",
		Long: `Trace FUSE requests, as fusescope trace does, and serve them as
Prometheus metrics at http://LISTEN/metrics until Ctrl-C or SIGTERM: per
mount and opcode request, error and byte counters and latency histograms
in seconds (classic buckets, powers of two from about 1 us to 8.6 s, and
native histograms to a scraper that asks for them), stage histograms
with --stages, each connection's fusectl gauges (waiting, max_background,
congestion_threshold, aborted), requests in flight and hung, the
tracer's drops and its BPF programs' own run time (the kernel's
accounting is on while it runs). A scrape reads the kernel's maps then;
nothing is sampled in between. Mounts that go away leave the output.
The mounts' series are bounded by --max-series (default 20,000, a scrape
of ~50 ms here): each opcode of a mount makes 31 series (112 with
--stages), each mount 7 more; the mounts are labelled in connection order
while theirs fit, the rest summed under mount="other", and a mount keeps
its label while it fits.
docs/views.md lists the metrics; contrib/grafana holds a dashboard.`,
		Example: `  fusescope export                              # every FUSE mount, on 127.0.0.1:9640
  fusescope export --mount /cvmfs/sft.cern.ch --stages --listen 127.0.0.1:9641
  curl -s 127.0.0.1:9640/metrics | grep fusescope_fuse_requests_total`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if hung <= 0 {
				return fmt.Errorf("--hung %v: give a positive duration, such as 10s", hung)
			}
			if maxMounts < 0 {
				return fmt.Errorf("--max-mounts %d: give a number of mounts, 0 for no bound", maxMounts)
			}
			if maxSeries < 0 {
				return fmt.Errorf("--max-series %d: give a number of series, 0 for no bound", maxSeries)
			}
			cfg := ktrace.RequestConfig{
				// Coarse: the histograms served have the log2 buckets.
				Options: ktrace.Options{ReapAge: ktrace.DefaultReapAge, Attach: attach, Stages: stages, Coarse: true},
				Command: os.Args, Tool: version,
				Hung:        time.Nanosecond, // every request in flight: the in-flight gauge
				ProgramCost: true,
			}
			var err error
			if cfg.Mounts, err = resolveMounts(mounts); err != nil {
				return err
			}
			if os.Getenv("GOMEMLIMIT") == "" {
				// A scrape allocates ~0.7 KB per series and the heap would
				// grow to twice what it keeps between scrapes: a soft
				// limit has the collector keep an exporter of 1,600
				// histograms under 50 MB, at twice the scrape time
				// (docs/performance.md).
				debug.SetMemoryLimit(exporterMemoryLimit)
			}
			l, err := exporter.Listen("--listen", listen)
			if err != nil {
				return err
			}
			defer l.Close()
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			run := session.Config{Log: os.Stderr,
				Ready: func() {
					fmt.Fprintf(os.Stderr, "Serving FUSE metrics at http://%s/metrics... Hit Ctrl-C to end.\n", l.Addr())
				},
			}
			_, err = session.Run(ctx, run, func(session.Target) (session.Source, error) {
				src, err := ktrace.OpenRequests(cfg)
				if err != nil {
					return nil, err
				}
				shared := session.NewShared(src)
				col := exporter.New(shared.Snapshot, "kernel")
				col.HungAfter, col.MaxMounts, col.MaxSeries, col.InFlight = hung, maxMounts, maxSeries, true
				go func() {
					if err := exporter.Serve(ctx, l, exporter.Handler(col)); err != nil {
						fmt.Fprintf(os.Stderr, "fusescope export: serving the metrics: %v\n", err)
					}
				}()
				return shared, nil
			})
			stop()
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:9640", "serve the metrics on `HOST:PORT` (0.0.0.0:9640 for every interface)")
	f.StringArrayVar(&mounts, "mount", nil, "trace only the FUSE file system mounted at `PATH` (repeatable); its going away ends the export")
	f.BoolVar(&stages, "stages", false, "also export the queue, daemon and reply stages' histograms (times the daemons' reads and writes of /dev/fuse)")
	f.DurationVar(&hung, "hung", 10*time.Second, "count requests in flight at least this long as hung")
	f.IntVar(&maxSeries, "max-series", exporter.DefaultMaxSeries, "label mounts while their series stay within `N`; the others are summed under mount=\"other\" (0: no bound)")
	f.IntVar(&maxMounts, "max-mounts", 0, "label at most `N` mounts; the others are summed under mount=\"other\" (0: no bound)")
	f.StringVar(&attach, "attach", ktrace.AttachAuto, "how to attach: `auto`, tp_btf, tracepoint, fentry or kprobe (as trace's)")
	return c
}

// exporterMemoryLimit is export's soft memory limit (GOMEMLIMIT overrides it).
const exporterMemoryLimit = 30 << 20
