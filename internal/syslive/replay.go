package syslive

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/fusescope/fusescope/internal/sysevent"
)

// recordEnv names a file the live source writes its typed events to, with
// every answer /proc gave the interpretation, as JSON lines: what the
// replay tests (live_test.go) feed to Live without a kernel.
const recordEnv = "FUSESCOPE_RECORD_LIVE_EVENTS"

// replayLine is one line of a recording: an event, or one answer of /proc.
type replayLine struct {
	Event *sysevent.Event `json:"event,omitempty"`
	Proc  *procAnswer     `json:"proc,omitempty"`
}

// procAnswer is one question to Proc and its answer.
type procAnswer struct {
	Op    string `json:"op"` // fd, fds, cwd, hasfd
	PID   int    `json:"pid"`
	FD    int    `json:"fd,omitempty"`
	S     string `json:"s,omitempty"`
	FDs   []int  `json:"fds,omitempty"`
	Err   bool   `json:"err,omitempty"`
	Has   bool   `json:"has,omitempty"`
	Alive bool   `json:"alive,omitempty"`
}

// recorder writes what passes through to a recording.
type recorder struct {
	Proc
	mu  sync.Mutex
	out *bufio.Writer
	f   *os.File
}

func newRecorder(path string, p Proc) (*recorder, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", recordEnv, err)
	}
	return &recorder{Proc: p, f: f, out: bufio.NewWriter(f)}, nil
}

func (r *recorder) write(l replayLine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, _ := json.Marshal(l)
	r.out.Write(append(b, '\n'))
}

func (r *recorder) event(ev *sysevent.Event) { r.write(replayLine{Event: ev}) }

func (r *recorder) close() error {
	r.out.Flush()
	return r.f.Close()
}

func (r *recorder) FD(pid, fd int) (string, error) {
	s, err := r.Proc.FD(pid, fd)
	r.write(replayLine{Proc: &procAnswer{Op: "fd", PID: pid, FD: fd, S: s, Err: err != nil}})
	return s, err
}

func (r *recorder) FDs(pid int) ([]int, error) {
	fds, err := r.Proc.FDs(pid)
	r.write(replayLine{Proc: &procAnswer{Op: "fds", PID: pid, FDs: fds, Err: err != nil}})
	return fds, err
}

func (r *recorder) Cwd(pid int) (string, error) {
	s, err := r.Proc.Cwd(pid)
	r.write(replayLine{Proc: &procAnswer{Op: "cwd", PID: pid, S: s, Err: err != nil}})
	return s, err
}

func (r *recorder) HasFD(pid, fd int) (has, alive bool) {
	has, alive = r.Proc.HasFD(pid, fd)
	r.write(replayLine{Proc: &procAnswer{Op: "hasfd", PID: pid, FD: fd, Has: has, Alive: alive}})
	return has, alive
}

// Replay is a recording read back: its events, in order, and a Proc that
// gives /proc's recorded answers, each question's in the order they were
// given.
type Replay struct {
	Root    int
	Events  []*sysevent.Event
	answers map[[3]any][]*procAnswer
}

// ReadReplay reads a recording.
func ReadReplay(r io.Reader) (*Replay, error) {
	rp := &Replay{answers: map[[3]any][]*procAnswer{}}
	dec := json.NewDecoder(r)
	for {
		var l replayLine
		if err := dec.Decode(&l); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("a recording of live events: %w", err)
		}
		switch {
		case l.Event != nil:
			if l.Event.Kind == sysevent.Start {
				rp.Root = l.Event.Root
			}
			rp.Events = append(rp.Events, l.Event)
		case l.Proc != nil:
			k := [3]any{l.Proc.Op, l.Proc.PID, l.Proc.FD}
			rp.answers[k] = append(rp.answers[k], l.Proc)
		}
	}
	return rp, nil
}

func (rp *Replay) next(op string, pid, fd int) *procAnswer {
	k := [3]any{op, pid, fd}
	q := rp.answers[k]
	if len(q) == 0 {
		return &procAnswer{Err: true} // never asked when recorded
	}
	rp.answers[k] = q[1:]
	return q[0]
}

// FD is the recorded answer.
func (rp *Replay) FD(pid, fd int) (string, error) {
	a := rp.next("fd", pid, fd)
	if a.Err {
		return "", os.ErrNotExist
	}
	return a.S, nil
}

// FDs is the recorded answer.
func (rp *Replay) FDs(pid int) ([]int, error) {
	a := rp.next("fds", pid, 0)
	if a.Err {
		return nil, os.ErrNotExist
	}
	return a.FDs, nil
}

// Cwd is the recorded answer.
func (rp *Replay) Cwd(pid int) (string, error) {
	a := rp.next("cwd", pid, 0)
	if a.Err {
		return "", os.ErrNotExist
	}
	return a.S, nil
}

// HasFD is the recorded answer.
func (rp *Replay) HasFD(pid, fd int) (has, alive bool) {
	a := rp.next("hasfd", pid, fd)
	return a.Has, a.Alive
}
