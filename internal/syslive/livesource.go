// Package syslive is the live system-call source: the kernel side
// (ktrace's programs, loaded here or served by sysserve) hands typed
// events to Live, which keeps each process's fd table and names what the
// events do not (from /proc) to make strace.Events for systrace's
// analyzers; LiveSource runs them as a session source, TopSource counts
// calls for fusescope top. Recordings of the events and their replay test
// the interpretation without a kernel.
package syslive

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/option"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/session"
	"github.com/fusescope/fusescope/internal/strace"
	"github.com/fusescope/fusescope/internal/sysevent"
	"github.com/fusescope/fusescope/internal/sysserve"
	"github.com/fusescope/fusescope/internal/systrace"
)

// kernelSide is what LiveSource needs of the programs: its own
// (ktrace.SyscallTracer) or a server's (sysserve.Client).
type kernelSide interface {
	Root() int
	Running() map[int]string
	Window() (start, end float64)
	SetOrigin() error
	Began() time.Time
	Ended() time.Time
	Run(stop <-chan struct{}, emit func(*sysevent.Event), info *profile.LiveInfo) error
	Close() error
}

// SourceLive names the live system-call source in records.
const SourceLive = "kernel:raw_syscalls (sys_enter, sys_exit)"

// LiveConfig is what the live system-call source traces and how its
// events are analysed.
type LiveConfig struct {
	ktrace.SyscallOptions
	Filter   systrace.Filter
	Analysis systrace.Options
	Command  []string // recorded in the metadata
	Tool     string   // fusescope version
	Traced   []string // the -- CMD command, for the report
	// Server is the socket of a syscalls --serve whose programs the run
	// uses when it can take it; otherwise (none answers, or it traces
	// another run) the run loads its own. ServerRequired: a socket no
	// server answers on is an error.
	Server         string
	ServerRequired bool
}

// LiveSource is the live system-call source as a session source: the
// kernel side (ktrace.SyscallTracer) hands its typed events to Live,
// whose events are analysed as they come; the report is made at the end.
type LiveSource struct {
	cfg  LiveConfig
	tr   kernelSide
	live *Live
	info profile.LiveInfo

	stop      chan struct{}
	stopOnce  sync.Once
	beginOnce sync.Once     // the analysis started (or, if never, done closed)
	analyse   func()        // reads and analyses the events until stop
	done      chan struct{} // closed when the analysis has ended
	report    *profile.SyscallReport
	err       error
}

// OpenLive attaches the live source to the process the run traces: the
// command about to start (target.CommandParent), or cfg.PID.
func OpenLive(cfg LiveConfig, target session.Target) (*LiveSource, error) {
	opts := cfg.SyscallOptions
	opts.GateParent = target.CommandParent
	opts.Category = strace.Category
	tr, err := openKernelSide(cfg, opts)
	if err != nil {
		return nil, err
	}
	var proc Proc = ProcFS{}
	var rec *recorder
	if path := os.Getenv(recordEnv); path != "" {
		if rec, err = newRecorder(path, proc); err != nil {
			tr.Close()
			return nil, err
		}
		proc = rec
	}
	s := &LiveSource{cfg: cfg, tr: tr, live: NewLive(proc), info: profile.LiveInfo{Command: cfg.Traced},
		stop: make(chan struct{}), done: make(chan struct{})}
	o := cfg.Analysis
	// Shorter calls reach user space only when they name an fd or a
	// process: ranked with the long ones, they would push out waits that
	// were never seen.
	o.Running = tr.Running()
	o.Window = tr.Window
	o.MinWaitS = ktrace.DefaultMinWait.Seconds()
	if opts.MinWait > 0 {
		o.MinWaitS = opts.MinWait.Seconds()
	}
	events := func(emit func(*strace.Event)) error {
		return tr.Run(s.stop, func(ev *sysevent.Event) {
			if rec != nil {
				rec.event(ev)
			}
			s.live.Handle(ev, emit)
		}, &s.info)
	}
	s.analyse = func() {
		defer close(s.done)
		filter := cfg.Filter
		filter.Origin, _ = tr.Window() // the kernel's window counts from there too
		s.report, s.err = systrace.Analyze(filter.Wrap(events), nil, o)
		if rec != nil {
			rec.close()
		}
	}
	if opts.GateParent == 0 {
		s.live.Begin(tr.Root(), nil)
		s.begin() // -p: time 0 is the attach
	}
	return s, nil
}

// CommandStarted learns what the command holds, stopped before its first
// instruction, and starts the analysis of the events.
func (s *LiveSource) CommandStarted(pid int, fds []int) error {
	s.live.Begin(pid, fds)
	s.begin()
	return nil
}

// Releasing is called as the run starts its command: time 0 of --since,
// --until and the timeline is now, as a log's is its first line (the
// command's exec, which follows at once). Otherwise it would be when the
// programs were loaded, 0.04 s before, or up to a second on a loaded
// machine.
func (s *LiveSource) Releasing() error {
	return s.tr.SetOrigin()
}

// begin starts the analysis of the events, from the origin on.
func (s *LiveSource) begin() { s.beginOnce.Do(func() { go s.analyse() }) }

// openKernelSide starts the run on a server's programs, or on its own.
func openKernelSide(cfg LiveConfig, opts ktrace.SyscallOptions) (kernelSide, error) {
	if cfg.Server != "" && !opts.EmptyPrograms {
		if err := sysserve.CheckSocketPath(cfg.Server); err != nil {
			return nil, err
		}
		r, err := sysserve.Dial(cfg.Server, cfg.Tool, opts)
		if err == nil {
			return r, nil
		}
		var none sysserve.NoServer
		if !errors.As(err, &none) {
			return nil, err
		}
		if cfg.ServerRequired && !none.Busy { // a busy one: this run loads its own
			return nil, option.Errorf("{socket} %s: %v: start fusescope syscalls {serve} {socket} %[1]s first, or leave {socket} out", cfg.Server, none.Why)
		}
	}
	tr, err := ktrace.StartSyscalls(opts)
	if err != nil {
		return nil, err
	}
	return tr, nil
}

// Snapshot is refused: the report is made once, at the end.
func (s *LiveSource) Snapshot() (*profile.Record, error) {
	return nil, fmt.Errorf("the live system-call source reports once, at the end of its run")
}

// Finish stops tracing, waits for the analysis of the last events and
// returns the record, with how the command ended (nil: it had not).
func (s *LiveSource) Finish(command *session.Exit) (*profile.Record, error) {
	s.begin()
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.done
	if s.err != nil {
		return nil, s.err
	}
	live := s.info
	if command != nil {
		live.ExitStatus, live.KilledBy, live.CommandS = command.Status, command.KilledBy, command.Ran.Seconds()
	}
	s.report.Live = &live
	s.report.Filter = s.cfg.Filter.Record()
	return &profile.Record{Schema: profile.Schema, Syscalls: s.report, Meta: profile.Meta{
		Tool: s.cfg.Tool, Source: SourceLive, Kernel: kernel.Release(), Host: kernel.Hostname(), Command: s.cfg.Command,
		Start: s.tr.Began(), End: s.tr.Ended()}}, nil
}

// Close stops tracing and frees the programs and maps.
func (s *LiveSource) Close() error {
	s.stopOnce.Do(func() { close(s.stop) })
	s.beginOnce.Do(func() { close(s.done) }) // never released: nothing to analyse
	<-s.done
	return s.tr.Close()
}
