package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/report"
	"github.com/fusescope/fusescope/internal/syslive"
	"github.com/fusescope/fusescope/internal/sysserve"
	"github.com/fusescope/fusescope/internal/systrace"
	"github.com/spf13/cobra"
)

func newSyscallsCmd() *cobra.Command {
	var o syscallsOptions
	c := &cobra.Command{
		Use:   "syscalls [flags] LOG... | -- CMD [ARGS...] | -p PID",
		Short: "System calls from strace logs or live: hot spots, time per category, per-file I/O, waits, process tree",
		Long: `Analyse system-call logs written by strace -f -tt -T -y (and its variants:
-t, -ttt, -r, -yy, -i, -n, with or without PIDs, -o files, -ff file sets,
strace-log-merge output; gzip, bzip2 or zstd compressed; "-" reads
standard input). Calls split into "<unfinished ...>" and
"<... resumed>" lines are joined per thread; malformed lines are counted and
reported with their line numbers. In a log without -y (strace-analyzer's
"strace -s 0 -ff", an attach with -p), fds are followed through the calls
that make, duplicate and close them, and forks. Record a log with:

  strace -f -tt -T -y -o app.log ./app

Or trace live, without ptrace: "-- CMD ARGS" runs a command and traces it and
every process it starts, and exits with its status, as strace does; "-p PID"
traces a running process (each thread from its next call) and the processes
it starts, until it exits or Ctrl-C. The live source counts calls in the
kernel (eBPF on the raw syscall tracepoints, as root) and keeps only the
calls that create, name or close fds and processes, and calls of at least
--min-wait, one by one; the same analyzers then run on what it found
(docs/syscalls.md says what differs from a log).

Loading the programs takes ~40 ms, more than many a short command runs.
"--serve" loads them once and keeps them until Ctrl-C or SIGTERM (nothing is
pinned: they go with its process); while it runs, "-- CMD" and "-p PID"
use its programs through its socket (0600) and only attach them, one run
at a time (a run that finds them busy loads its own).`,
		Example: `  fusescope syscalls app.log
  fusescope syscalls --top 20 app.log.*        # an -ff file set
  fusescope syscalls --category network --since 2 --until 10 app.log
  fusescope syscalls --file '/cvmfs/*' -p 4242 --timeline 1 app.log
  fusescope syscalls --json app.log > app.json
  fusescope syscalls --csv --table files app.log > files.csv
  fusescope syscalls -- make -j2                # live: a command and its children
  fusescope syscalls --min-wait 10ms -p 4242     # live: a running process
  fusescope syscalls --serve &                   # keep the programs loaded for the runs to come`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.logs, o.command, o.dashed = args, nil, cmd.ArgsLenAtDash() >= 0
			if o.dashed {
				o.logs, o.command = args[:cmd.ArgsLenAtDash()], args[cmd.ArgsLenAtDash():]
			}
			o.socketGiven = cmd.Flags().Changed("socket")
			if err := o.validate(); err != nil {
				return err
			}
			switch {
			case o.serve:
				return sysserve.Run(o.socket, version, os.Stderr)
			case o.live():
				return syslive.Trace(context.Background(), o.traceConfig())
			}
			return systrace.AnalyzeLogs(o.logsConfig())
		},
	}
	f := c.Flags()
	f.BoolVar(&o.view.json, "json", false, "print the report as JSON (docs/syscalls.md)")
	f.BoolVar(&o.view.csv, "csv", false, "print one of the report's tables as CSV, every row (--table; docs/syscalls.md)")
	f.StringVar(&o.view.table, "table", "", "with --csv: the table to print: "+strings.Join(report.SyscallsCSVTables, ", ")+" (default syscalls)")
	f.IntVar(&o.view.top, "top", 10, "rows in each list and processes in the tree (0: all)")
	f.IntSliceVarP(&o.pids, "pid", "p", nil, "with logs: keep only these processes (repeatable); without: trace this running process live")
	f.StringVarP(&o.output, "output", "o", "", "write the report to `FILE` instead of standard output (a traced command keeps the terminal)")
	f.DurationVar(&o.minWait, "min-wait", 0, "the shortest call counted as a wait (wait groups, critical path; live: kept one by one) (default 1ms)")
	f.BoolVar(&o.view.summary, "summary", false, "print the calls table as strace -w -c does (% time, seconds, usecs/call, calls, errors, syscall): seconds are wall-clock time in the calls, not strace -c's system CPU time")
	f.StringArrayVar(&o.filter.Files, "file", nil, "keep only calls on targets matching this `GLOB` (a pattern without / matches the base name; repeatable)")
	f.StringVar(&o.filter.Category, "category", "", "keep only this category: file I/O, network, IPC, memory, process, sleep and timers, other")
	f.Float64Var(&o.filter.From, "since", 0, "keep only calls from this many seconds after the log's first timestamp (live: after the command's release, or -p's attach)")
	f.Float64Var(&o.filter.To, "until", 0, "keep only calls up to this many seconds after the log's first timestamp (live: after the command's release, or -p's attach)")
	f.StringArrayVar(&o.filter.Comms, "comm", nil, "keep only the processes that executed a program whose base name matches `NAME` (a glob; repeatable), from that exec on")
	f.Float64Var(&o.timeline, "timeline", 0, "add a timeline: calls and time per category in bins of this many seconds, from where --since counts")
	f.BoolVar(&o.serve, "serve", false, "load the live source's programs once and serve them to the live runs to come, until Ctrl-C")
	f.StringVar(&o.socket, "socket", sysserve.DefaultSocket, "the `PATH` of --serve's socket: where it listens, and where a live run looks for it")
	f.BoolVar(&o.noServer, "no-server", false, "live: load the programs for this run even when a --serve runs")
	exclusive(c, "json", "csv", "summary")
	exclusive(c, "serve", "no-server")
	return c
}

// reportView is how a syscalls report is printed (syscalls and show): as
// text with top rows per list, as JSON, or one table as CSV.
type reportView struct {
	json, csv bool
	summary   bool
	table     string
	top       int
}

func (v reportView) check() error {
	if v.top < 0 {
		return fmt.Errorf("--top %d: give the rows to show in each list, or 0 for all", v.top)
	}
	if v.table != "" {
		if !v.csv {
			return fmt.Errorf("--table chooses the table --csv prints: add --csv")
		}
		if _, ok := report.SyscallsCSVColumns[v.table]; !ok {
			return fmt.Errorf("--table %q: give one of %s", v.table, strings.Join(report.SyscallsCSVTables, ", "))
		}
	}
	return nil
}

// write writes a record's system-call report in the chosen view.
func (v reportView) write(w io.Writer, rec *profile.Record) error {
	r := rec.Syscalls
	switch {
	case v.summary:
		return report.WriteStraceSummary(w, r)
	case v.json:
		return rec.Write(w)
	case v.csv && v.table != "":
		return report.WriteSyscallsCSVTable(w, r, v.table)
	case v.csv:
		return report.WriteSyscallsCSV(w, r)
	}
	return report.WriteSyscallsText(w, r, v.top)
}

// syscallsOptions are fusescope syscalls' flags and arguments.
type syscallsOptions struct {
	view          reportView
	pids          []int
	filter        systrace.Filter
	timeline      float64
	minWait       time.Duration
	output        string
	serve         bool
	socket        string
	socketGiven   bool // --socket was given: a live run needs its server
	noServer      bool
	logs, command []string // the arguments before and after --
	dashed        bool     // -- was given
}

// live: a command (-- CMD) or a process (-p PID without logs) to trace.
func (o *syscallsOptions) live() bool {
	return len(o.command) > 0 || (len(o.logs) == 0 && len(o.pids) > 0)
}

// validate refuses what cannot be run, in one sentence that names the flag
// and the fix, in the order the checks have always been made. The
// filter's errors are option.Errors, which word its settings as flags.
func (o *syscallsOptions) validate() error {
	if o.serve {
		if len(o.logs) > 0 || len(o.pids) > 0 || o.dashed {
			return fmt.Errorf("--serve takes no logs, command or -p: run it alone, then fusescope syscalls -- CMD in another shell")
		}
		return nil
	}
	if o.dashed && len(o.command) == 0 {
		return fmt.Errorf("nothing after --: give the command to trace, as in fusescope syscalls -- ls -l")
	}
	if err := o.filter.Validate(); err != nil {
		return err
	}
	if err := o.view.check(); err != nil {
		return err
	}
	if o.view.table == "timeline" && o.timeline == 0 {
		return fmt.Errorf("--table timeline needs --timeline SECONDS, the width of its bins")
	}
	// strace's timestamps have microseconds; !(a && b) refuses NaN.
	if o.timeline != 0 && !(o.timeline >= 1e-6 && o.timeline <= 1e6) {
		return fmt.Errorf("--timeline %v: give a bin width from 0.000001 to 1000000 seconds", o.timeline)
	}
	if o.live() {
		switch {
		case len(o.logs) > 0:
			return fmt.Errorf("give strace logs, or a command (-- CMD) or -p PID to trace live, not both")
		case len(o.command) > 0 && len(o.pids) > 0:
			return fmt.Errorf("give either -- CMD or -p PID to trace live, not both")
		case len(o.pids) > 1:
			return fmt.Errorf("-p takes one process when tracing live (it follows the processes it starts)")
		case len(o.filter.Comms) > 0 && o.timeline > 0:
			return fmt.Errorf("--timeline counts every traced process in the kernel, live: it cannot be combined with --comm (drop one of them)")
		}
	} else if len(o.logs) == 0 {
		return fmt.Errorf("give strace logs to analyse, -- CMD ARGS to trace a command, or -p PID to trace a process (see fusescope syscalls --help)")
	}
	if o.minWait < 0 {
		return fmt.Errorf("--min-wait %v: give a positive duration, such as 1ms", o.minWait)
	}
	if !o.live() && len(o.pids) > 0 && len(o.filter.Comms) > 0 {
		return fmt.Errorf("give -p PID or --comm NAME to choose processes, not both")
	}
	return nil
}

// analysis is how the analyzers are tuned, live or from logs.
func (o *syscallsOptions) analysis() systrace.Options {
	return systrace.Options{MaxWaits: o.view.top, TimelineS: o.timeline, WaitMinS: o.minWait.Seconds()}
}

// logsConfig is the analysis of strace logs.
func (o *syscallsOptions) logsConfig() systrace.LogsConfig {
	return systrace.LogsConfig{Logs: o.logs, PIDs: o.pids, Filter: o.filter, Analysis: o.analysis(),
		Tool: version, Command: os.Args, Output: o.output, Stdout: os.Stdout, Write: o.view.write}
}

// traceConfig is a live run.
func (o *syscallsOptions) traceConfig() syslive.TraceConfig {
	pid := 0
	if len(o.pids) == 1 {
		pid = o.pids[0]
	}
	cfg := syslive.LiveConfig{
		SyscallOptions: ktrace.SyscallOptions{PID: pid, MinWait: o.minWait, TimelineS: o.timeline,
			Since: seconds(o.filter.From), Until: seconds(o.filter.To),
			EmptyPrograms: os.Getenv(emptyProgramsEnv) != ""},
		Filter: o.filter, Analysis: o.analysis(),
		Command: os.Args, Tool: version, Traced: o.command,
	}
	if !o.noServer {
		cfg.Server, cfg.ServerRequired = o.socket, o.socketGiven
	}
	return syslive.TraceConfig{LiveConfig: cfg, Output: o.output, Stdout: os.Stdout, Stderr: os.Stderr, Write: o.view.write}
}

// emptyProgramsEnv, set by make bench only, attaches programs that do
// nothing: the floor the live source's slowdown is compared with.
const emptyProgramsEnv = "FUSESCOPE_BENCH_EMPTY_PROGRAMS"

// seconds converts a flag's seconds to a duration (validated before).
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
