package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fusescope/fusescope/internal/kfunc"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/report"
	"github.com/fusescope/fusescope/internal/session"
	"github.com/spf13/cobra"
)

func newKfuncCmd() *cobra.Command {
	var (
		pid      int
		latency  []string
		attach   string
		duration float64
		out      functionFlags
	)
	c := &cobra.Command{
		Use:   "kfunc [flags] PATTERN [interval [count]] | --latency F1,F2,... [interval [count]] [-- CMD ARGS...]",
		Short: "Count and time calls of kernel functions (fuse_*), as bcc's funccount and funclatency do",
		Long: `Count every call of the kernel functions whose names match PATTERN, a glob
(* any run of characters, ? one, [...] one of a class, [!...] one outside
it), as bcc's funccount does: FUNC and COUNT, fewest calls first. --latency F1,F2,... times each
call of the functions named (or globbed) from entry to return, a log2
histogram each, as libbpf-tools' funclatency prints one, with its average,
total and count. Give both to count one set and time another.

The calls are counted in the kernel by fentry/fexit programs where the
kernel has BTF for the functions (vmlinux's, and fuse.ko's own at
/sys/kernel/btf/fuse), and by kprobes otherwise; more than 16 functions to
count go through one kprobe.multi link where the kernel has them (fentry's
trampolines detach one at a time: 40 s for fuse_*'s 291 in a 6.12 guest).
A line says which was chosen and why, and --attach forces one. A kernel
with neither is refused in one line.

interval [count] works as in bcc: a report every interval seconds, count
times; -d SECONDS ends the run after that long. Without either, one report
on Ctrl-C. -p PID keeps one process's calls; -- CMD ARGS counts while the
command runs, and fusescope exits with its status. -o saves the whole run
as a record that "fusescope show" renders the same way.`,
		Example: `  fusescope kfunc 'fuse_*'                       # every fuse_* function, until Ctrl-C
  fusescope kfunc 'fuse_*' 5 3                   # every 5 s, three times
  fusescope kfunc -p 1234 'fuse_*' -d 10         # one process, for 10 s
  fusescope kfunc --latency fuse_lookup,fuse_readdir -m   # histograms in milliseconds
  fusescope kfunc 'fuse_*' --csv -- ls -lR /mnt/lab > calls.csv
  fusescope kfunc 'fuse_dev_do_*' --attach kprobe -o calls.json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				args = args[:dash]
			}
			return cobra.MaximumNArgs(3)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var command []string
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				args, command = args[:dash], args[dash:]
				if len(command) == 0 {
					return fmt.Errorf("nothing after --: give the command to count calls while it runs, as in fusescope kfunc 'fuse_*' -- ls -lR /mnt")
				}
				if pid > 0 {
					return fmt.Errorf("-p and -- CMD both say when to count: give one")
				}
				if _, err := session.LookCommand(command[0]); err != nil {
					return err
				}
			}
			pattern := ""
			if len(args) > 0 && !isNumber(args[0]) {
				pattern, args = args[0], args[1:]
			}
			switch {
			case pattern == "" && len(latency) == 0:
				return fmt.Errorf("give the functions to count, as a glob such as 'fuse_*', or the functions to time with --latency fuse_lookup: usage: %s", cmd.UseLine())
			case len(args) > 2:
				return fmt.Errorf("%q: give one pattern, then the interval and the count: usage: %s", args[2], cmd.UseLine())
			}
			if pattern != "" {
				if err := kfunc.CheckPattern(pattern); err != nil {
					return err
				}
			}
			for _, l := range latency {
				if err := kfunc.CheckPattern(l); err != nil {
					return fmt.Errorf("--latency: %w", err)
				}
			}
			interval, count, err := parseIntervalCount(args, "fusescope kfunc 'fuse_*'")
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("duration") {
				if !(duration >= 0.01 && duration <= 1e6) {
					return fmt.Errorf("-d %v: give the run's length in seconds, from 0.01 to 1000000, e.g. -d 10", duration)
				}
				if count > 0 {
					return fmt.Errorf("-d and a count both say when to end: give one")
				}
				d := time.Duration(duration * float64(time.Second))
				if interval == 0 {
					interval = d
				}
				count = int(math.Ceil(float64(d) / float64(interval)))
			}
			if pid < 0 {
				return fmt.Errorf("-p %d: give a positive process id", pid)
			}
			if pid > 0 {
				if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
					return fmt.Errorf("-p %d: no such process", pid)
				}
			}
			cfg := kfunc.Config{Pattern: pattern, Latency: latency, Attach: attach, PID: pid, Command: os.Args, Tool: version}
			r := out.renderer(interval > 0)
			var src *kfunc.Source
			run := session.Config{
				Interval: interval, Count: count, Command: command, PID: pid, Output: out.output, Log: os.Stderr,
				Ready: func() { kfuncReady(src, pattern, len(command) > 0, interval, count) },
				Emit:  func(rec *profile.Record, final bool) error { return r.Render(rec) },
			}
			_, err = session.Run(context.Background(), run, func(session.Target) (session.Source, error) {
				var err error
				if src, err = kfunc.Open(cfg); err != nil {
					return nil, err
				}
				return src, nil
			})
			return err
		},
	}
	f := c.Flags()
	f.IntVarP(&pid, "pid", "p", 0, "count only the calls made by process `PID` (its threads); its exit ends the run")
	f.StringSliceVar(&latency, "latency", nil, "time each call of these functions (names or globs, e.g. `fuse_lookup,fuse_readdir`): a log2 histogram each")
	f.StringVar(&attach, "attach", kfunc.AttachAuto, "how to attach: `auto` (fentry where the kernel has BTF for the functions, kprobes otherwise or for more than 16 where it has kprobe.multi), fentry, or kprobe")
	f.Float64VarP(&duration, "duration", "d", 0, "end the run after `SECONDS` (with an interval: the reports within it)")
	out.register(c)
	return c
}

// isNumber tells an interval from a pattern: no function's name is a number.
func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// kfuncReady says what was attached, how and why, then what the run does,
// on standard error.
func kfuncReady(src *kfunc.Source, pattern string, command bool, interval time.Duration, count int) {
	fn := src.Functions()
	fmt.Fprintf(os.Stderr, "Attached %s to %d function%s in %s: %s.\n", fn.Mechanism, fn.Attached, plural(fn.Attached), time.Duration(fn.AttachNs).Round(time.Millisecond), fn.Why)
	if n := len(fn.NotAttached); n > 0 {
		var names []string
		for _, f := range fn.NotAttached[:min(n, 3)] {
			names = append(names, f.Name+" ("+f.Error+")")
		}
		more := ""
		if n > 3 {
			more = fmt.Sprintf(" and %d more", n-3)
		}
		fmt.Fprintf(os.Stderr, "note: %d function%s not probed: %s%s.\n", n, plural(n), strings.Join(names, ", "), more)
	}
	what := fmt.Sprintf("%d function%s", fn.Attached, plural(fn.Attached))
	if pattern != "" {
		what += fmt.Sprintf(" for %q", pattern)
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

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
