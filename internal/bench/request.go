package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/profile"
)

// Request is a bench as a front end asks for it: a file, a preset, or
// configurations and workloads given one by one (Quick), with settings
// over the bench's own and a choice of what to run. It names no flag:
// the front end has checked that it gave one source of the three.
type Request struct {
	File   string
	Preset string
	// Quick holds the configurations and workloads given one by one.
	Quick     Spec
	Overrides Overrides
	// Configs and Workloads keep only those named (and the baseline).
	Configs, Workloads []string
}

// Overrides are settings given over a bench's own; nil, false or 0: the
// bench's.
type Overrides struct {
	Repetitions, Warmup *int
	Seed                *uint64
	Budget              *time.Duration
	Order, Scratch      *string
	Remount             bool
	NoDropCaches        bool
	NoTrace, NoStages   bool
	// Scale multiplies the workloads' work (Spec.Scale; 0: as they are).
	Scale float64
}

// NotInBenchError is a configuration or workload asked for by name that
// the bench does not have.
type NotInBenchError struct {
	What string // "configuration" or "workload"
	Name string
}

func (e *NotInBenchError) Error() string {
	return fmt.Sprintf("no %s %q in this bench", e.What, e.Name)
}

// Spec is the bench r describes: loaded, overridden, filtered and checked.
func (r Request) Spec() (*Spec, error) {
	var s *Spec
	var err error
	switch {
	case r.File != "":
		s, err = Load(r.File)
	case r.Preset != "":
		s, err = LoadPreset(r.Preset)
	default:
		quick := r.Quick
		s = &quick
		if s.Name == "" {
			s.Name = "from flags"
		}
	}
	if err != nil {
		return nil, err
	}
	o := r.Overrides
	if o.Repetitions != nil {
		s.Repetitions = *o.Repetitions
	}
	if o.Warmup != nil {
		s.Warmup = *o.Warmup
	}
	if o.Seed != nil {
		s.Seed = *o.Seed
	}
	if o.Budget != nil {
		s.Budget = Duration(*o.Budget)
	}
	if o.Order != nil {
		s.Order = *o.Order
	}
	if o.Scratch != nil {
		s.Scratch = *o.Scratch
	}
	if o.Remount {
		s.Remount = true
	}
	if o.NoDropCaches {
		s.DropCaches = new(bool)
	}
	if o.NoTrace {
		s.Trace = new(bool)
	}
	if o.NoStages {
		s.Stages = new(bool)
	}
	if o.Scale != 0 {
		if err := s.Scale(o.Scale); err != nil {
			return nil, err
		}
	}
	if err := s.Only(r.Configs, r.Workloads); err != nil {
		return nil, err
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	return s, nil
}

// ErrInterrupted is a bench stopped by its context (a signal): everything
// it mounted was unmounted.
var ErrInterrupted = errors.New("bench interrupted: everything it mounted is unmounted, nothing was saved")

// Execute runs the bench r asks for and returns its record: meta is the
// front end's part of it (the tool's version, the command), the rest is
// filled in here.
func Execute(ctx context.Context, r Request, opt Options, meta profile.Meta) (*profile.Record, error) {
	spec, err := r.Spec()
	if err != nil {
		return nil, err
	}
	meta.Source, meta.Kernel, meta.Host, meta.Start = "bench", kernel.Release(), kernel.Hostname(), time.Now()
	rep, err := Run(ctx, spec, opt)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, ErrInterrupted
		}
		return nil, err
	}
	meta.End = time.Now()
	return &profile.Record{Schema: profile.Schema, Meta: meta, Bench: rep}, nil
}
