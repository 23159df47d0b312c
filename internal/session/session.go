// Package session drives a run of fusescope's sources: it opens them once
// a -- CMD is held before its exec, reports intervals (differences of
// cumulative snapshots, or what a source says its interval was), polls
// sources that have events, ends the run on Ctrl-C, on the command's exit
// or on -p's process's exit, and writes the -o record atomically. trace,
// syscalls (live) and fs stats all run through Run; cmd/ only maps flags
// to a Config and picks the sinks.
package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
	"golang.org/x/sys/unix"
)

// Source is one measurement: it measures from when it is opened until it
// is closed.
type Source interface {
	// Snapshot is the record of everything measured so far: cumulative,
	// so that two snapshots' difference is what happened between them.
	Snapshot() (*profile.Record, error)
	// Close stops measuring and frees what the source holds (probes,
	// maps); it is called once, whatever happened.
	Close() error
}

// Intervaler is a source that reports intervals (bcc's [interval
// [count]]). Its interval records are more than the difference of two
// snapshots: the exact extremes of the interval, its own events.
type Intervaler interface {
	// Interval is the record of the interval since the previous call (or
	// the start) and the cumulative record at its end. final marks the
	// run's last interval, cut short by the end of the run or its count.
	Interval(final bool) (interval, whole *profile.Record, err error)
}

// Poller is a source with work to do while it measures: events to read
// and hand to their sinks, or a target that may go away. An error ends
// the run after its last report, and Run returns it.
type Poller interface {
	PollEvery() time.Duration
	Poll() error
}

// Finisher is a source whose record of the whole run is made at its end
// (the live system-call source analyses its events as a stream), or that
// records how the run's command ended. Run calls it, instead of Snapshot,
// at the end of a run without intervals.
type Finisher interface {
	Finish(command *Exit) (*profile.Record, error)
}

// Settler is a source whose requests can outlive the process that made
// them: a close's RELEASE is sent in the background and often ends after
// the command has exited. When the run ends with its command's (or -p
// PID's) exit, Run calls Settle before the last record, to wait at most
// max for what was in flight then to end.
type Settler interface {
	Settle(max time.Duration) error
}

// settleMax bounds the wait for a command's last requests: a daemon that
// holds one longer (hung, or delayed on purpose) leaves it in flight.
const settleMax = time.Second

// Releaser is a source whose clock starts with the command (syscalls'
// --since and --until count from it, as a log's from its first line): Run
// calls Releasing just before it starts the command, or releases it from
// the gate (its exec follows).
type Releaser interface {
	Releasing() error
}

// Target is what a source is opened for.
type Target struct {
	// CommandParent is set when a -- CMD will run: it is this process,
	// and the command is the first of its children to execute once the
	// source is open. Sources that trace from the command's exec arm for
	// it; 0 without a command.
	CommandParent int
}

// CommandWatcher is a source that learns the command's process while it
// is held, before its first instruction: its PID and the fds it has when
// it executes (its own numbers, which are ours too: its stdio, and what
// we inherited without close-on-exec). Held after its exec, or at the
// gate before it (see hold.go), it may then have other fds that its exec
// closes.
type CommandWatcher interface {
	CommandStarted(pid int, fds []int) error
}

// Config is one run.
type Config struct {
	Interval time.Duration // 0: one record, of the whole run
	Count    int           // interval records to report; 0: until the run ends
	// Immediate reports what the source holds now and ends: fs stats
	// without an interval, whose daemon counted since it was mounted.
	Immediate bool
	Command   []string // -- CMD: run once the sources are open; its exit ends the run
	PID       int      // -p: its exit ends the run, as strace -p's does
	Output    string   // -o: the whole run's record, put in place when the run ends
	// Save writes the -o file; nil writes the record as JSON.
	Save func(io.Writer, *profile.Record) error
	// Ready is called once the source is open, before the command runs.
	Ready func()
	// Emit receives each interval's record (interval mode) or the whole
	// run's; final marks the last call.
	Emit func(rec *profile.Record, final bool) error
	// Log receives one-line notes (the -p process exited); nil: none.
	Log io.Writer
}

// Run opens the source with open and drives it until the run ends, then
// returns the record of the whole run. The error is the run's (a source's
// Poll that ended it, the command's exit status as an *ExitError) after
// the last record was emitted and saved, or why the run could not be
// made. Sources are closed, the command is never left held,
// and a -o file is never left half written.
func Run(ctx context.Context, cfg Config, open func(Target) (Source, error)) (whole *profile.Record, err error) {
	out, err := CreateOutput(cfg.Output)
	if err != nil {
		return nil, err
	}
	defer func() {
		if whole == nil {
			out.Finish(nil) // no temporary file left behind
		}
	}()
	ctx, end := context.WithCancel(ctx)
	defer end()

	var cmd *command
	if len(cfg.Command) > 0 {
		if cmd, err = prepareCommand(cfg.Command); err != nil {
			return nil, err
		}
		defer cmd.abandon()
	}
	// What ended the run while its command still ran, for the line that
	// says the command was ended.
	var endedBy atomic.Pointer[string]
	stop := func(why string) {
		endedBy.CompareAndSwap(nil, &why)
		end()
	}
	// A Ctrl-C ends the run; with a command it reaches the command (the
	// terminal's reaches it anyway), and a second one, a SIGTERM or a
	// SIGHUP end the run and the command with it (terminate).
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		n := 0
		for s := range sigs {
			n++
			name := unix.SignalName(s.(syscall.Signal))
			switch {
			case cmd == nil || s != os.Interrupt:
				stop("fusescope got " + name)
			case n > 1:
				stop("fusescope got a second " + name)
			case !cmd.signal(s):
				stop("fusescope got " + name)
			}
		}
	}()
	var pidExited atomic.Bool
	if cfg.PID > 0 {
		w, err := watchExit(cfg.PID)
		if err != nil {
			return nil, err
		}
		defer w.close()
		go func() {
			if w.wait(ctx) {
				pidExited.Store(true)
				end()
			}
		}()
	}

	target := Target{}
	if cmd != nil {
		target.CommandParent = os.Getpid()
	}
	src, err := open(target)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	if cfg.Ready != nil {
		cfg.Ready()
	}
	if cmd != nil {
		if r, ok := src.(Releaser); ok {
			if err := r.Releasing(); err != nil {
				return nil, err
			}
		}
		if err := cmd.start(); err != nil {
			return nil, err
		}
		if w, ok := src.(CommandWatcher); ok {
			if err := w.CommandStarted(cmd.pid, cmd.fds); err != nil {
				return nil, err
			}
		}
		if err := cmd.release(end); err != nil {
			return nil, err
		}
	}
	if cfg.Immediate {
		whole, err = src.Snapshot()
		if err != nil {
			return nil, err
		}
		return whole, cfg.emit(whole, true)
	}

	iv, _ := src.(Intervaler)
	if cfg.Interval > 0 && iv == nil {
		return nil, fmt.Errorf("this source cannot report intervals: leave out the interval")
	}
	var pollC, tickC <-chan time.Time
	poller, _ := src.(Poller)
	if poller != nil {
		t := time.NewTicker(poller.PollEvery())
		defer t.Stop()
		pollC = t.C
	}
	if cfg.Interval > 0 {
		t := time.NewTicker(cfg.Interval)
		defer t.Stop()
		tickC = t.C
	}
	var runErr error // what ended the run, returned after the last report
	emitted := 0
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-pollC:
			if runErr = poller.Poll(); runErr != nil {
				break loop
			}
		case <-tickC:
			if cfg.Count > 0 && emitted+1 >= cfg.Count {
				endedBy.CompareAndSwap(nil, ptr(fmt.Sprintf("the run's count of %d interval%s was reached", cfg.Count, map[bool]string{true: "", false: "s"}[cfg.Count == 1])))
				break loop
			}
			rec, _, err := iv.Interval(false)
			if err != nil {
				return nil, err
			}
			if err := cfg.emit(rec, false); err != nil {
				return nil, err
			}
			emitted++
		}
	}

	var exit *Exit
	exited := pidExited.Load() // the run ends as its process did
	if cmd != nil {
		exited = false
		if exit = cmd.ended(); exit != nil {
			exited = true
		} else {
			why := "the run ended"
			if runErr != nil {
				why = fmt.Sprintf("the run ended (%v)", runErr)
			} else if p := endedBy.Load(); p != nil {
				why = *p
			}
			exit = cmd.terminate(why, cfg.log)
		}
	}
	if s, ok := src.(Settler); ok && exited && runErr == nil {
		if err := s.Settle(settleMax); err != nil {
			return nil, err
		}
	}
	if cfg.Interval > 0 {
		var last *profile.Record
		if last, whole, err = iv.Interval(true); err != nil {
			return nil, err
		}
		if err := cfg.emit(last, true); err != nil {
			return nil, err
		}
	} else {
		if f, ok := src.(Finisher); ok {
			whole, err = f.Finish(exit)
		} else {
			whole, err = src.Snapshot()
		}
		if err != nil {
			return nil, err
		}
		if err := cfg.emit(whole, true); err != nil {
			return whole, err
		}
	}
	if pidExited.Load() && runErr == nil && cfg.Log != nil {
		fmt.Fprintf(cfg.Log, "Process %d exited: tracing ended.\n", cfg.PID)
	}
	save := cfg.Save
	if save == nil {
		save = func(w io.Writer, r *profile.Record) error { return r.Write(w) }
	}
	if err := out.Finish(func(w io.Writer) error { return save(w, whole) }); err != nil {
		return whole, err
	}
	if runErr != nil {
		return whole, runErr
	}
	return whole, exit.Err()
}

func (cfg *Config) log(line string) {
	if cfg.Log != nil {
		fmt.Fprintln(cfg.Log, line)
	}
}

func ptr[T any](v T) *T { return &v }

func (cfg *Config) emit(rec *profile.Record, final bool) error {
	if cfg.Emit == nil {
		return nil
	}
	return cfg.Emit(rec, final)
}

// IsExit tells whether err is a command's exit status passed on.
func IsExit(err error) (*ExitError, bool) {
	var e *ExitError
	return e, errors.As(err, &e)
}
