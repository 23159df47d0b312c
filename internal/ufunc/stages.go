package ufunc

import (
	"fmt"
	"os"
	"strconv"

	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/session"
)

// StageSource is ufunc --stages: the FUSE requests traced with their
// stages (trace --stages) and the functions timed in the same run, a call
// that begins while a daemon thread holds a request (read from /dev/fuse,
// not yet answered) counted for that request's opcode up to the reply's
// start. In a Go daemon the holder is the goroutine, which may read a
// request on one thread and handle it on another. The record is the
// trace's, with the functions and the daemon stage by function in its
// daemon_functions section.
type StageSource struct {
	*ktrace.RequestSource
	fn  *Source
	pid int
	// base is each (connection, opcode)'s daemon stage when the functions'
	// probes were attached: the requests held before, which no probe saw,
	// are left out of the rows of the whole run and of its first interval.
	base      map[stageKey][2]uint64 // requests, held ns
	intervals int
}

type stageKey struct{ conn, opcode uint32 }

// OpenStages opens the trace, then the functions' probes sharing its
// map of holds.
func OpenStages(cfg Config, req ktrace.RequestConfig) (_ *StageSource, err error) {
	if cfg.USDT {
		return nil, fmt.Errorf("--stages times functions within the daemon's requests, and a USDT probe marks a point: leave out --usdt")
	}
	req.Stages, req.Holds = true, true
	trace, err := ktrace.OpenRequests(req)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			trace.Close()
		}
	}()
	if cfg.bin, err = OpenBinary(cfg.Binary); err != nil {
		return nil, err
	}
	if cfg.bin.IsGo { // held by goroutine before any call is probed
		pids, err := runningBinary(cfg)
		if err != nil {
			return nil, err
		}
		for _, pid := range pids {
			if err := trace.HoldByGoroutine(pid); err != nil {
				return nil, err
			}
		}
	}
	cfg.Latency, cfg.holds = true, trace.Holds()
	fn, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	// The requests held until the probes were attached are left out
	// (base), read at once after: attaching takes a while, and the calls
	// count from its end.
	base, err := trace.Snapshot()
	if err != nil {
		fn.Close()
		return nil, err
	}
	ss := &StageSource{RequestSource: trace, fn: fn, pid: cfg.PID, base: map[stageKey][2]uint64{}}
	for i := range base.Profile.Ops {
		op := &base.Profile.Ops[i]
		if h := op.Stage(profile.StageDaemon); h != nil {
			ss.base[stageKey{op.Conn, op.Opcode}] = [2]uint64{h.Count, h.Sum}
		}
	}
	return ss, nil
}

// runningBinary is -p's process, or else the daemons (the holders of
// /dev/fuse) running the binary.
func runningBinary(cfg Config) ([]int, error) {
	if cfg.PID > 0 {
		return []int{cfg.PID}, nil
	}
	bin, err := os.Stat(cfg.Binary)
	if err != nil {
		return nil, err
	}
	holders, err := fuseconn.Holders()
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, h := range holders {
		exe, err := os.Stat("/proc/" + strconv.Itoa(h.PID) + "/exe")
		if err == nil && os.SameFile(exe, bin) {
			pids = append(pids, h.PID)
		}
	}
	return pids, nil
}

// Functions says what was attached.
func (s *StageSource) Functions() profile.KernelFunctions { return s.fn.Functions() }

// The functions are read before the trace, each time: a call counted has
// replied, so its request has ended and is in the trace's figures read
// after it (a handler replies before it returns), and no function's time
// within the holds can exceed the holds' own.

// Snapshot is the run so far.
func (s *StageSource) Snapshot() (*profile.Record, error) {
	fr, err := s.fn.Snapshot()
	if err != nil {
		return nil, err
	}
	rec, err := s.RequestSource.Snapshot()
	if err != nil {
		return nil, err
	}
	rec.DaemonFunctions = s.join(rec, fr.DaemonFunctions, true)
	return rec, nil
}

// Finish is the whole run, read at its end.
func (s *StageSource) Finish(exit *session.Exit) (*profile.Record, error) {
	fr, err := s.fn.Snapshot()
	if err != nil {
		return nil, err
	}
	rec, err := s.RequestSource.Finish(exit)
	if err != nil {
		return nil, err
	}
	rec.DaemonFunctions = s.join(rec, fr.DaemonFunctions, true)
	return rec, nil
}

// Interval is the interval since the previous one, and the whole run.
func (s *StageSource) Interval(final bool) (interval, whole *profile.Record, err error) {
	fi, fw, err := s.fn.Interval(final)
	if err != nil {
		return nil, nil, err
	}
	interval, whole, err = s.RequestSource.Interval(final)
	if err != nil {
		return nil, nil, err
	}
	s.intervals++
	interval.DaemonFunctions = s.join(interval, fi.DaemonFunctions, s.intervals == 1)
	whole.DaemonFunctions = s.join(whole, fw.DaemonFunctions, true)
	return interval, whole, nil
}

// join completes the daemon stage by function with the trace's daemon
// stage of the same window: each row's requests and held time, and a row
// for each opcode the daemon's connections served whose holds no
// function's call fell in (all of it unaccounted for).
func (s *StageSource) join(rec *profile.Record, fn *profile.KernelFunctions, fromStart bool) *profile.KernelFunctions {
	out := *fn
	type key struct{ conn, opcode uint32 }
	rows := map[key]int{}
	out.DaemonStage = []profile.StageFunctions{}
	conns := map[uint32]bool{}
	for _, r := range fn.DaemonStage {
		r.Functions = append([]profile.StageFunction(nil), r.Functions...)
		rows[key{r.Conn, r.Opcode}] = len(out.DaemonStage)
		out.DaemonStage = append(out.DaemonStage, r)
		conns[r.Conn] = true
	}
	for _, m := range rec.Meta.Mounts {
		for _, d := range m.Daemons {
			if s.pid > 0 && d.PID == s.pid {
				conns[m.Conn] = true
			}
		}
	}
	for i := range rec.Profile.Ops {
		op := &rec.Profile.Ops[i]
		h := op.Stage(profile.StageDaemon)
		if h == nil || !conns[op.Conn] {
			continue
		}
		j, ok := rows[key{op.Conn, op.Opcode}]
		if !ok {
			j = len(out.DaemonStage)
			out.DaemonStage = append(out.DaemonStage, profile.StageFunctions{Conn: op.Conn, Op: op.Op, Opcode: op.Opcode, Functions: []profile.StageFunction{}})
		}
		r := &out.DaemonStage[j]
		r.Op, r.Requests, r.HeldNs = op.Op, h.Count, h.Sum
		if b := s.base[stageKey{op.Conn, op.Opcode}]; fromStart {
			r.Requests -= min(r.Requests, b[0])
			r.HeldNs -= min(r.HeldNs, b[1])
		}
	}
	out.SortStage()
	return &out
}

// Close detaches the functions' probes, then the trace's.
func (s *StageSource) Close() error {
	err := s.fn.Close()
	if e := s.RequestSource.Close(); err == nil {
		err = e
	}
	return err
}
