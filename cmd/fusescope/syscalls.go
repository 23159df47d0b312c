package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/report"
	"github.com/fusescope/fusescope/internal/session"

	"github.com/fusescope/fusescope/internal/systrace"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

func newSyscallsCmd() *cobra.Command {
	var (
		view     reportView
		pids     []int
		filter   systrace.Filter
		timeline float64
		minWait  time.Duration
		output   string
		serve    bool
		socket   string
		noServer bool
	)
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
			if serve {
				if len(args) > 0 || len(pids) > 0 || cmd.ArgsLenAtDash() >= 0 {
					return fmt.Errorf("--serve takes no logs, command or -p: run it alone, then fusescope syscalls -- CMD in another shell")
				}
				if err := ktrace.CheckPrivileges(); err != nil {
					return err
				}
				ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
				defer stop()
				return systrace.Serve(ctx, socket, version, func() {
					fmt.Fprintf(os.Stderr, "Serving the live source's programs on %s (pid %d): fusescope syscalls -- CMD and -p PID use them. Hit Ctrl-C to end.\n", socket, os.Getpid())
				})
			}
			logs, command := args, []string(nil)
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				logs, command = args[:dash], args[dash:]
				if len(command) == 0 {
					return fmt.Errorf("nothing after --: give the command to trace, as in fusescope syscalls -- ls -l")
				}
			}
			if err := filter.Validate(); err != nil {
				return err
			}
			if err := view.check(); err != nil {
				return err
			}
			if view.table == "timeline" && timeline == 0 {
				return fmt.Errorf("--table timeline needs --timeline SECONDS, the width of its bins")
			}
			// strace's timestamps have microseconds; !(a && b) refuses NaN.
			if timeline != 0 && !(timeline >= 1e-6 && timeline <= 1e6) {
				return fmt.Errorf("--timeline %v: give a bin width from 0.000001 to 1000000 seconds", timeline)
			}
			if len(command) > 0 || (len(logs) == 0 && len(pids) > 0) {
				if len(logs) > 0 {
					return fmt.Errorf("give strace logs, or a command (-- CMD) or -p PID to trace live, not both")
				}
				if len(command) > 0 && len(pids) > 0 {
					return fmt.Errorf("give either -- CMD or -p PID to trace live, not both")
				}
				if len(pids) > 1 {
					return fmt.Errorf("-p takes one process when tracing live (it follows the processes it starts)")
				}
				if len(filter.Comms) > 0 && timeline > 0 {
					return fmt.Errorf("--timeline counts every traced process in the kernel, live: it cannot be combined with --comm (drop one of them)")
				}
				pid := 0
				if len(pids) == 1 {
					pid = pids[0]
				}
				if minWait < 0 {
					return fmt.Errorf("--min-wait %v: give a positive duration, such as 1ms", minWait)
				}
				if err := ktrace.CheckPrivileges(); err != nil {
					return err
				}
				src := systrace.LiveConfig{
					SyscallOptions: ktrace.SyscallOptions{PID: pid, MinWait: minWait, TimelineS: timeline,
						Since: seconds(filter.From), Until: seconds(filter.To),
						EmptyPrograms: os.Getenv(emptyProgramsEnv) != ""},
					Filter: filter, Analysis: systrace.Options{MaxWaits: view.top, TimelineS: timeline, WaitMinS: minWait.Seconds()},
					Command: os.Args, Tool: version, Traced: command,
				}
				if !noServer {
					src.Server, src.ServerRequired = socket, cmd.Flags().Changed("socket")
				}
				run := session.Config{Command: command, PID: pid, Output: output, Save: view.write,
					Ready: func() {
						if pid > 0 {
							fmt.Fprintf(os.Stderr, "Tracing the system calls of process %d and of the processes it starts... Hit Ctrl-C to end.\n", pid)
						}
					},
					Emit: func(rec *profile.Record, _ bool) error {
						if output != "" {
							return nil // the report goes to -o; the command keeps the terminal
						}
						return view.write(os.Stdout, rec)
					},
				}
				_, err := session.Run(context.Background(), run, func(t session.Target) (session.Source, error) {
					s, err := systrace.OpenLive(src, t)
					if err != nil {
						return nil, err
					}
					return s, nil
				})
				return err
			}
			if len(logs) == 0 {
				return fmt.Errorf("give strace logs to analyse, -- CMD ARGS to trace a command, or -p PID to trace a process (see fusescope syscalls --help)")
			}
			if minWait < 0 {
				return fmt.Errorf("--min-wait %v: give a positive duration, such as 1ms", minWait)
			}
			if err := checkLogs(logs); err != nil {
				return err
			}
			if os.Getenv("GOGC") == "" {
				// A batch job whose heap is small beside the logs it
				// streams: the collector runs a quarter as often, for
				// a heap ~1.6x the size (an -ff set of a Go build: 10%
				// less CPU, 37 -> 59 MB; docs/performance.md).
				debug.SetGCPercent(logsGCPercent)
				if os.Getenv("GOMEMLIMIT") == "" {
					debug.SetMemoryLimit(logsMemoryLimit) // where the collector works harder again
				}
			}
			out, err := session.CreateOutput(output)
			if err != nil {
				return err
			}
			args = logs
			p := systrace.NewParser()
			events := systrace.Logs(args, p)
			if len(pids) > 0 && len(filter.Comms) > 0 {
				return fmt.Errorf("give -p PID or --comm NAME to choose processes, not both")
			}
			filter.PIDs = map[int]bool{}
			for _, pid := range pids {
				filter.PIDs[pid] = true
			}
			r, err := systrace.Analyze(filter.Wrap(events), p, systrace.Options{MaxWaits: view.top, TimelineS: timeline, WaitMinS: minWait.Seconds()})
			if err == nil && r.Events == 0 {
				switch {
				case p.Parsed > 0:
					err = fmt.Errorf("no system call in %s matches the filters (of %d events read)", strings.Join(args, ", "), p.Parsed)
				case p.Summary > 0:
					err = fmt.Errorf("%s holds an strace -c summary table, not a log of the calls: record one with strace -f -tt -T -y -o LOG CMD", strings.Join(args, ", "))
				default:
					err = fmt.Errorf("no system calls found in %s (%d lines, %d malformed): is it an strace log? Record one with strace -f -tt -T -y -o LOG CMD", strings.Join(args, ", "), r.Lines, r.Malformed)
				}
			}
			if err != nil {
				out.Finish(nil)
				return err
			}
			r.Filter = filter.Record()
			rec := syscallsRecord(r, "strace log: "+strings.Join(logs, ", "))
			if out == nil {
				return view.write(os.Stdout, rec)
			}
			return out.Finish(func(w io.Writer) error { return view.write(w, rec) })
		},
	}
	f := c.Flags()
	f.BoolVar(&view.json, "json", false, "print the report as JSON (docs/syscalls.md)")
	f.BoolVar(&view.csv, "csv", false, "print one of the report's tables as CSV, every row (--table; docs/syscalls.md)")
	f.StringVar(&view.table, "table", "", "with --csv: the table to print: "+strings.Join(report.SyscallsCSVTables, ", ")+" (default syscalls)")
	f.IntVar(&view.top, "top", 10, "rows in each list and processes in the tree (0: all)")
	f.IntSliceVarP(&pids, "pid", "p", nil, "with logs: keep only these processes (repeatable); without: trace this running process live")
	f.StringVarP(&output, "output", "o", "", "write the report to `FILE` instead of standard output (a traced command keeps the terminal)")
	f.DurationVar(&minWait, "min-wait", 0, "the shortest call counted as a wait (wait groups, critical path; live: kept one by one) (default 1ms)")
	f.BoolVar(&view.summary, "summary", false, "print the calls table as strace -w -c does (% time, seconds, usecs/call, calls, errors, syscall): seconds are wall-clock time in the calls, not strace -c's system CPU time")
	f.StringArrayVar(&filter.Files, "file", nil, "keep only calls on targets matching this `GLOB` (a pattern without / matches the base name; repeatable)")
	f.StringVar(&filter.Category, "category", "", "keep only this category: file I/O, network, IPC, memory, process, sleep and timers, other")
	f.Float64Var(&filter.From, "since", 0, "keep only calls from this many seconds after the log's first timestamp (live: after the command's release, or -p's attach)")
	f.Float64Var(&filter.To, "until", 0, "keep only calls up to this many seconds after the log's first timestamp (live: after the command's release, or -p's attach)")
	f.StringArrayVar(&filter.Comms, "comm", nil, "keep only the processes that executed a program whose base name matches `NAME` (a glob; repeatable), from that exec on")
	f.Float64Var(&timeline, "timeline", 0, "add a timeline: calls and time per category in bins of this many seconds, from where --since counts")
	f.BoolVar(&serve, "serve", false, "load the live source's programs once and serve them to the live runs to come, until Ctrl-C")
	f.StringVar(&socket, "socket", systrace.DefaultSocket, "the `PATH` of --serve's socket: where it listens, and where a live run looks for it")
	f.BoolVar(&noServer, "no-server", false, "live: load the programs for this run even when a --serve runs")
	exclusive(c, "json", "csv", "summary")
	exclusive(c, "serve", "no-server")
	return c
}

// checkLogs refuses, before anything is read, a log that cannot be: a
// missing file, a directory, or one that cannot be opened.
func checkLogs(logs []string) error {
	stdin := 0
	for _, path := range logs {
		if path == systrace.Stdin {
			if stdin++; stdin > 1 {
				return fmt.Errorf("standard input (-) is given twice: it can be read once")
			}
			continue
		}
		st, err := os.Stat(path)
		if err == nil && st.IsDir() {
			return fmt.Errorf("%s is a directory: give the log files in it (strace -ff writes LOG.PID files: %s/LOG.*)", path, path)
		}
		if err == nil {
			// access, not an open: an -ff set is thousands of files.
			err = unix.Access(path, unix.R_OK)
		}
		if err != nil {
			return fmt.Errorf("%s: %v: give strace logs, as written by strace -f -tt -T -y -o LOG CMD", path, session.WithoutPath(err))
		}
	}
	return nil
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

// syscallsRecord is the record of a system-call report.
func syscallsRecord(r *profile.SyscallReport, source string) *profile.Record {
	return &profile.Record{Schema: profile.Schema, Meta: profile.Meta{Tool: version, Source: source, Command: os.Args}, Syscalls: r}
}

// emptyProgramsEnv, set by make bench only, attaches programs that do
// nothing: the floor the live source's slowdown is compared with.
const emptyProgramsEnv = "FUSESCOPE_BENCH_EMPTY_PROGRAMS"

// seconds converts a flag's seconds to a duration (validated before).
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// logsGCPercent is the garbage collector's GOGC while strace logs are
// analysed (GOGC in the environment overrides it).
const logsGCPercent = 400

// logsMemoryLimit is the soft limit past which the collector runs as
// often as by default again (GOMEMLIMIT overrides it).
const logsMemoryLimit = 512 << 20
