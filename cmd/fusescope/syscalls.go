package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/report"
	"golang.org/x/sys/unix"

	"github.com/fusescope/fusescope/internal/systrace"
	"github.com/spf13/cobra"
)

func newSyscallsCmd() *cobra.Command {
	var (
		view     reportView
		pids     []int
		filter   systrace.Filter
		timeline float64
		minWait  time.Duration
		output   string
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
(docs/syscalls.md says what differs from a log).`,
		Example: `  fusescope syscalls app.log
  fusescope syscalls --top 20 app.log.*        # an -ff file set
  fusescope syscalls --category network --since 2 --until 10 app.log
  fusescope syscalls --file '/cvmfs/*' -p 4242 --timeline 1 app.log
  fusescope syscalls --json app.log > app.json
  fusescope syscalls --csv --table files app.log > files.csv
  fusescope syscalls -- make -j2                # live: a command and its children
  fusescope syscalls --min-wait 10ms -p 4242     # live: a running process`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
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
				if filter.From != 0 || filter.To != 0 {
					return fmt.Errorf("--since and --until select a window of a log; a live trace counts its calls over the whole run: use --timeline to see them over time")
				}
				pid := 0
				if len(pids) == 1 {
					pid = pids[0]
				}
				out, err := createOutput(output)
				if err != nil {
					return err
				}
				r, err := runLive(command, pid, filter, systrace.Options{MaxWaits: view.top, TimelineS: timeline}, minWait)
				if err != nil {
					out.finish(nil)
					return err
				}
				rec := syscallsRecord(r, sourceLive)
				rec.Meta.Kernel, rec.Meta.Host = kernel.Release(), kernel.Hostname()
				if err := view.present(rec, out); err != nil {
					return err
				}
				return commandStatus(r.Live)
			}
			if len(logs) == 0 {
				return fmt.Errorf("give strace logs to analyse, -- CMD ARGS to trace a command, or -p PID to trace a process (see fusescope syscalls --help)")
			}
			if minWait != 0 {
				return fmt.Errorf("--min-wait applies to live tracing: a log keeps every call")
			}
			if err := checkLogs(logs); err != nil {
				return err
			}
			out, err := createOutput(output)
			if err != nil {
				return err
			}
			args = logs
			p := systrace.NewParser()
			events := systrace.Logs(args, p)
			filter.PIDs = map[int]bool{}
			for _, pid := range pids {
				filter.PIDs[pid] = true
			}
			r, err := systrace.Analyze(filter.Wrap(events), p, systrace.Options{MaxWaits: view.top, TimelineS: timeline})
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
				out.finish(nil)
				return err
			}
			return view.present(syscallsRecord(r, "strace log: "+strings.Join(logs, ", ")), out)
		},
	}
	f := c.Flags()
	f.BoolVar(&view.json, "json", false, "print the report as JSON (docs/syscalls.md)")
	f.BoolVar(&view.csv, "csv", false, "print one of the report's tables as CSV, every row (--table; docs/syscalls.md)")
	f.StringVar(&view.table, "table", "", "with --csv: the table to print: "+strings.Join(report.SyscallsCSVTables, ", ")+" (default syscalls)")
	f.IntVar(&view.top, "top", 10, "rows in each list and processes in the tree (0: all)")
	f.IntSliceVarP(&pids, "pid", "p", nil, "with logs: keep only these processes (repeatable); without: trace this running process live")
	f.StringVarP(&output, "output", "o", "", "write the report to `FILE` instead of standard output (a traced command keeps the terminal)")
	f.DurationVar(&minWait, "min-wait", 0, "live: keep calls at least this long one by one, for the waits list (default 1ms)")
	f.StringArrayVar(&filter.Files, "file", nil, "keep only calls on targets matching this `GLOB` (a pattern without / matches the base name; repeatable)")
	f.StringVar(&filter.Category, "category", "", "keep only this category: file I/O, network, IPC, memory, process, sleep and timers, other")
	f.Float64Var(&filter.From, "since", 0, "keep only calls from this many seconds after the log's first timestamp")
	f.Float64Var(&filter.To, "until", 0, "keep only calls up to this many seconds after the log's first timestamp")
	f.Float64Var(&timeline, "timeline", 0, "add a timeline: calls and time per category in bins of this many seconds")
	exclusive(c, "json", "csv")
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
			var f *os.File
			if f, err = os.Open(path); err == nil {
				f.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %v: give strace logs, as written by strace -f -tt -T -y -o LOG CMD", path, withoutPath(err))
		}
	}
	return nil
}

// reportView is how a syscalls report is printed (syscalls and show): as
// text with top rows per list, as JSON, or one table as CSV.
type reportView struct {
	json, csv bool
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

// present writes a record's system-call report to out, or to standard
// output.
func (v reportView) present(rec *profile.Record, out *outputFile) error {
	r := rec.Syscalls
	write := func(w io.Writer) error {
		switch {
		case v.json:
			return rec.Write(w)
		case v.csv && v.table != "":
			return report.WriteSyscallsCSVTable(w, r, v.table)
		case v.csv:
			return report.WriteSyscallsCSV(w, r)
		}
		return report.WriteSyscallsText(w, r, v.top)
	}
	if out == nil {
		return write(os.Stdout)
	}
	return out.finish(write)
}

// sourceLive names the live system-call source in records.
const sourceLive = "kernel:raw_syscalls (sys_enter, sys_exit)"

// syscallsRecord is the record of a system-call report.
func syscallsRecord(r *profile.SyscallReport, source string) *profile.Record {
	return &profile.Record{Schema: profile.Schema, Meta: profile.Meta{Tool: version, Source: source, Command: os.Args}, Syscalls: r}
}

// emptyProgramsEnv, set by make bench only, attaches programs that do
// nothing: the floor the live source's slowdown is compared with.
const emptyProgramsEnv = "FUSESCOPE_BENCH_EMPTY_PROGRAMS"

// runLive traces command (started here) or the running process pid with
// the live source, and analyses what it saw.
func runLive(command []string, pid int, filter systrace.Filter, o systrace.Options, minWait time.Duration) (*profile.SyscallReport, error) {
	if minWait < 0 {
		return nil, fmt.Errorf("--min-wait %v: give a positive duration, such as 1ms", minWait)
	}
	if err := ktrace.CheckPrivileges(); err != nil {
		return nil, err
	}
	info := &profile.LiveInfo{Command: command}
	// How the command ended is written when it ends, which after a second
	// Ctrl-C may be after the report is made: under infoMu.
	var infoMu sync.Mutex
	stop := make(chan struct{})
	var stopOnce sync.Once
	closeStop := func() { stopOnce.Do(func() { close(stop) }) }
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	var tr *ktrace.SyscallTracer
	var err error
	if len(command) > 0 {
		cmd, release, err := startGated(command)
		if err != nil {
			return nil, err
		}
		tr, err = ktrace.StartSyscalls(ktrace.SyscallOptions{GatePID: cmd.Process.Pid, MinWait: minWait, TimelineS: o.TimelineS,
			EmptyPrograms: os.Getenv(emptyProgramsEnv) != ""})
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, err
		}
		tr.Forget(gateFD)
		released := time.Now()
		if err := release(); err != nil {
			tr.Close()
			cmd.Process.Kill()
			cmd.Wait()
			return nil, fmt.Errorf("starting %s: %v", command[0], err)
		}
		go func() {
			cmd.Wait()
			infoMu.Lock()
			info.CommandS = time.Since(released).Seconds()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Exited() {
				st := ws.ExitStatus()
				info.ExitStatus = &st
			} else if ok && ws.Signaled() {
				info.KilledBy = unix.SignalName(ws.Signal())
			}
			infoMu.Unlock()
			closeStop()
		}()
		// The terminal's Ctrl-C reaches the command too; a second one, or a
		// signal sent to fusescope alone, is passed on, then stops tracing.
		go func() {
			n := 0
			for s := range sigs {
				n++
				cmd.Process.Signal(s)
				if n > 1 {
					closeStop()
				}
			}
		}()
	} else {
		exit, err := watchExit(pid)
		if err != nil {
			return nil, err
		}
		defer exit.close()
		tr, err = ktrace.StartSyscalls(ktrace.SyscallOptions{PID: pid, MinWait: minWait, TimelineS: o.TimelineS})
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "Tracing the system calls of process %d and of the processes it starts... Hit Ctrl-C to end.\n", pid)
		go func() {
			exit.wait()
			closeStop()
		}()
		go func() {
			<-sigs
			closeStop()
		}()
	}
	defer tr.Close()
	events := func(emit func(*systrace.Event)) error { return tr.Run(stop, emit, info) }
	// Shorter calls reach user space only when they name an fd or a
	// process: ranked with the long ones, they would push out waits that
	// were never seen.
	o.Running = tr.Running()
	o.Window = tr.Window
	o.MinWaitS = ktrace.DefaultMinWait.Seconds()
	if minWait > 0 {
		o.MinWaitS = minWait.Seconds()
	}
	r, err := systrace.Analyze(filter.Wrap(events), nil, o)
	if err != nil {
		return nil, err
	}
	infoMu.Lock()
	live := *info
	infoMu.Unlock()
	r.Live = &live
	return r, nil
}

// commandStatus passes on how a traced command ended, as strace does: its
// exit status, or 128 plus the signal that killed it, as a shell reports
// it. The report has been written: there is nothing more to say.
func commandStatus(l *profile.LiveInfo) error {
	if l == nil {
		return nil
	}
	return exitStatus(l.ExitStatus, l.KilledBy)
}

// exitStatus is the error that makes fusescope exit as a command did:
// with its exit status, or 128 plus the number of the signal that killed it.
func exitStatus(status *int, killedBy string) error {
	switch {
	case status != nil && *status != 0:
		return &exitError{code: *status}
	case killedBy != "":
		if sig := unix.SignalNum(killedBy); sig != 0 {
			return &exitError{code: 128 + int(sig)}
		}
		return &exitError{code: 1}
	}
	return nil
}
