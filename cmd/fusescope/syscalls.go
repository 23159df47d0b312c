package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/fusescope/fusescope/internal/systrace"
	"github.com/spf13/cobra"
)

func newSyscallsCmd() *cobra.Command {
	var (
		asJSON, asCSV bool
		top           int
		pids          []int
		filter        systrace.Filter
		timeline      float64
	)
	c := &cobra.Command{
		Use:   "syscalls [flags] LOG...",
		Short: "Analyse strace logs: hot spots, time per category, per-file I/O, waits, process tree",
		Long: `Analyse system-call logs written by strace -f -tt -T -y (and its variants:
-ttt, -yy, with or without PIDs, -o files, -ff file sets, strace-log-merge
output). Calls split into "<unfinished ...>" and "<... resumed>" lines are
joined per thread; malformed lines are counted and reported with their line
numbers. Record a log with:

  strace -f -tt -T -y -o app.log ./app

The live source (tracing a command or -p PID with eBPF instead of ptrace) is
not built yet.`,
		Example: `  fusescope syscalls app.log
  fusescope syscalls --top 20 app.log.*        # an -ff file set
  fusescope syscalls --category network --since 2 --until 10 app.log
  fusescope syscalls --file '/cvmfs/*' -p 4242 --timeline 1 app.log
  fusescope syscalls --json app.log > app.json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := systrace.NewParser()
			events := func(emit func(*systrace.Event)) error {
				for _, path := range args {
					f, err := os.Open(path)
					if err != nil {
						return err
					}
					p.DefaultPID = pidSuffix(path)
					err = p.Parse(f, emit)
					f.Close()
					if err != nil {
						return fmt.Errorf("%s: %v", path, err)
					}
				}
				return nil
			}
			filter.PIDs = map[int]bool{}
			for _, pid := range pids {
				filter.PIDs[pid] = true
			}
			if err := filter.Validate(); err != nil {
				return err
			}
			if timeline < 0 {
				return fmt.Errorf("--timeline %v: give a positive bin width in seconds", timeline)
			}
			r, err := systrace.Analyze(filter.Wrap(events), p, systrace.Options{MaxWaits: top, TimelineS: timeline})
			if err != nil {
				return err
			}
			if r.Events == 0 {
				if r.Lines > r.Malformed {
					return fmt.Errorf("no system call in %v matches the filters (%d lines read)", args, r.Lines)
				}
				return fmt.Errorf("no system calls found in %v (%d lines, %d malformed): is it an strace log?", args, r.Lines, r.Malformed)
			}
			switch {
			case asJSON:
				return systrace.WriteJSON(os.Stdout, r)
			case asCSV:
				return systrace.WriteCSV(os.Stdout, r)
			}
			return systrace.WriteText(os.Stdout, r, top)
		},
	}
	f := c.Flags()
	f.BoolVar(&asJSON, "json", false, "print the report as JSON (docs/syscalls.md)")
	f.BoolVar(&asCSV, "csv", false, "print one CSV row per system call (docs/syscalls.md)")
	f.IntVar(&top, "top", 10, "rows in each list (0: all)")
	f.IntSliceVarP(&pids, "pid", "p", nil, "keep only these processes (repeatable)")
	f.StringArrayVar(&filter.Files, "file", nil, "keep only calls on targets matching this `GLOB` (a pattern without / matches the base name; repeatable)")
	f.StringVar(&filter.Category, "category", "", "keep only this category: file I/O, network, IPC, memory, process, sleep and timers, other")
	f.Float64Var(&filter.From, "since", 0, "keep only calls from this many seconds after the log's first timestamp")
	f.Float64Var(&filter.To, "until", 0, "keep only calls up to this many seconds after the log's first timestamp")
	f.Float64Var(&timeline, "timeline", 0, "add a timeline: calls and time per category in bins of this many seconds")
	c.MarkFlagsMutuallyExclusive("json", "csv")
	return c
}

// pidSuffix is the PID of an strace -ff file (LOG.1234), or 0.
func pidSuffix(path string) int {
	i := strings.LastIndexByte(path, '.')
	if i < 0 {
		return 0
	}
	pid, err := strconv.Atoi(path[i+1:])
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
