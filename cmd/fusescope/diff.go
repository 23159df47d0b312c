package main

import (
	"fmt"
	"os"

	"github.com/fusescope/fusescope/internal/report"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func newDiffCmd() *cobra.Command {
	var (
		out   outputFlags
		hists bool
		top   int
		color string
	)
	c := &cobra.Command{
		Use:   "diff A.json B.json",
		Short: "Compare two records: per mount and opcode (and stage), system call or bench result, B against A",
		Long: `Compare two records of one kind, B against A. Records of FUSE requests
(trace -o, fs stats --json; an interval trace's records are summed): per
mount and opcode, and per stage with --stages, the counts, rates and total
time of both, then p50 and p99, each with its change in per cent, the
rows that changed the total time most first. Mounts are paired by mount
point, or, when each record has one, with each other. System-call
reports: per system call, calls, errors and time. Bench runs: each
result's medians and the change of the medians (benchstat's delta), "~"
where the runs' spread cannot support one. On a terminal, times that grew
are red and times that shrank green (changes under 5% stay plain); counts
that moved are yellow.`,
		Example: `  fusescope trace --mount /mnt/a -o a.json -- ./workload
  fusescope trace --mount /mnt/a -o b.json -- ./workload   # after a change
  fusescope diff a.json b.json
  fusescope diff --counts a.json b.json           # counters only, as show_diff
  fusescope diff --hist -m --top 3 a.json b.json  # histograms side by side
  fusescope diff --csv a.json b.json > diff.csv
  fusescope diff before.bench.json after.bench.json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				// withUsage adds the usage line: said once.
				return fmt.Errorf("diff takes two records, A and B (got %d)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if out.noHists {
				return fmt.Errorf("--no-hist: diff prints no histograms unless --hist asks for them")
			}
			if hists && (out.counts || out.json || out.csv) {
				return fmt.Errorf("--hist draws histograms in the text view, without --counts, --json or --csv")
			}
			if top < 0 {
				return fmt.Errorf("--top %d: give a number of rows, 0 for all", top)
			}
			var useColor bool
			switch color {
			case "auto":
				_, noColor := os.LookupEnv("NO_COLOR")
				useColor = !noColor && term.IsTerminal(int(os.Stdout.Fd()))
			case "always":
				useColor = true
			case "never":
			default:
				return fmt.Errorf("--color %q: give auto, always or never", color)
			}
			var in [2]report.DiffInput
			for i, path := range args {
				recs, err := readRecords(path)
				if err != nil {
					return err
				}
				in[i] = report.DiffInput{Name: path, Records: recs}
			}
			d, err := report.NewDiff(in[0], in[1])
			if err != nil {
				return err
			}
			switch {
			case out.json:
				return report.WriteDiffJSON(os.Stdout, d)
			case out.csv:
				return report.WriteDiffCSV(os.Stdout, d)
			}
			return report.WriteDiffText(os.Stdout, d, report.DiffOptions{Unit: out.unit(), Counts: out.counts, Hist: hists, Top: top, Color: useColor})
		},
	}
	out.register(c)
	f := c.Flags()
	f.Lookup("json").Usage = "print the diff as JSON (schema fusescope.diff/v1)"
	f.Lookup("csv").Usage = "print every row of the diff as CSV"
	f.Lookup("counts").Usage = "counts only: A, B, their difference and its per cent, per row"
	f.BoolVar(&hists, "hist", false, "draw each row's total latency histograms of A and B side by side")
	f.IntVar(&top, "top", 20, "rows to print, the largest changes first (0: all); JSON and CSV hold all")
	f.StringVar(&color, "color", "auto", "colour the changes: auto (a terminal without NO_COLOR), always or never")
	f.MarkHidden("no-hist")
	return c
}
