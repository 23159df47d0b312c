package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/fusescope/fusescope/internal/bench"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/report"
	"github.com/fusescope/fusescope/internal/session"
)

// benchOptions are bench's flags and argument.
type benchOptions struct {
	file                               string
	preset, printPreset, recordTo      string
	scratchDir                         string
	listPresets                        bool
	order, scratch                     string
	reps, warmup                       int
	scale                              float64
	seed                               uint64
	budget                             time.Duration
	remount, noDrop, noTrace, noStages bool
	configs, workloads                 []string
	native                             bool
	labfs, mounts, fios, shells        []string
	asJSON, asCSV                      bool
	changed                            func(flag string) bool
	req                                bench.Request // what validate makes of the rest
}

func newBenchCmd() *cobra.Command {
	o := &benchOptions{}
	c := &cobra.Command{
		Use:   "bench [FILE.yaml]",
		Short: "Compare file system configurations on workloads, with repeated, interleaved, cache-dropped runs and their traces",
		Long: `bench runs each workload in each configuration several times (5 by default), in
an order shuffled anew each round, with the kernel's caches dropped before
each run, over a scratch ext4 file system with a journal that it makes on a
loop device. Each run keeps the workload's figures and the FUSE requests it
made (fusescope trace, with stages where the kernel allows). It prints per
configuration the mean with its 95% interval, median, min, max and CV, and
against the baseline the ratio paired by round with its 95% interval and
the Mann-Whitney U test's p-value; "~" marks a difference the spread cannot
support, as benchstat does.

Configurations are the native directory, the lab file system with fs mount's
options, or any FUSE file system's mount command with {src} and {mnt}.
Workloads are fio jobs, cat of a file N times, a metadata tree, or a shell
command. A YAML file says all of it (docs/bench.md); --preset runs a
built-in experiment beside the figures its source published; flags make a
quick one:

  fusescope bench --preset quick
  fusescope bench --print-preset writeback > mine.yaml
  fusescope bench --native --labfs lab="--preset default" --fio seqread=rw=read,bs=1m,size=256m
  fusescope bench --native --mount bindfs="bindfs {src} {mnt}" --shell untar="tar xf /tmp/src.tar"`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.file = args[0]
			}
			o.changed = cmd.Flags().Changed
			if err := o.validate(); err != nil {
				return err
			}
			return o.run()
		},
	}
	o.bind(c.Flags())
	exclusive(c, "json", "csv")
	exclusive(c, "preset", "native")
	return c
}

// bind defines bench's flags on f, into o.
func (o *benchOptions) bind(f *pflag.FlagSet) {
	f.StringVar(&o.preset, "preset", "", "run a built-in experiment, beside the figures its source published: `NAME` (--list-presets)")
	f.BoolVar(&o.listPresets, "list-presets", false, "list the presets")
	f.StringVar(&o.printPreset, "print-preset", "", "print preset `NAME`'s YAML, to start a bench file from")
	f.IntVarP(&o.reps, "repetitions", "n", bench.DefaultRepetitions, "measured runs of each configuration and workload")
	f.IntVar(&o.warmup, "warmup", 0, "unmeasured runs before them")
	f.Uint64Var(&o.seed, "seed", 0, "seed of the shuffled order (default: from the clock; the record keeps it)")
	f.DurationVar(&o.budget, "budget", 0, "stop after the round that passes this time (e.g. 10m)")
	f.StringVar(&o.order, "order", "random", "order of the configurations in a round: random or rotate")
	f.StringVar(&o.scratch, "scratch", "ext4", "source file system: ext4 (journalled, on a loop device) or tmp (a directory in --scratch-dir)")
	f.StringVar(&o.scratchDir, "scratch-dir", "/var/tmp", "put the scratch file system's image and directories in `DIR` (a killed bench's leftovers there are cleaned up)")
	f.Float64Var(&o.scale, "scale", 1, "multiply the workloads' sizes and file counts by this factor")
	f.BoolVar(&o.remount, "remount", false, "mount each configuration anew before each run (cold runs)")
	f.BoolVar(&o.noDrop, "no-drop-caches", false, "keep the kernel's caches between runs")
	f.BoolVar(&o.noTrace, "no-trace", false, "do not record the FUSE requests of each run")
	f.BoolVar(&o.noStages, "no-stages", false, "record each run's requests without their stages (the trace then costs FUSE-heavy workloads less)")
	f.StringSliceVar(&o.configs, "config", nil, "run only these configurations (and the baseline)")
	f.StringSliceVar(&o.workloads, "workload", nil, "run only these workloads")
	f.BoolVar(&o.native, "native", false, "quick bench: the source directory itself as a configuration (the baseline)")
	f.StringArrayVar(&o.labfs, "labfs", nil, "quick bench: `NAME=\"FS MOUNT OPTIONS\"`, the lab file system as a configuration (repeatable)")
	f.StringArrayVar(&o.mounts, "mount", nil, "quick bench: `NAME=\"COMMAND {src} {mnt}\"`, a FUSE file system as a configuration (repeatable)")
	f.StringArrayVar(&o.fios, "fio", nil, "quick bench: `NAME=OPT=V,OPT=V`, a fio job as a workload (repeatable)")
	f.StringArrayVar(&o.shells, "shell", nil, "quick bench: `NAME=COMMAND`, a shell command timed as a workload (repeatable)")
	f.StringVarP(&o.recordTo, "output", "o", "", "also write the record (JSON, every run) to `FILE`")
	f.BoolVar(&o.asJSON, "json", false, "print the record as JSON (docs/record.md)")
	f.BoolVar(&o.asCSV, "csv", false, "print one CSV row per run and figure (docs/record.md)")
}

// validate checks the flags against each other and maps them to the
// request: one source of the bench (a file, --preset or the quick flags),
// each quick flag's NAME=VALUE, and the settings given over the bench's.
func (o *benchOptions) validate() error {
	if o.listPresets || o.printPreset != "" {
		return nil
	}
	quick := o.native || len(o.labfs)+len(o.mounts)+len(o.fios)+len(o.shells) > 0
	switch {
	case o.file != "" && (o.preset != "" || quick):
		return errors.New("give a bench file, --preset or the quick flags, not several")
	case o.preset != "" && quick:
		return errors.New("--preset runs the preset's configurations and workloads: leave out --native, --labfs, --mount, --fio and --shell, or use --config and --workload to pick")
	case o.file == "" && o.preset == "" && !quick:
		return fmt.Errorf("give a bench file, --preset NAME (one of %s) or configurations and workloads (--native, --labfs, --mount; --fio, --shell)", strings.Join(bench.Presets(), ", "))
	}
	r := bench.Request{File: o.file, Preset: o.preset, Configs: o.configs, Workloads: o.workloads}
	if quick {
		var err error
		if r.Quick, err = o.quickSpec(); err != nil {
			return err
		}
	}
	v := &r.Overrides
	if o.changed("repetitions") {
		if o.reps < 1 {
			return fmt.Errorf("-n %d: give at least one repetition", o.reps)
		}
		v.Repetitions = &o.reps
	}
	if o.changed("warmup") {
		v.Warmup = &o.warmup
	}
	if o.changed("seed") {
		v.Seed = &o.seed
	}
	if o.changed("budget") {
		v.Budget = &o.budget
	}
	if o.changed("order") {
		v.Order = &o.order
	}
	if o.changed("scratch") {
		v.Scratch = &o.scratch
	}
	if o.changed("scale") {
		if !(o.scale > 0) {
			return fmt.Errorf("--scale %v: give a positive factor, e.g. 4", o.scale)
		}
		v.Scale = o.scale
	}
	v.Remount, v.NoDropCaches, v.NoTrace, v.NoStages = o.remount, o.noDrop, o.noTrace, o.noStages
	o.req = r
	return nil
}

// run lists or prints the presets, or runs the bench and prints its
// record (writing it to --output too).
func (o *benchOptions) run() error {
	switch {
	case o.listPresets:
		return bench.WritePresetList(os.Stdout, 80)
	case o.printPreset != "":
		b, err := bench.PresetYAML(o.printPreset)
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(b)
		return err
	}
	// First: a signal from here on unmounts what the bench mounted.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	out, err := session.CreateOutput(o.recordTo)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	opt := bench.Options{Self: self, Trace: bench.OpenTracer, Progress: &bench.Lines{W: os.Stderr}, ScratchDir: o.scratchDir}
	if term.IsTerminal(int(os.Stderr.Fd())) {
		opt.Progress = &bench.Bar{W: os.Stderr}
	}
	rec, err := bench.Execute(ctx, o.req, opt, profile.Meta{Tool: version, Command: os.Args})
	if err != nil {
		out.Finish(nil)
		var missing *bench.NotInBenchError
		if errors.As(err, &missing) {
			flag := map[string]string{"configuration": "config"}[missing.What]
			if flag == "" {
				flag = missing.What
			}
			return fmt.Errorf("--%s %q: no such %s in this bench", flag, missing.Name, missing.What)
		}
		return err
	}
	if err := out.Finish(func(w io.Writer) error { return rec.Write(w) }); err != nil {
		return err
	}
	r := &report.Renderer{Format: report.Format{JSON: o.asJSON, CSV: o.asCSV}, W: os.Stdout}
	return r.Render(rec)
}

// quickSpec is the bench the quick flags describe: each NAME=VALUE a
// configuration or a workload.
func (o *benchOptions) quickSpec() (bench.Spec, error) {
	s := bench.Spec{Name: "from flags"}
	if o.native {
		s.Configurations = append(s.Configurations, bench.Configuration{Name: "native", Native: true})
	}
	pair := func(flag, v string) (string, string, error) {
		name, rest, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return "", "", fmt.Errorf("--%s %q: give NAME=VALUE", flag, v)
		}
		return name, rest, nil
	}
	for _, v := range o.labfs {
		name, opts, err := pair("labfs", v)
		if err != nil {
			return s, err
		}
		s.Configurations = append(s.Configurations, bench.Configuration{Name: name, LabFS: append([]string{}, strings.Fields(opts)...)})
	}
	for _, v := range o.mounts {
		name, tmpl, err := pair("mount", v)
		if err != nil {
			return s, err
		}
		s.Configurations = append(s.Configurations, bench.Configuration{Name: name, Mount: tmpl})
	}
	for _, v := range o.fios {
		name, opts, err := pair("fio", v)
		if err != nil {
			return s, err
		}
		job := bench.FioWorkload{}
		for _, kv := range strings.Split(opts, ",") {
			k, val, _ := strings.Cut(kv, "=")
			if k != "" {
				job[k] = val
			}
		}
		s.Workloads = append(s.Workloads, bench.Workload{Name: name, Kind: &job})
	}
	for _, v := range o.shells {
		name, run, err := pair("shell", v)
		if err != nil {
			return s, err
		}
		s.Workloads = append(s.Workloads, bench.Workload{Name: name, Kind: &bench.ShellWorkload{Run: run}})
	}
	return s, nil
}
