package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/report"
	"github.com/fusescope/fusescope/internal/session"
	"github.com/spf13/cobra"
)

// traceOptions are fusescope trace's flags and arguments.
type traceOptions struct {
	out      outputFlags
	mounts   []string
	conns    []uint
	pid      int
	comm     string
	ops      []string
	stamp    bool
	recordTo string
	reapAge  time.Duration
	attach   string
	slower   time.Duration
	stages   bool
	hung     time.Duration
	files    int
	pages    bool
	calls    bool

	// From the arguments: [interval [count]] [-- CMD ARGS...].
	interval time.Duration
	count    int
	command  []string
	// Given on the command line, whatever their value.
	slowerSet, commSet bool
}

func newTraceCmd() *cobra.Command {
	var o traceOptions
	c := &cobra.Command{
		Use:   "trace [flags] [interval [count]] [-- CMD ARGS...]",
		Short: "Per-opcode FUSE request latency and counts, measured in the kernel",
		Long: `Trace FUSE requests from the kernel's fuse:fuse_request_send and
fuse:fuse_request_end tracepoints (Linux 6.12+) for any FUSE file system, with
no change to its daemon. Latency is from the moment the kernel queues a
request to the moment its reply is complete, aggregated in kernel maps into a
log2 histogram per mount and opcode. Before 6.12 (no fuse tracepoints) the
same programs attach to the kernel functions that queue and end a request:
fentry where fuse has BTF, else kprobes (Linux 5.10 on); a note says which,
and --attach forces one.

On Ctrl-C, or every interval seconds (count times), it prints a histogram per
opcode and a table sorted by total time. -o saves the whole run as a record
that "fusescope show" renders the same way.

--slower D also prints each request that took at least D, one line as it
ends, as bcc's ext4slower does: its time, requesting command and thread,
opcode, latency, error, bytes, inode and mount. Records (-o, --json) hold
them too. With --csv, those lines are CSV rows and nothing else is printed,
as ext4slower -j does (docs/record.md); -o still saves the statistics.

--stages splits each request into queue (until the daemon reads it from
/dev/fuse), daemon (until it begins writing the reply) and reply (until the
kernel completes it), for any daemon, by timing the reads and writes of
/dev/fuse of the processes that hold it; on fentry and kprobes, at the
kernel's side of /dev/fuse instead (docs/architecture.md).

--calls counts the application's file calls on the traced mounts (-p,
--comm or -- CMD names it), each joined to the FUSE requests its thread
sent: the share the kernel's caches served alone, the time inside FUSE.
--files N lists the files with the most FUSE time, by path; --page-cache
counts the mounts' page cache and its read hit ratio; --hung D (default
1s) lists the requests in flight longer than D with each report.

-- CMD ARGS runs the command once the probes are attached and ends the trace
when it exits, as perf stat -- CMD and bpftrace -c do; fusescope then exits
with the command's status. Every request made while it runs is traced (add
--mount or --comm to narrow it); a Ctrl-C reaches the command. A second
one, a SIGTERM or the end of the count ends the trace and the command with
it, as timeout does: SIGTERM to the command and the processes it started,
SIGKILL to those left 2 s later; a line says so, and fusescope exits with
the command's status.`,
		Example: `  fusescope trace                        # every FUSE mount, until Ctrl-C
  fusescope trace --mount /mnt/sshfs 5   # one mount, a report every 5 s
  fusescope trace -p 1234 --op LOOKUP,GETATTR -m 1 10
  fusescope trace --counts --csv 1       # counters only, as CSV every second
  fusescope trace --mount /cvmfs/sft.cern.ch -o run1.json
  fusescope trace --slower 10ms -m       # each request of 10 ms or more, as it ends
  fusescope trace --stages --mount /mnt/sshfs   # queue, daemon and reply time per opcode
  fusescope trace --calls --page-cache --files 10 --mount /mnt/lab -- make   # make's calls, the cache, the files
  fusescope trace --mount /mnt/lab -o fio.json -- fio job.fio   # while fio runs`,
		Args: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				args = args[:dash]
			}
			return cobra.MaximumNArgs(2)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.slowerSet, o.commSet = cmd.Flags().Changed("slower"), cmd.Flags().Changed("comm")
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				args, o.command = args[:dash], args[dash:]
				if len(o.command) == 0 {
					return fmt.Errorf("nothing after --: give the command to trace while it runs, as in fusescope trace -- ls -lR /mnt")
				}
			}
			var err error
			if o.interval, o.count, err = parseIntervalCount(args, "fusescope trace"); err != nil {
				return err
			}
			if err := o.validate(); err != nil {
				return err
			}
			cfg, err := o.config()
			if err != nil {
				return err
			}
			return ktrace.Trace(context.Background(), cfg)
		},
	}
	o.out.register(c)
	f := c.Flags()
	f.StringArrayVar(&o.mounts, "mount", nil, "trace only the FUSE file system mounted at `PATH` (repeatable)")
	f.UintSliceVar(&o.conns, "conn", nil, "trace only FUSE connection `N` (/sys/fs/fuse/connections/N; repeatable)")
	f.Lookup("conn").DefValue = "" // pflag would print "(default [])"
	f.IntVarP(&o.pid, "pid", "p", 0, "trace only requests made by process `PID` (not the RELEASE the kernel sends after its close, nor write-back); its exit ends the trace")
	f.StringVar(&o.comm, "comm", "", "trace only requests made by commands named `NAME`")
	f.StringSliceVar(&o.ops, "op", nil, "trace only these opcodes, e.g. `LOOKUP,GETATTR`")
	f.BoolVarP(&o.stamp, "timestamp", "T", false, "print a timestamp before each report")
	f.StringVarP(&o.recordTo, "output", "o", "", "save the whole run as a record to `RECORD.json`")
	f.DurationVar(&o.reapAge, "reap-age", ktrace.DefaultReapAge, "give up on requests in flight longer than this (counted, and their table slots reused)")
	f.DurationVar(&o.slower, "slower", 0, "also print each request that took at least this long (e.g. 10ms), one line as it ends")
	f.BoolVar(&o.stages, "stages", false, "split each request into queue (until the daemon reads it), daemon (until it writes the reply) and reply (until the kernel completes it), by timing the daemons' reads and writes of /dev/fuse")
	f.IntVar(&o.files, "files", 0, "also list the `N` files with the most FUSE time, by their path in the mount (not on the classic tracepoints)")
	f.BoolVar(&o.calls, "calls", false, "also count the application's file calls on the traced mounts (-p, --comm or -- CMD names it), each joined to the FUSE requests it sent: the share served by the kernel's caches alone, the time inside FUSE")
	f.BoolVar(&o.pages, "page-cache", false, "also count the traced mounts' page cache: pages read through it, added, removed, read-ahead, and the read hit ratio")
	f.DurationVar(&o.hung, "hung", time.Second, "list the requests in flight at least this long with each report (0: none)")
	f.StringVar(&o.attach, "attach", ktrace.AttachAuto, "how to attach: `auto` (tp_btf, else tracepoint; before 6.12 fentry, else kprobe), tp_btf (raw tracepoints with BTF: cheaper), tracepoint (classic), fentry or kprobe (the kernel's fuse functions)")
	return c
}

// validate refuses what the flags cannot mean together, in one sentence
// each, before anything is loaded.
func (o *traceOptions) validate() error {
	switch {
	case len(o.command) > 0 && o.pid > 0:
		return fmt.Errorf("-p and -- CMD both say what to trace: give one (--comm narrows a command's trace to its name)")
	case o.reapAge <= 0:
		return fmt.Errorf("--reap-age %v: give a positive duration, such as 10m (requests in flight longer are given up)", o.reapAge)
	case o.files < 0:
		return fmt.Errorf("--files %d: give how many files to list, e.g. --files 20", o.files)
	case o.hung < 0:
		return fmt.Errorf("--hung %v: give a positive duration, e.g. --hung 5s, or 0 to list none", o.hung)
	case o.slowerSet && o.slower <= 0:
		return fmt.Errorf("--slower %v: give a positive duration, e.g. --slower 10ms", o.slower)
	case o.slowerSet && o.out.counts:
		return fmt.Errorf("--slower measures each request's latency: leave out --counts")
	case o.pid < 0:
		return fmt.Errorf("-p %d: give a positive process id", o.pid)
	case o.commSet && o.comm == "":
		return fmt.Errorf("--comm: give a command name, as ps -o comm shows it")
	}
	if len(o.command) > 0 {
		if _, err := session.LookCommand(o.command[0]); err != nil {
			return err
		}
	}
	if o.pid > 0 {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", o.pid)); err != nil {
			return fmt.Errorf("-p %d: no such process", o.pid)
		}
	}
	if o.calls && o.pid == 0 && o.comm == "" && len(o.command) == 0 {
		return fmt.Errorf("--calls counts one application's calls: name it with -p PID, --comm NAME or -- CMD")
	}
	return nil
}

// config maps the options to the tracer's configuration and the views.
func (o *traceOptions) config() (ktrace.TraceConfig, error) {
	src := ktrace.RequestConfig{
		Options: ktrace.Options{PID: o.pid, Comm: o.comm, ReapAge: o.reapAge, Attach: o.attach, Slower: o.slower,
			Stages: o.stages, PageCache: o.pages, Calls: o.calls},
		Command:   os.Args,
		Tool:      version,
		Intervals: o.interval > 0,
		Hung:      o.hung,
		Files:     o.files,
	}
	for _, s := range o.ops {
		for _, name := range strings.Split(s, ",") {
			op, err := fuseproto.ParseOpcode(name)
			if err != nil {
				return ktrace.TraceConfig{}, fmt.Errorf("--op: %v", err)
			}
			src.Ops = append(src.Ops, op)
		}
	}
	for _, c := range o.conns {
		src.Conns = append(src.Conns, uint32(c))
	}
	var err error
	if src.Mounts, err = resolveMounts(o.mounts); err != nil {
		return ktrace.TraceConfig{}, err
	}
	// Text and CSV: each slow request as it ends; JSON records hold them.
	slowCSV := o.slower > 0 && o.out.csv
	switch {
	case slowCSV:
		src.Slow = func(r profile.SlowRequest) { report.WriteSlowCSV(os.Stdout, false, r) }
	case o.slower > 0 && !o.out.json:
		src.Slow = func(r profile.SlowRequest) { report.WriteSlow(os.Stdout, r, o.out.unit(), o.stages) }
	}
	r := &report.Renderer{Format: o.out.format(), W: os.Stdout, Stamp: o.stamp, Lines: o.interval > 0}
	return ktrace.TraceConfig{
		Requests: src,
		Run: session.Config{Interval: o.interval, Count: o.count, Command: o.command, PID: o.pid, Output: o.recordTo, Log: os.Stderr,
			Emit: func(rec *profile.Record, final bool) error {
				if slowCSV {
					return nil // CSV holds one table: the requests' rows went out as they ended; -o keeps the statistics
				}
				return r.Render(rec)
			}},
		Ready: func(source *ktrace.RequestSource) {
			o.announce(source)
			switch {
			case slowCSV:
				report.WriteSlowCSV(os.Stdout, true)
			case o.slower > 0 && !o.out.json:
				report.WriteSlowHeader(os.Stdout, o.out.unit(), o.stages)
			}
		},
	}, nil
}

// announce says what is traced, once the probes are attached.
func (o *traceOptions) announce(source *ktrace.RequestSource) {
	if _, notes := source.Probes(); len(notes) > 0 {
		fmt.Fprintf(os.Stderr, "note: %s.\n", strings.Join(notes, "; "))
	}
	what := "every FUSE connection"
	if n := len(source.Conns()); n > 0 {
		what = fmt.Sprintf("%d FUSE connection(s)", n)
	}
	switch {
	case len(o.command) > 0:
		fmt.Fprintf(os.Stderr, "Tracing FUSE requests on %s while %s runs...\n", what, o.command[0])
	case o.interval > 0:
		fmt.Fprintf(os.Stderr, "Tracing FUSE requests on %s, reporting every %s... %s\n", what, o.interval, report.EndNote(o.interval, o.count))
	default:
		fmt.Fprintf(os.Stderr, "Tracing FUSE requests on %s... Hit Ctrl-C to end.\n", what)
	}
}

// parseIntervalCount reads bcc's [interval [count]] arguments.
// example is the command the messages show, e.g. "fusescope trace".
func parseIntervalCount(args []string, example string) (time.Duration, int, error) {
	var interval time.Duration
	count := 0
	if len(args) > 0 {
		secs, err := strconv.ParseFloat(args[0], 64)
		// !(a && b) also refuses NaN; the bounds keep the ticker sane and
		// the duration from overflowing (292 years).
		if err != nil || !(secs >= 0.01 && secs <= 1e6) {
			return 0, 0, fmt.Errorf("interval %q: give a number of seconds from 0.01 to 1000000, e.g. %s 5", args[0], example)
		}
		interval = time.Duration(secs * float64(time.Second))
	}
	if len(args) > 1 {
		n, err := strconv.Atoi(args[1])
		if err != nil || n <= 0 {
			return 0, 0, fmt.Errorf("count %q: give a positive number of reports, e.g. %s 5 10", args[1], example)
		}
		count = n
	}
	return interval, count, nil
}
