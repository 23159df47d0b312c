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
			r, err := systrace.Analyze(events, p, top)
			if err != nil {
				return err
			}
			if r.Events == 0 {
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
