package strace

import (
	"strconv"
	"strings"
)

// strace without -o writes the trace to its standard error, and two things
// then differ from a log written with -o:
//
//   - strace's own messages ("strace: Process 1234 attached") share the
//     stream, and one may cut a call's line in two: "clone(...strace: Process
//     1234 attached" then ", child_tidptr=...) = 1234 <0.000235>" or
//     " <unfinished ...>" on the next line.
//   - The "[pid N]" column is printed only while more than one tracee is
//     alive: the first process's lines before its first fork have none, nor
//     have the lines of whichever tracee is left alone later.
//
// The parser joins cut lines, and gives a line without a PID column the PID
// of the one tracee alive. The first process's PID is not printed until it
// has a sibling; its earlier events are held back (up to maxHeld) until a
// "[pid N]" line shows which tracee it is, then released under that PID.

// maxHeld bounds the events held back while the first process's PID is
// unknown. A log that never forks is released as PID 0 after it.
const maxHeld = 1 << 16

// tracees follows which tracees are alive in a log without -o.
type tracees struct {
	live     map[int]bool // tracees seen and not yet exited
	children map[int]bool // while root is unknown: tracees made by another, never the first process
	root     int          // the first process, once a "[pid N]" line or strace -p's attach message named it
	anon     bool         // lines without a PID column came while root was unknown
	gaveUp   bool         // more than maxHeld events waited for root: released as PID 0
	held     []Event      // events waiting for root, in log order
}

func newTracees() tracees {
	return tracees{live: map[int]bool{}, children: map[int]bool{}}
}

// mayBeMessage is straceMessage's quick test: most lines end with a call's
// duration (">"), a message with "attached", "detached" or "threads".
func mayBeMessage(line string) bool {
	n := len(line)
	return n > 0 && (line[n-1] == 'd' || line[n-1] == 's' || line[n-1] == '\r')
}

// straceMessage finds strace's own message at the end of a line: where it
// starts, the PID it names and whether it attached (else detached). Only
// the whole end of the line counts, so a call whose quoted argument holds
// such text is not mistaken for one.
func straceMessage(line string) (at, pid int, attached, ok bool) {
	at = strings.LastIndex(line, "strace: Process ")
	if at < 0 {
		return 0, 0, false, false
	}
	rest := line[at+len("strace: Process "):]
	sp := strings.IndexByte(rest, ' ')
	if sp <= 0 || !allDigits(rest[:sp]) {
		return 0, 0, false, false
	}
	pid, err := strconv.Atoi(rest[:sp])
	if err != nil {
		return 0, 0, false, false
	}
	switch what := strings.TrimSuffix(rest[sp+1:], "\r"); {
	case what == "attached", strings.HasPrefix(what, "attached with ") && strings.HasSuffix(what, " threads"):
		return at, pid, true, true
	case what == "detached":
		return at, pid, false, true
	}
	return 0, 0, false, false
}

// noteMessage follows an attach or detach message.
func (t *tracees) noteMessage(pid int, attached bool) {
	if !attached {
		delete(t.live, pid)
		return
	}
	t.live[pid] = true
	if t.root == 0 && !t.anon {
		// Before any line of a process: strace -p names the process itself.
		t.root = pid
		return
	}
	// After the first process's lines began: a tracee it made (-f).
	if t.root == 0 {
		t.children[pid] = true
	}
}

// unprefixedPID is the PID of a line without a PID column: the first
// process's while its PID is unknown (0; it is alive, or its exit would
// have named it), else the one tracee alive, else the first process.
func (t *tracees) unprefixedPID() int {
	if t.root == 0 {
		return 0
	}
	if len(t.live) == 1 {
		for pid := range t.live {
			return pid
		}
	}
	return t.root
}

// sawPID follows a line with a PID column in a log of strace's terminal
// output (a log written with -o has a PID on every line); rest is the line
// after it. If
// the first process's PID is unknown and this line can only be its, it
// becomes known.
func (p *Parser) sawPID(pid int, rest string) {
	t := &p.tracees
	t.live[pid] = true
	if t.root != 0 || t.children[pid] {
		return
	}
	if start, ok := p.pending[0]; ok {
		// The first process has a call in flight. Only it can resume that
		// call; a thread cannot start a call while one is in flight, so a
		// tracee that starts one is new (strace -q prints no attach message).
		if name, ok := strings.CutPrefix(rest, "<... "); ok {
			if strings.HasPrefix(name, start.Name+" resumed>") && p.pending[pid] == nil {
				p.revealRoot(pid)
			}
		} else if !strings.HasPrefix(rest, "--- ") && !strings.HasPrefix(rest, "+++ ") {
			t.children[pid] = true
		}
		return
	}
	p.revealRoot(pid)
}

// revealRoot gives the first process's events so far, and its call in
// flight, their PID.
func (p *Parser) revealRoot(pid int) {
	t := &p.tracees
	t.root, t.children = pid, nil // no longer asked: memory stays flat however many processes follow
	if e, ok := p.pending[0]; ok {
		delete(p.pending, 0)
		e.PID = pid
		p.pending[pid] = e
	}
	for i := range t.held {
		if t.held[i].PID == 0 {
			t.held[i].PID = pid
		}
	}
}

// terminal says whether the log is strace's terminal output: a line
// without a PID column, or a message of strace's, came first.
func (t *tracees) terminal() bool { return t.anon || t.root != 0 }

// track follows what an event says of the tracees alive.
func (t *tracees) track(e *Event) {
	switch e.Kind {
	case Exit, Killed:
		delete(t.live, e.PID)
	case Syscall:
		if c := e.Child(); c > 0 {
			t.live[c] = true
			if t.root == 0 {
				t.children[c] = true
			}
		}
	}
}

// holding says whether events must wait for the first process's PID.
func (t *tracees) holding() bool { return t.anon && t.root == 0 && !t.gaveUp }

// emitOrHold sends e on, or holds it back while the first process's PID is
// unknown.
func (p *Parser) emitOrHold(e *Event, emit func(*Event)) {
	t := &p.tracees
	if t.holding() {
		t.held = append(t.held, *e)
		if len(t.held) >= maxHeld {
			t.gaveUp = true
			p.releaseHeld(emit)
		}
		return
	}
	p.releaseHeld(emit)
	emit(e)
}

// releaseHeld sends the held events on, in log order.
func (p *Parser) releaseHeld(emit func(*Event)) {
	t := &p.tracees
	for i := range t.held {
		emit(&t.held[i])
	}
	t.held = nil
}
