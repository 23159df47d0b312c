package main

import (
	"context"
	"fmt"
	"os"
	"time"

	tea "github.com/fusescope/fusescope/internal/thirdparty/bubbletea"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/session"
	"github.com/fusescope/fusescope/internal/syslive"
	"github.com/fusescope/fusescope/internal/top"
)

func newTopCmd() *cobra.Command {
	var (
		mounts   []string
		interval time.Duration
		stages   bool
		slower   time.Duration
		hung     time.Duration
		attach   string
		syscalls bool
		pid      int
	)
	c := &cobra.Command{
		Use:   "top [--mount PATH]... [--interval D] [--stages] | --syscalls -p PID",
		Short: "A live terminal view of FUSE requests per mount and opcode, or of a process tree's system calls",
		Long: `A live view, refreshed every --interval, of the FUSE requests of every
mount (or --mount's): per mount and opcode the request and error rates,
p50 and p99 of the interval and its share of the time, with --stages the
split of each request's time into queue, daemon and reply; each
connection's waiting and max_background (fusectl), requests in flight and
hung; the files with the most FUSE time and the processes whose requests
took at least --slower.

With --syscalls -p PID it shows instead the system calls of a running
process and the processes it starts (the live source of fusescope
syscalls, its kernel counters read at each interval): per system call the
calls and errors per second, the mean time per call and its share of the
time in calls, and the busiest processes.

Keys: s changes the sort (time, rate, p99, errors, op), m steps through
the mounts (then all), p or space pauses the display (the trace goes on),
q, Esc or Ctrl-C quits and leaves the terminal as it was.`,
		Example: `  fusescope top
  fusescope top --mount /cvmfs/sft.cern.ch --stages --interval 2s
  fusescope top --syscalls -p 4242`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !term.IsTerminal(int(os.Stdout.Fd())) || !term.IsTerminal(int(os.Stdin.Fd())) {
				return fmt.Errorf("top draws on a terminal: for text, use fusescope trace [interval [count]]")
			}
			if w, h, err := term.GetSize(int(os.Stdout.Fd())); err == nil && (w < top.MinWidth || h < top.MinHeight) {
				return fmt.Errorf("the terminal is %dx%d: fusescope top needs at least %dx%d", w, h, top.MinWidth, top.MinHeight)
			}
			if interval < 100*time.Millisecond {
				return fmt.Errorf("--interval %v: give at least 100ms", interval)
			}
			if slower <= 0 || hung <= 0 {
				return fmt.Errorf("--slower and --hung take positive durations, such as 1ms and 5s")
			}
			if syscalls != (pid != 0) {
				return fmt.Errorf("--syscalls shows a running process's system calls: give it with -p PID (and -p only with --syscalls)")
			}
			if syscalls && (len(mounts) > 0 || stages) {
				return fmt.Errorf("--mount and --stages are for FUSE requests, not with --syscalls")
			}
			if pid < 0 {
				return fmt.Errorf("-p %d: give a positive process id", pid)
			}
			if pid > 0 {
				if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
					return fmt.Errorf("-p %d: no such process", pid)
				}
			}
			cfg := ktrace.RequestConfig{
				Options: ktrace.Options{ReapAge: ktrace.DefaultReapAge, Attach: attach, Stages: stages, Slower: slower},
				Command: os.Args, Tool: version, Intervals: true,
				Hung:  time.Nanosecond, // every request in flight; the view counts those past --hung
				Files: 5,
			}
			var err error
			if cfg.Mounts, err = resolveMounts(mounts); err != nil {
				return err
			}
			model := top.New(hung)
			prog := tea.NewProgram(model, tea.WithAltScreen())
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				run := session.Config{Interval: interval, PID: pid,
					Emit: func(rec *profile.Record, final bool) error {
						prog.Send(top.RecordMsg{Rec: rec})
						return nil
					},
				}
				_, err := session.Run(ctx, run, func(target session.Target) (session.Source, error) {
					if syscalls {
						return syslive.OpenTop(ktrace.SyscallOptions{PID: pid}, version, target)
					}
					return ktrace.OpenRequests(cfg)
				})
				prog.Send(top.EndMsg{Err: err})
				done <- err
			}()
			_, perr := prog.Run()
			stop()
			err = <-done // the probes are detached before the process ends
			if perr != nil {
				return perr
			}
			if end := model.Ended(); end != nil && end.Err != nil {
				return end.Err
			}
			if err != nil && ctx.Err() == nil {
				return err
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringArrayVar(&mounts, "mount", nil, "show only the FUSE file system mounted at `PATH` (repeatable)")
	f.DurationVar(&interval, "interval", time.Second, "refresh every `D`: each screen is one interval's requests")
	f.BoolVar(&stages, "stages", false, "split each request's time into queue, daemon and reply (times the daemons' reads and writes of /dev/fuse)")
	f.DurationVar(&slower, "slower", time.Millisecond, "list the processes whose requests took at least `D`")
	f.DurationVar(&hung, "hung", 5*time.Second, "count requests in flight at least `D` as hung")
	f.StringVar(&attach, "attach", ktrace.AttachAuto, "how to attach: `auto`, tp_btf, tracepoint, fentry or kprobe (as trace's)")
	f.BoolVar(&syscalls, "syscalls", false, "show the system calls of -p's process and the processes it starts, not FUSE requests")
	f.IntVarP(&pid, "pid", "p", 0, "with --syscalls: the running process to follow (its exit ends top)")
	return c
}
