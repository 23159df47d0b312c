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
	"golang.org/x/term"

	"github.com/fusescope/fusescope/internal/bench"
	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/report"
	"github.com/fusescope/fusescope/internal/session"
)

func newBenchCmd() *cobra.Command {
	var (
		preset, printPreset, recordTo, order, scratch   string
		scratchDir                                      string
		reps, warmup                                    int
		scale                                           float64
		seed                                            uint64
		budget                                          time.Duration
		remount, noDrop, noTrace, noStages, listPresets bool
		configs, workloads                              []string
		native                                          bool
		labfs, mounts, fios, shells                     []string
		asJSON, asCSV                                   bool
	)
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
			// First: a signal from here on unmounts what the bench mounted.
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			switch {
			case listPresets:
				return bench.WritePresetList(os.Stdout, 80)
			case printPreset != "":
				b, err := bench.PresetYAML(printPreset)
				if err != nil {
					return err
				}
				_, err = os.Stdout.Write(b)
				return err
			}
			spec, err := benchSpec(args, preset, native, labfs, mounts, fios, shells)
			if err != nil {
				return err
			}
			f := cmd.Flags()
			if f.Changed("repetitions") {
				if reps < 1 {
					return fmt.Errorf("-n %d: give at least one repetition", reps)
				}
				spec.Repetitions = reps
			}
			if f.Changed("warmup") {
				spec.Warmup = warmup
			}
			if f.Changed("seed") {
				spec.Seed = seed
			}
			if f.Changed("budget") {
				spec.Budget = bench.Duration(budget)
			}
			if f.Changed("order") {
				spec.Order = order
			}
			if f.Changed("scratch") {
				spec.Scratch = scratch
			}
			if remount {
				spec.Remount = true
			}
			if noDrop {
				spec.DropCaches = new(bool)
			}
			if noTrace {
				spec.Trace = new(bool)
			}
			if noStages {
				spec.Stages = new(bool)
			}
			if f.Changed("scale") {
				if err := spec.Scale(scale); err != nil {
					return err
				}
			}
			if err := spec.Only(configs, workloads); err != nil {
				return err
			}
			if err := bench.Check(spec); err != nil {
				return err
			}
			out, err := session.CreateOutput(recordTo)
			if err != nil {
				return err
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			opt := bench.Options{Self: self, Trace: bench.OpenTracer, Progress: &bench.Lines{W: os.Stderr}, ScratchDir: scratchDir}
			if term.IsTerminal(int(os.Stderr.Fd())) {
				opt.Progress = &bench.Bar{W: os.Stderr}
			}
			start := time.Now()
			rep, err := bench.Run(ctx, spec, opt)
			if err != nil {
				out.Finish(nil)
				if errors.Is(err, context.Canceled) {
					return errors.New("bench interrupted: everything it mounted is unmounted, nothing was saved")
				}
				return err
			}
			rec := &profile.Record{Schema: profile.Schema, Meta: profile.Meta{Tool: version, Source: "bench", Kernel: kernel.Release(),
				Host: kernel.Hostname(), Start: start, End: time.Now(), Command: os.Args}, Bench: rep}
			if err := out.Finish(func(w io.Writer) error { return rec.Write(w) }); err != nil {
				return err
			}
			r := &report.Renderer{Format: report.Format{JSON: asJSON, CSV: asCSV}, W: os.Stdout}
			return r.Render(rec)
		},
	}
	f := c.Flags()
	f.StringVar(&preset, "preset", "", "run a built-in experiment, beside the figures its source published: `NAME` (--list-presets)")
	f.BoolVar(&listPresets, "list-presets", false, "list the presets")
	f.StringVar(&printPreset, "print-preset", "", "print preset `NAME`'s YAML, to start a bench file from")
	f.IntVarP(&reps, "repetitions", "n", bench.DefaultRepetitions, "measured runs of each configuration and workload")
	f.IntVar(&warmup, "warmup", 0, "unmeasured runs before them")
	f.Uint64Var(&seed, "seed", 0, "seed of the shuffled order (default: from the clock; the record keeps it)")
	f.DurationVar(&budget, "budget", 0, "stop after the round that passes this time (e.g. 10m)")
	f.StringVar(&order, "order", "random", "order of the configurations in a round: random or rotate")
	f.StringVar(&scratch, "scratch", "ext4", "source file system: ext4 (journalled, on a loop device) or tmp (a directory in --scratch-dir)")
	f.StringVar(&scratchDir, "scratch-dir", "/var/tmp", "put the scratch file system's image and directories in `DIR` (a killed bench's leftovers there are cleaned up)")
	f.Float64Var(&scale, "scale", 1, "multiply the workloads' sizes and file counts by this factor")
	f.BoolVar(&remount, "remount", false, "mount each configuration anew before each run (cold runs)")
	f.BoolVar(&noDrop, "no-drop-caches", false, "keep the kernel's caches between runs")
	f.BoolVar(&noTrace, "no-trace", false, "do not record the FUSE requests of each run")
	f.BoolVar(&noStages, "no-stages", false, "record each run's requests without their stages (the trace then costs FUSE-heavy workloads less)")
	f.StringSliceVar(&configs, "config", nil, "run only these configurations (and the baseline)")
	f.StringSliceVar(&workloads, "workload", nil, "run only these workloads")
	f.BoolVar(&native, "native", false, "quick bench: the source directory itself as a configuration (the baseline)")
	f.StringArrayVar(&labfs, "labfs", nil, "quick bench: `NAME=\"FS MOUNT OPTIONS\"`, the lab file system as a configuration (repeatable)")
	f.StringArrayVar(&mounts, "mount", nil, "quick bench: `NAME=\"COMMAND {src} {mnt}\"`, a FUSE file system as a configuration (repeatable)")
	f.StringArrayVar(&fios, "fio", nil, "quick bench: `NAME=OPT=V,OPT=V`, a fio job as a workload (repeatable)")
	f.StringArrayVar(&shells, "shell", nil, "quick bench: `NAME=COMMAND`, a shell command timed as a workload (repeatable)")
	f.StringVarP(&recordTo, "output", "o", "", "also write the record (JSON, every run) to `FILE`")
	f.BoolVar(&asJSON, "json", false, "print the record as JSON (docs/record.md)")
	f.BoolVar(&asCSV, "csv", false, "print one CSV row per run and figure (docs/record.md)")
	exclusive(c, "json", "csv")
	exclusive(c, "preset", "native")
	return c
}

// benchSpec is the bench a file, a preset or the quick flags describe.
func benchSpec(args []string, preset string, native bool, labfs, mounts, fios, shells []string) (*bench.Spec, error) {
	quick := native || len(labfs)+len(mounts)+len(fios)+len(shells) > 0
	switch {
	case len(args) == 1 && (preset != "" || quick):
		return nil, errors.New("give a bench file, --preset or the quick flags, not several")
	case len(args) == 1:
		return bench.Load(args[0])
	case preset != "" && quick:
		return nil, errors.New("--preset runs the preset's configurations and workloads: leave out --native, --labfs, --mount, --fio and --shell, or use --config and --workload to pick")
	case preset != "":
		return bench.LoadPreset(preset)
	case !quick:
		return nil, fmt.Errorf("give a bench file, --preset NAME (one of %s) or configurations and workloads (--native, --labfs, --mount; --fio, --shell)", strings.Join(bench.Presets(), ", "))
	}
	s := &bench.Spec{Name: "from flags"}
	if native {
		s.Configurations = append(s.Configurations, bench.Configuration{Name: "native", Native: true})
	}
	pair := func(flag, v string) (string, string, error) {
		name, rest, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return "", "", fmt.Errorf("--%s %q: give NAME=VALUE", flag, v)
		}
		return name, rest, nil
	}
	for _, v := range labfs {
		name, opts, err := pair("labfs", v)
		if err != nil {
			return nil, err
		}
		s.Configurations = append(s.Configurations, bench.Configuration{Name: name, LabFS: append([]string{}, strings.Fields(opts)...)})
	}
	for _, v := range mounts {
		name, tmpl, err := pair("mount", v)
		if err != nil {
			return nil, err
		}
		s.Configurations = append(s.Configurations, bench.Configuration{Name: name, Mount: tmpl})
	}
	for _, v := range fios {
		name, opts, err := pair("fio", v)
		if err != nil {
			return nil, err
		}
		job := map[string]string{}
		for _, kv := range strings.Split(opts, ",") {
			k, val, _ := strings.Cut(kv, "=")
			if k != "" {
				job[k] = val
			}
		}
		s.Workloads = append(s.Workloads, bench.Workload{Name: name, Fio: job})
	}
	for _, v := range shells {
		name, run, err := pair("shell", v)
		if err != nil {
			return nil, err
		}
		s.Workloads = append(s.Workloads, bench.Workload{Name: name, Shell: &bench.ShellWorkload{Run: run}})
	}
	return s, nil
}
