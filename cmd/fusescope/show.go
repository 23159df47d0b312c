package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/report"
	"github.com/fusescope/fusescope/internal/session"
	"github.com/spf13/cobra"
)

func newShowCmd() *cobra.Command {
	var (
		out   outputFlags
		top   int
		table string
		stamp bool
	)
	c := &cobra.Command{
		Use:   "show RECORD.json | -",
		Short: "Render a saved record, syscalls report or bench run exactly as the live view did",
		Long: `Render a saved record (fusescope trace -o, fusescope fs stats --json,
fusescope kfunc -o), a syscalls report (fusescope syscalls --json) or a
bench run (fusescope bench -o) exactly as the live view did, or convert it
to CSV. "-" reads standard
input. The records of an interval
trace's --json output (one per line) render one after another, as its
reports did.`,
		Example: `  fusescope trace --mount /cvmfs/sft.cern.ch -o run1.json
  fusescope show run1.json            # histograms and table, in usecs
  fusescope show -m --no-hist run1.json
  fusescope show --csv run1.json > run1.csv
  fusescope show --csv --table slow run1.json   # trace --slower's requests
  fusescope show --csv --table findings doctor.json   # fusescope doctor -o's findings
  fusescope trace --json 5 > run2.jsonl; fusescope show -m run2.jsonl
  fusescope syscalls --json -o app.json app.log
  fusescope show --top 20 app.json
  fusescope show bench.json           # a bench run's table, as bench printed it
  fusescope kfunc 'fuse_*' -o calls.json; fusescope show --csv calls.json   # kernel function calls
  fusescope fs stats --json /mnt/lab | fusescope show -m -`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("show takes one record file, or - for standard input (got %d)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			recs, err := readRecords(args[0])
			if err != nil {
				return err
			}
			kind, err := report.FileKind(args[0], recs)
			if err != nil {
				return err
			}
			if kind != report.KindRequests {
				use := "--json or --csv"
				requestsOnly := []string{"milliseconds", "microseconds", "ns", "counts", "no-hist", "timestamp"}
				switch kind {
				case report.KindSyscalls:
					use = "--top, --json or --csv"
				case report.KindFunctions:
					use, requestsOnly = "-m, -u, --ns, -T, --json or --csv", []string{"counts", "no-hist"}
				}
				for _, name := range requestsOnly {
					if cmd.Flags().Changed(name) {
						return fmt.Errorf("--%s applies to records of FUSE requests; %s is %s (use %s)", name, args[0], report.KindNames[kind], use)
					}
				}
			}
			switch kind {
			case report.KindSyscalls:
				view := reportView{json: out.json, csv: out.csv, table: table, top: top}
				if err := view.check(); err != nil {
					return err
				}
				for _, rec := range recs {
					if err := view.write(os.Stdout, rec); err != nil {
						return err
					}
				}
				return nil
			case report.KindFunctions:
				if cmd.Flags().Changed("top") {
					return fmt.Errorf("--top applies to syscalls reports; %s is %s: every function called is shown", args[0], report.KindNames[kind])
				}
				if table != "" {
					return fmt.Errorf("--table %q: %s is %s, whose CSV is one table: leave out --table", table, args[0], report.KindNames[kind])
				}
				// Several records are an interval run's --json lines.
				r := &report.Renderer{Format: out.format(), W: os.Stdout, Lines: len(recs) > 1, Stamp: stamp}
				for _, rec := range recs {
					if err := r.Render(rec); err != nil {
						return err
					}
				}
				return nil
			case report.KindBench:
				if cmd.Flags().Changed("top") {
					return fmt.Errorf("--top applies to syscalls reports; %s is a bench run: every result is shown", args[0])
				}
				if table != "" {
					return fmt.Errorf("--table %q: %s is a bench run, whose CSV is one table: leave out --table", table, args[0])
				}
				r := &report.Renderer{Format: out.format(), W: os.Stdout}
				for _, rec := range recs {
					if err := r.Render(rec); err != nil {
						return err
					}
				}
				return nil
			}
			if cmd.Flags().Changed("top") {
				return fmt.Errorf("--top applies to syscalls reports; %s is a record: every opcode is shown", args[0])
			}
			switch table {
			case "", "opcodes", "slow", "findings", "functions", "daemon-stage":
			default:
				return fmt.Errorf("--table %q: %s is a record: give opcodes, slow (its trace --slower requests), findings (fusescope doctor's), functions or daemon-stage (ufunc --stages')", table, args[0])
			}
			slowCSV := table == "slow"
			if table == "functions" || table == "daemon-stage" {
				found := false
				for _, rec := range recs {
					fn := report.FunctionsOf(rec)
					found = found || (fn != nil && (table == "functions" || fn.DaemonStage != nil))
				}
				if !found {
					return fmt.Errorf("--table %s: %s holds no %s: record one with fusescope ufunc --stages -o", table, args[0], map[bool]string{true: "functions", false: "daemon stage by function"}[table == "functions"])
				}
			}
			if table != "" && !out.csv {
				return fmt.Errorf("--table chooses the table --csv prints: add --csv")
			}
			if slowCSV && out.counts {
				return fmt.Errorf("--table slow lists requests with their latency: leave out --counts")
			}
			// Several records are an interval trace's --json lines: each
			// renders as that interval's report did.
			r := &report.Renderer{Format: out.format(), W: os.Stdout, Slow: true, Lines: len(recs) > 1, Stamp: stamp}
			for i, rec := range recs {
				switch table {
				case "slow":
					err = report.WriteSlowCSV(os.Stdout, i == 0, rec.Slow...)
				case "findings":
					err = report.WriteFindingsCSV(os.Stdout, rec, i == 0)
				case "functions":
					err = report.WriteFunctionsCSV(os.Stdout, rec, i == 0)
				case "daemon-stage":
					err = report.WriteDaemonStageCSV(os.Stdout, rec, i == 0)
				default:
					err = r.Render(rec)
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	out.register(c)
	c.Flags().BoolVarP(&stamp, "timestamp", "T", false, "records: print the time each report ended before it, as trace -T did")
	c.Flags().IntVar(&top, "top", 10, "syscalls reports: rows in each list and processes in the tree (0: all)")
	c.Flags().StringVar(&table, "table", "", "with --csv, the table to print: for records opcodes (the default), slow (trace --slower's requests), findings (doctor's), functions or daemon-stage (ufunc --stages'); for syscalls reports "+strings.Join(report.SyscallsCSVTables, ", ")+" (default syscalls)")
	return c
}

// readRecords reads the records of a file ("-": standard input), with an
// error that names the file and what to give instead.
func readRecords(path string) ([]*profile.Record, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v: give a record (fusescope trace -o, fs stats --json) or a syscalls report (syscalls --json)", path, session.WithoutPath(err))
	}
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] != '{' {
		return nil, fmt.Errorf("%s is not JSON: give a record (fusescope trace -o, fs stats --json) or a syscalls report (syscalls --json); fusescope syscalls reads strace logs", path)
	}
	recs, err := profile.ParseAll(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return recs, nil
}
