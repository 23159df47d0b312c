package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fusescope/fusescope/internal/doctor"
	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/report"
	"github.com/spf13/cobra"
)

// doctorFiles is how many of the files with the most FUSE time a doctor
// record lists (with each mount's count of files, which the rules read).
const doctorFiles = 10

// doctorOptions are fusescope doctor's flags and arguments.
type doctorOptions struct {
	mounts   []string
	pid      int
	comm     string
	rules    []string
	hung     time.Duration
	recordTo string
	json     bool
	all      bool

	duration time.Duration
	records  []string
	command  []string
}

func newDoctorCmd() *cobra.Command {
	var o doctorOptions
	c := &cobra.Command{
		Use:   "doctor [flags] [DURATION | RECORD.json...] [-- CMD ARGS...]",
		Short: "Name the FUSE performance anti-patterns a mount shows, with the evidence, the fix and its measured gain",
		Long: `Trace FUSE mounts (with the requests' stages, the page cache, hung requests,
fusectl's waiting count sampled every 10 ms, and the application's calls
where -p, --comm or -- CMD names it), then run doctor's rules over the
record: each finding says what was found on which mount, the record's
figures that show it, the cause in one sentence, the fix as libfuse,
go-fuse, fusectl and the common daemons spell it, and the gain the fix was
measured to bring. Worst first: the most FUSE time first. A rule that needs
data the record lacks says what is missing and how to record it.

DURATION (seconds, or 10s, 1m) ends the trace; so do -- CMD's exit, -p's
exit and Ctrl-C. Given saved records (trace -o, doctor -o) instead, it runs
the rules over them and traces nothing. The rules and their thresholds are
in docs/doctor.md.`,
		Example: `  fusescope doctor --mount /mnt/sshfs 30        # 30 s of whatever runs there
  fusescope doctor --mount /mnt/lab -- fio job.fio   # while fio runs, its calls included
  fusescope doctor -o doc.json -- make -j2          # findings kept in the record
  fusescope doctor run1.json                       # a saved trace -o record
  fusescope doctor --rule killpriv,small-writes run1.json
  fusescope report doc.json > doc.html             # the findings in the HTML report`,
		Args: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash >= 0 && len(args[:dash]) > 0 {
				return fmt.Errorf("doctor takes a DURATION or records, or -- CMD: not both (got %q before --)", strings.Join(args[:dash], " "))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				if o.command = args[dash:]; len(o.command) == 0 {
					return fmt.Errorf("nothing after --: give the command to run while doctor traces, as in fusescope doctor -- make")
				}
				args = args[:dash]
			}
			if err := o.parseArgs(args); err != nil {
				return err
			}
			if len(o.records) > 0 {
				return o.saved(cmd)
			}
			return o.live()
		},
	}
	f := c.Flags()
	f.StringArrayVar(&o.mounts, "mount", nil, "diagnose only the FUSE file system mounted at `PATH` (repeatable)")
	f.IntVarP(&o.pid, "pid", "p", 0, "the application is process `PID`: its calls are counted, and its exit ends the run")
	f.StringVar(&o.comm, "comm", "", "the application is the commands named `NAME`: their calls are counted")
	f.StringSliceVar(&o.rules, "rule", nil, "run only these rules, e.g. `killpriv,small-writes` (default: all; docs/doctor.md)")
	f.DurationVar(&o.hung, "hung", time.Second, "a request in flight this long counts as hung")
	f.StringVarP(&o.recordTo, "output", "o", "", "save the record, findings included, to `RECORD.json`")
	f.BoolVarP(&o.json, "json", "j", false, "print the record, findings included, as JSON")
	f.BoolVar(&o.all, "requests", false, "also print the requests' histograms and table before the findings, as trace does")
	return c
}

// parseArgs tells a duration from record files.
func (o *doctorOptions) parseArgs(args []string) error {
	if len(args) == 1 {
		if d, ok := parseDuration(args[0]); ok {
			if d <= 0 {
				return fmt.Errorf("duration %q: give a positive time, e.g. fusescope doctor 30 or 1m", args[0])
			}
			o.duration = d
			return nil
		}
	}
	for _, a := range args {
		if _, err := os.Stat(a); err != nil && a != "-" {
			return fmt.Errorf("%q is neither a duration (30, 10s, 1m) nor a record file: give one of them", a)
		}
	}
	o.records = args
	return nil
}

// parseDuration reads seconds (30, 0.5) or a Go duration (10s, 1m30s).
func parseDuration(s string) (time.Duration, bool) {
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		if !(secs >= 0 && secs <= 1e6) {
			return 0, true
		}
		return time.Duration(secs * float64(time.Second)), true
	}
	d, err := time.ParseDuration(s)
	return d, err == nil
}

// saved runs the rules over saved records, the live run's flags refused.
func (o *doctorOptions) saved(cmd *cobra.Command) error {
	for _, name := range []string{"mount", "pid", "comm", "hung"} {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s applies to a live run; the records were made already: leave it out", name)
		}
	}
	if len(o.command) > 0 {
		return fmt.Errorf("-- CMD runs a command under a live trace: leave it out with records")
	}
	if o.recordTo != "" {
		return fmt.Errorf("-o saves a live run's record: with saved records, use --json > FILE")
	}
	for _, path := range o.records {
		recs, err := readRecords(path)
		if err != nil {
			return err
		}
		kind, err := report.FileKind(path, recs)
		if err != nil {
			return err
		}
		if kind != report.KindRequests {
			return fmt.Errorf("%s is %s: doctor reads records of FUSE requests (fusescope trace -o, doctor -o)", path, report.KindNames[kind])
		}
		// An interval trace's lines: the rules read the whole run, the
		// hung requests as the last interval saw them.
		rec := report.WholeRun(recs)
		rec.Hung = recs[len(recs)-1].Hung
		if rec.Findings, err = doctor.Diagnose(rec, o.ruleNames()...); err != nil {
			return err
		}
		if err := o.show(rec); err != nil {
			return err
		}
	}
	return nil
}

func (o *doctorOptions) ruleNames() []string {
	var names []string
	for _, r := range o.rules {
		for _, n := range strings.Split(r, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
	}
	return names
}

func (o *doctorOptions) show(rec *profile.Record) error {
	r := &report.Renderer{Format: report.Format{JSON: o.json}, W: os.Stdout, FindingsOnly: !o.all}
	return r.Render(rec)
}

// live traces the mounts, then diagnoses.
func (o *doctorOptions) live() error {
	switch {
	case len(o.command) > 0 && o.pid > 0:
		return fmt.Errorf("-p and -- CMD both name the application: give one")
	case o.pid < 0:
		return fmt.Errorf("-p %d: give a positive process id", o.pid)
	case o.hung <= 0:
		return fmt.Errorf("--hung %v: give a positive duration, e.g. --hung 5s", o.hung)
	}
	if o.pid > 0 {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", o.pid)); err != nil {
			return fmt.Errorf("-p %d: no such process", o.pid)
		}
	}
	if len(o.command) == 0 && o.pid == 0 && o.duration == 0 {
		fmt.Fprintln(os.Stderr, "note: no DURATION, -p or -- CMD: tracing until Ctrl-C.")
	}
	mounts, err := resolveMounts(o.mounts)
	if err != nil {
		return err
	}
	app := o.pid > 0 || o.comm != "" || len(o.command) > 0
	return doctor.Live(context.Background(), doctor.LiveConfig{
		Requests: ktrace.RequestConfig{
			Options: ktrace.Options{PID: o.pid, Comm: o.comm, ReapAge: ktrace.DefaultReapAge, Attach: ktrace.AttachAuto,
				Stages: true, PageCache: true, Calls: app},
			Mounts:  mounts,
			Command: os.Args,
			Tool:    version,
			Hung:    o.hung,
			Files:   doctorFiles,
		},
		Duration: o.duration,
		Command:  o.command,
		PID:      o.pid,
		Output:   o.recordTo,
		Rules:    o.ruleNames(),
		Log:      os.Stderr,
		Ready: func(s *ktrace.RequestSource) {
			what := "every FUSE connection"
			if n := len(s.Conns()); n > 0 {
				what = fmt.Sprintf("%d FUSE connection(s)", n)
			}
			fmt.Fprintf(os.Stderr, "doctor: tracing %s...\n", what)
		},
		Show: o.show,
	})
}
