package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/fusescope/fusescope/internal/report"
	"github.com/fusescope/fusescope/internal/session"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func newReportCmd() *cobra.Command {
	var (
		output string
		title  string
	)
	c := &cobra.Command{
		Use:   "report RECORD.json... -o report.html",
		Short: "One self-contained HTML page of records: histograms, tables, requests over time, system calls, bench results",
		Long: `Render records as one self-contained HTML file, to share or archive:
nothing is fetched when it is viewed (inline CSS and SVG, no script), and
every name that came from a trace is escaped. For each file: FUSE requests
by total time with their latency histograms (and stages), requests over
time from an interval trace's records (summed for the tables), the
application's calls and the page cache, slow and hung requests, files
by node; a system-call report's
categories, critical path, process timeline, hot spots, waits and files;
a bench run's results with their intervals and ratios to the baseline.`,
		Example: `  fusescope trace --mount /mnt/lab --json 1 > run.jsonl   # an interval trace
  fusescope report run.jsonl -o run.html
  fusescope report a.json b.json app.syscalls.json bench.json -o all.html --title "cvmfs, before and after"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("give the records to report on")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if output == "" && term.IsTerminal(int(os.Stdout.Fd())) {
				return fmt.Errorf("the report is HTML: write it to a file with -o report.html (or redirect standard output)")
			}
			var inputs []report.HTMLInput
			for _, path := range args {
				recs, err := readRecords(path)
				if err != nil {
					return err
				}
				inputs = append(inputs, report.HTMLInput{Name: path, Records: recs})
			}
			if err := report.CheckHTML(inputs); err != nil {
				return err
			}
			if title == "" {
				var names []string
				for _, a := range args {
					names = append(names, filepath.Base(a))
				}
				title = "fusescope: " + strings.Join(names, ", ")
			}
			out, err := session.CreateOutput(output)
			if err != nil {
				return err
			}
			if out == nil {
				return report.WriteHTML(os.Stdout, title, inputs)
			}
			return out.Finish(func(w io.Writer) error { return report.WriteHTML(w, title, inputs) })
		},
	}
	f := c.Flags()
	f.StringVarP(&output, "output", "o", "", "write the page to `FILE` (written whole, then put in place)")
	f.StringVar(&title, "title", "", "the page's title (default: the files' names)")
	return c
}
