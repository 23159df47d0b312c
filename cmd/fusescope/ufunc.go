package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/report"
	"github.com/fusescope/fusescope/internal/session"
	"github.com/fusescope/fusescope/internal/ufunc"
	"github.com/spf13/cobra"
)

func newUfuncCmd() *cobra.Command {
	var (
		pid                 int
		latency, usdt, list bool
		stages              bool
		arg                 int
		out                 functionFlags
	)
	c := &cobra.Command{
		Use:   "ufunc BINARY 'PATTERN' [flags] [interval [count]] [-- CMD ARGS...]",
		Short: "Count and time the calls of a program's or a library's own functions (uprobes)",
		Long: `Count the calls of the functions of BINARY (an executable or a shared
library such as libfuse3.so.3) whose names match PATTERN (a glob; C++
names are matched demangled), as bcc's funccount -p counts them with
uprobes; with --latency, time each call from entry to return in a log2
histogram per function, as funclatency does. Nothing changes in the
program and nothing per call reaches user space.

--usdt matches the binary's USDT probes instead (provider:name; libfuse's
request_receive, request_process and request_reply when it is built with
-Denable-usdt) and counts their hits, and --arg N their hits per value
of argument N (per FUSE opcode, per reply error); --list lists what
PATTERN matches (with --usdt, each probe's arguments) and attaches
nothing.

--stages breaks the daemon stage down by function: it traces the FUSE
requests' stages (trace --stages) and times the functions in the same
run, and a call that begins while a daemon thread (a Go daemon's
goroutine) holds a request, read and not yet answered, counts for that
request's opcode up to the reply's start; per opcode it prints the hold,
each function's part of it and what no function accounts for.

-p PID probes that process alone (its exit ends the run); -- CMD runs the
command once the probes are attached and ends with it (with -p, the
command is the workload of -p's daemon: its calls are not counted).
Records (-o, --json) hold the calls in their daemon_functions section,
which show, diff and report render.

Go programs: a return probe would rewrite the return address on a
goroutine's stack, which the Go runtime moves and reads, so a Go function
is timed from its entry to each of its RET instructions (found by
disassembling it, amd64), calls matched by goroutine; one whose returns
cannot be found is refused in one line.`,
		Example: `  fusescope ufunc /usr/lib/x86_64-linux-gnu/libc.so.6 'statx' -- ls -l /mnt/lab/dir
  fusescope ufunc ./passthrough_hp 'sfs_*' --latency -p $(pidof passthrough_hp) 5
  fusescope ufunc /usr/lib/x86_64-linux-gnu/libfuse3.so.3 'fuse_reply_*' -p 1234 -o calls.json
  fusescope ufunc --usdt --list ./libfuse3.so.4 '*'    # its USDT probes and their arguments
  fusescope ufunc --usdt ./libfuse3.so.4 'libfuse:request_*' -p $(pidof passthrough_hp) 10 1
  fusescope ufunc --usdt ./libfuse3.so.4 'libfuse:request_process' --arg 1 -p $(pidof passthrough_hp)   # per opcode
  fusescope ufunc ./passthrough_hp 'sfs_*' --stages -p $(pidof passthrough_hp) -- ls -l /mnt/hp   # the daemon stage by function`,
		Args: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				args = args[:dash]
			}
			if len(args) < 2 {
				return fmt.Errorf("give the binary and a pattern of its functions, as in fusescope ufunc /usr/lib/x86_64-linux-gnu/libfuse3.so.3 'fuse_reply_*'")
			}
			return cobra.MaximumNArgs(4)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var command []string
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				if args, command = args[:dash], args[dash:]; len(command) == 0 {
					return fmt.Errorf("nothing after --: give the command to trace while it runs")
				}
			}
			interval, count, err := parseIntervalCount(args[2:], "fusescope ufunc BINARY 'PATTERN'")
			if err != nil {
				return err
			}
			switch {
			case pid < 0:
				return fmt.Errorf("-p %d: give a positive process id", pid)
			}
			if pid > 0 {
				if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
					return fmt.Errorf("-p %d: no such process", pid)
				}
			}
			if len(command) > 0 {
				if _, err := session.LookCommand(command[0]); err != nil {
					return err
				}
			}
			unit := out.unit()
			switch {
			case arg < 0:
				return fmt.Errorf("--arg %d: give an argument's number, from 1", arg)
			case arg > 0 && !usdt:
				return fmt.Errorf("--arg reads a USDT probe's argument, whose size and place its note gives: add --usdt (ufunc --usdt --list shows each probe's arguments)")
			}
			cfg := ufunc.Config{Binary: args[0], Pattern: args[1], Latency: latency, USDT: usdt, Arg: arg, PID: pid, Command: os.Args, Tool: version}
			if list {
				return listUfunc(cfg)
			}
			if stages && usdt {
				return fmt.Errorf("--stages times functions within the daemon's requests, and a USDT probe marks a point: leave out --usdt")
			}
			r := out.renderer(interval > 0)
			var src interface {
				Functions() profile.KernelFunctions
			}
			run := session.Config{
				Interval: interval, Count: count, Command: command, PID: pid, Output: out.output, Log: os.Stderr,
				Ready: func() { ufuncReady(src.Functions(), stages, len(command) > 0, interval, count) },
				Emit:  func(rec *profile.Record, final bool) error { return r.Render(rec) },
			}
			if len(command) > 0 {
				run.PID = 0 // the probes stay in -p's process (a daemon); the command (its workload) ends the run
			}
			if stages {
				run.Emit = stageEmitter(r, unit, out.json, out.csv, out.stamp)
			}
			_, err = session.Run(context.Background(), run, func(session.Target) (session.Source, error) {
				if stages {
					s, err := ufunc.OpenStages(cfg, ktrace.RequestConfig{Command: os.Args, Tool: version, Intervals: interval > 0})
					if err != nil {
						return nil, err
					}
					src = s
					return s, nil
				}
				s, err := ufunc.Open(cfg)
				if err != nil {
					return nil, err
				}
				src = s
				return s, nil
			})
			return err
		},
	}
	f := c.Flags()
	f.IntVarP(&pid, "pid", "p", 0, "probe process `PID` alone; its exit ends the run")
	f.BoolVar(&usdt, "usdt", false, "PATTERN matches the binary's USDT probes (provider:name, e.g. 'libfuse:request_*'), whose hits are counted")
	f.IntVar(&arg, "arg", 0, "with --usdt, count the hits per value of argument `N` (from 1), as bcc's argdist -C; libfuse's request_process opcodes and request_reply errors are named")
	f.BoolVarP(&list, "list", "l", false, "list what PATTERN matches (with --usdt, each probe's arguments) and attach nothing")
	f.BoolVar(&stages, "stages", false, "trace the FUSE requests' stages too and break the daemon stage down by these functions (timed): a call that begins while the daemon holds a request counts for its opcode")
	f.BoolVar(&latency, "latency", false, "time each call from entry to return: a log2 histogram per function (Go: to each RET instruction)")
	out.register(c)
	return c
}

// listUfunc prints what the pattern matches, as bcc's tplist and
// funccount -l do.
func listUfunc(cfg ufunc.Config) error {
	bin, err := ufunc.OpenBinary(cfg.Binary)
	if err != nil {
		return err
	}
	if cfg.USDT {
		probes, err := bin.MatchUSDT(cfg.Pattern)
		if err != nil {
			return err
		}
		for _, p := range probes {
			fmt.Printf("%s %s\n", p.FullName(), p.Args)
		}
		return nil
	}
	syms, err := bin.Match(cfg.Pattern)
	if err != nil {
		return err
	}
	for _, s := range syms {
		fmt.Println(report.Name(s.Name))
	}
	return nil
}

// stageEmitter renders ufunc --stages' records: the daemon stage by
// function (text, or its CSV table), or the whole record (JSON).
func stageEmitter(r *report.Renderer, unit hist.Unit, asJSON, asCSV, stamp bool) func(*profile.Record, bool) error {
	header, n := true, 0
	return func(rec *profile.Record, final bool) error {
		switch {
		case asJSON:
			return r.Render(rec)
		case asCSV:
			err := report.WriteDaemonStageCSV(os.Stdout, rec, header)
			header = false
			return err
		}
		if n++; n > 1 {
			fmt.Println()
		}
		if stamp {
			fmt.Println(rec.Meta.End.Format("15:04:05"))
		}
		return report.WriteDaemonStageText(os.Stdout, rec, unit)
	}
}

// ufuncReady says what was attached, then what the run does.
func ufuncReady(fn profile.KernelFunctions, stages, command bool, interval time.Duration, count int) {
	fmt.Fprintf(os.Stderr, "Attached %s to %d function%s in %s: %s.\n", fn.Mechanism, fn.Attached, plural(fn.Attached), time.Duration(fn.AttachNs).Round(time.Millisecond), fn.Why)
	if n := len(fn.NotAttached); n > 0 {
		fmt.Fprintf(os.Stderr, "note: %d function%s not probed: %s (%s)%s.\n", n, plural(n), fn.NotAttached[0].Name, fn.NotAttached[0].Error, map[bool]string{true: " and more", false: ""}[n > 1])
	}
	what := fmt.Sprintf("%d function%s for %q", fn.Attached, plural(fn.Attached), fn.Pattern)
	if stages {
		what += " within the daemons' requests (their stages traced)"
	}
	switch {
	case command:
		fmt.Fprintf(os.Stderr, "Tracing %s while the command runs...\n", what)
	case interval > 0:
		fmt.Fprintf(os.Stderr, "Tracing %s, reporting every %s... %s\n", what, interval, report.EndNote(interval, count))
	default:
		fmt.Fprintf(os.Stderr, "Tracing %s... Hit Ctrl-C to end.\n", what)
	}
}
