// Package strace reads strace's logs: a streaming parser (Parser) that
// joins unfinished and resumed calls per thread, the files it reads (-o
// logs, -ff sets, compressed, standard input), the naming of fds as
// strace -y prints them (followed through the calls where a log has no
// -y; FDTable, which the live source keeps too), and Event, the one event
// both sources hand the analyzers (systrace), with what a call's name
// means (Call: its category, whether it opens, reads, waits...).
package strace

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"

	"github.com/fusescope/fusescope/internal/profile"
)

// Kind says what a line of an strace log describes.
type Kind int

// The kinds of events.
const (
	Syscall Kind = iota // a completed call (or one joined from unfinished + resumed)
	Signal              // --- SIGCHLD {...} ---
	Exit                // +++ exited with 0 +++
	Killed              // +++ killed by SIGKILL +++
	Sample              // live source: Calls calls of category Name, Dur in total, in the timeline bin holding Time
	// PeerIO, live source: the second fd (Target) of Calls transfer calls
	// named Name (splice, tee, sendfile, copy_file_range), counted apart
	// from the calls themselves, which come as Syscall events on the
	// first fd. Only the files table counts them.
	PeerIO
	// Failed, live source: Calls calls of system call Name that failed
	// with Errno, counted in the kernel; the calls themselves came as
	// Syscall events. Only the errno table counts them.
	Failed
)

// Unattributed is the PID of counted calls that belong to no one process:
// the live source's threads beyond its per-thread counters, counted
// together. They count everywhere but in the process tree.
const Unattributed = -1

// Event is one parsed line (or a joined unfinished/resumed pair).
type Event struct {
	Line   int     // line number of the line that completed it
	PID    int     // 0 when the log has no PID column (strace without -f); a thread id in strace -f logs
	TGID   int     // the process PID's thread belongs to, when the source knows it (live); 0 in logs
	Time   float64 // seconds: of the day (-tt) or since the epoch (-ttt); 0 without -t
	Kind   Kind
	Name   string  // syscall name, or signal name
	Args   string  // the raw argument text
	Ret    string  // return value as printed: "3", "-1", "0x7f..", "?"
	Errno  string  // ENOENT, or "" on success
	Dur    float64 // seconds, from -T; -1 when absent
	Status int     // exit status (Exit)

	// Aggregates, from the live source: the event stands for Calls calls
	// (0 means one) of which Errors failed and which moved Bytes bytes;
	// Dur is their total. Time is 0 when they span the whole trace.
	Calls  int
	Errors int
	Bytes  int64
	// Live source: Argv of an execve (the arguments the kernel laid out);
	// UserS and SysS of an Exit (the thread's CPU time); Path, the path a
	// lookup was given, made absolute (a log's is read from Args).
	Argv        []string
	UserS, SysS float64
	Path        string

	polled     string // poll, ppoll in a log: the first fd waited on, named (fdNamer)
	target     string // memo of Target
	targetDone bool
	peer       string // memo of Peer
	peerDone   bool
	call       *Call // memo of info
}

// info is what the analyzers need to know of the call's name.
func (e *Event) Info() *Call {
	if e.call == nil {
		e.call = LookupCall(e.Name)
	}
	return e.call
}

// Target is what the call's file descriptor refers to, as strace -y prints
// it: the returned fd's for open calls, the first argument's otherwise; ""
// when the log has no -y or the call has no fd.
func (e *Event) Target() string {
	if !e.targetDone {
		if e.Info().Open {
			e.target = fdTarget(e.Ret)
		} else if startsWithFDTarget(e.Args) {
			e.target = fdTarget(FirstArg(e.Args))
		}
		e.targetDone = true
	}
	return e.target
}

// startsWithFDTarget reports whether args can begin with an fd target
// ("3</etc/passwd>", digits then '<'): most calls' first argument is no
// fd (nanosleep, rt_sigaction), or an fd without one (a log without -y),
// and is not worth firstArg's scan of the quoting and brackets.
func startsWithFDTarget(args string) bool {
	s := strings.TrimLeftFunc(args, unicode.IsSpace) // as fdTarget's TrimSpace
	d := 0
	for d < len(s) && s[d] >= '0' && s[d] <= '9' {
		d++
	}
	return d > 0 && d < len(s) && s[d] == '<'
}

// fileTarget is what the call's time counts for: its fd's target, or for
// a poll in a log the first fd it waited on (the live source names that in
// the target).
func (e *Event) FileTarget() string {
	if t := e.Target(); t != "" {
		return t
	}
	return e.polled
}

// SetTarget names what the call's fd refers to, for sources that know it
// without strace -y text.
func (e *Event) SetTarget(t string) { e.target, e.targetDone = t, true }

// Peer is what a transfer call's second fd refers to (splice's fd_out,
// sendfile's in_fd), as Target names the first; "" for other calls.
func (e *Event) Peer() string {
	if !e.peerDone {
		if i := e.Info().PeerArg; i > 0 && e.Kind == Syscall {
			e.peer = fdTarget(leadingArgs(e.Args, i)[i-1])
		}
		e.peerDone = true
	}
	return e.peer
}

// SetPeer names a transfer call's second fd, as SetTarget the first.
func (e *Event) SetPeer(t string) { e.peer, e.peerDone = t, true }

// N is how many calls the event stands for.
func (e *Event) N() int {
	if e.Calls > 0 {
		return e.Calls
	}
	return 1
}

// failures is how many of the event's calls failed.
func (e *Event) Failures() int {
	if e.Calls > 0 {
		return e.Errors
	}
	if e.Errno != "" {
		return 1
	}
	return 0
}

// moved is the bytes the event's calls returned: the aggregate's, or one
// call's non-negative return value.
func (e *Event) Moved() int64 {
	if e.Calls > 0 {
		return e.Bytes
	}
	if n, ok := e.RetInt(); ok && n > 0 {
		return n
	}
	return 0
}

// RetInt is the return value as a number; ok is false for "?" and pointers.
func (e *Event) RetInt() (int64, bool) {
	r := e.Ret
	if i := strings.IndexByte(r, '<'); i >= 0 { // 3</path> with -y
		r = r[:i]
	}
	v, err := strconv.ParseInt(r, 0, 64)
	return v, err == nil
}

// Child is the id of the process or thread a clone, clone3, fork or vfork
// made, from its return value; 0 for a call that made none.
func (e *Event) Child() int {
	if e.Kind != Syscall || !e.Info().Spawn {
		return 0
	}
	if id, ok := e.RetInt(); ok && id > 0 {
		return int(id)
	}
	return 0
}

// Parser reads strace logs line by line, joining "<unfinished ...>" lines
// with their "<... resumed>" per thread. It keeps only the unfinished calls
// in memory, so memory stays flat whatever the log's size.
type Parser struct {
	pending map[int]*Event // unfinished calls by PID
	scratch Event          // reused for lines that complete at once
	// DefaultPID is the PID of lines without one: strace -ff writes each
	// process to LOG.PID without a PID column.
	DefaultPID int
	File       string // the log being read, for Malformed

	Malformed []profile.Malformed // the first MaxMalformed
	Bad       int                 // all malformed lines
	Lost      int                 // unfinished calls whose resumed line never came
	Summary   int                 // lines of an strace -c/-C summary table, skipped
	Frames    int                 // strace -k stack frame lines (" > /lib/...(fn+0x1f) [0x...]"), skipped
	Notices   int                 // strace's own messages ("strace: Process 1234 attached"), skipped
	Lines     int                 // in all the logs read
	Parsed    int                 // events read, before any filter
	// FollowedFDs: the logs had no strace -y targets, and Logs named the
	// fds by following the calls that made them.
	FollowedFDs bool
	relClock    float64 // -r: the sum of the deltas so far
	tracees     tracees // strace writing to a terminal (terminal.go)
	anonLine    bool    // the line parsed last had no PID column, and no PID is known for it
	cut         string  // the start of a call line that a message of strace's cut
	cutLine     int
	lines       *lineReader // kept from file to file
}

// MaxMalformed bounds how many malformed lines are kept for reporting.
const MaxMalformed = 100

// NewParser returns a parser.
func NewParser() *Parser { return &Parser{pending: map[int]*Event{}} }

// Parse reads r and calls emit for every event, in log order; events carry
// their line number in r. The event is only valid during the call: copy
// what must outlive it.
func (p *Parser) Parse(r io.Reader, emit func(*Event)) error {
	p.tracees, p.cut = newTracees(), ""
	if p.lines == nil {
		p.lines = newLineReader(r)
	} else {
		p.lines.reset(r)
	}
	lines := p.lines
	defer lines.reset(nil) // the reader is the caller's to close
	inSummary := false
	line := 0
	for {
		text, lineErr, ok := lines.next()
		if !ok {
			break
		}
		line++
		p.Lines++
		if lineErr != nil {
			p.malformed(line, text, lineErr)
			continue
		}
		// strace -C and -c append a summary table: not events, not errors.
		if inSummary || strings.HasPrefix(text, "% time ") {
			inSummary = !strings.HasSuffix(strings.TrimSpace(text), " total")
			p.Summary++
			continue
		}
		// strace -k follows each call with its stack, a frame a line.
		if strings.HasPrefix(text, " > ") {
			p.Frames++
			continue
		}
		// strace's own messages, when it writes to a terminal; one may cut
		// a call's line, which the next line ends.
		if mayBeMessage(text) {
			if at, pid, attached, ok := straceMessage(text); ok {
				p.Notices++
				p.tracees.noteMessage(pid, attached)
				if at > 0 && p.cut == "" {
					p.cut, p.cutLine = text[:at], line
				}
				continue
			}
		}
		// Its other messages take whole lines ("strace: Exit of unknown pid
		// 1234 ignored", "[ Process PID=1234 runs in 32 bit mode. ]").
		if strings.HasPrefix(text, "strace: ") || strings.HasPrefix(text, "[ Process PID=") {
			p.Notices++
			continue
		}
		n := line
		if p.cut != "" {
			text, n, p.cut = p.cut+text, p.cutLine, ""
		}
		if ev, err := p.ParseLine(n, text); err != nil {
			p.malformed(n, text, err)
		} else if ev != nil {
			p.Parsed++
			if t := &p.tracees; t.terminal() {
				t.track(ev)
				p.emitOrHold(ev, emit)
			} else {
				emit(ev)
			}
		}
	}
	if p.cut != "" {
		p.malformed(p.cutLine, p.cut, fmt.Errorf("cut by a message of strace's and never ended"))
		p.cut = ""
	}
	p.releaseHeld(emit)
	return lines.Err()
}

// malformed counts a line the parser could not read, and keeps the first.
func (p *Parser) malformed(n int, text string, err error) {
	p.Bad++
	if len(p.Malformed) < MaxMalformed {
		if len(text) > 200 {
			text = text[:200] + "..."
		}
		p.Malformed = append(p.Malformed, profile.Malformed{File: p.File, Line: n, Text: text, Why: err.Error()})
	}
}

// pidWithComm reads strace -Y's PID column, "1234<cat> ...": the PID, and
// the rest of the line after the command's closing "> ".
func pidWithComm(s string) (int, string, bool) {
	d := 0
	for d < len(s) && s[d] >= '0' && s[d] <= '9' {
		d++
	}
	if d == 0 || d >= len(s) || s[d] != '<' {
		return 0, "", false
	}
	end := strings.Index(s[d:], "> ")
	if end < 0 {
		return 0, "", false
	}
	pid, err := strconv.Atoi(s[:d])
	if err != nil {
		return 0, "", false
	}
	return pid, s[d+end+2:], true
}

// Unfinished returns the calls still waiting for their "resumed" line (the
// process was killed, or the log was cut).
func (p *Parser) Unfinished() []*Event {
	out := make([]*Event, 0, len(p.pending))
	for _, e := range p.pending {
		out = append(out, e)
	}
	return out
}

// ParseLine parses one line; it returns nil, nil for a line that completes
// nothing yet (an unfinished call) or carries nothing (blank).
func (p *Parser) ParseLine(n int, line string) (*Event, error) {
	p.anonLine = false
	ev, err := p.parseLine(n, line)
	if err == nil && p.anonLine {
		// A line of the first process, whose PID strace has not shown yet.
		p.tracees.anon = true
	}
	return ev, err
}

func (p *Parser) parseLine(n int, line string) (*Event, error) {
	s := strings.TrimSuffix(line, "\r")
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	// Analyzers copy what they keep, so a line that completes at once is
	// parsed into a reused Event; only unfinished calls get their own.
	p.scratch = Event{Line: n, Dur: -1, PID: p.DefaultPID}
	ev := &p.scratch
	prefixed := true
	// PID prefix: "[pid  1234] " (strace -f to a terminal) or "1234 " (-o, -ff merged).
	if strings.HasPrefix(s, "[pid") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return nil, fmt.Errorf("unterminated [pid ...] prefix")
		}
		field := strings.TrimSpace(s[4:end])
		if lt := strings.IndexByte(field, '<'); lt > 0 && strings.HasSuffix(field, ">") {
			field = field[:lt] // strace -Y: "[pid  1234<cat>]"
		}
		pid, err := strconv.Atoi(field)
		if err == nil && pid < 0 {
			err = fmt.Errorf("negative")
		}
		if err != nil {
			return nil, fmt.Errorf("bad pid %q", s[4:end])
		}
		ev.PID, s = pid, strings.TrimLeft(s[end+1:], " ")
	} else if i := digitsThenSpace(s); i > 0 {
		// A first field of digits alone is a PID (strace -f -o, -ff merged):
		// no syscall name or timestamp is all digits.
		pid, err := strconv.Atoi(s[:i])
		if err != nil {
			return nil, fmt.Errorf("bad pid %q", s[:i])
		}
		ev.PID, s = pid, strings.TrimLeft(s[i+1:], " ")
	} else if pid, rest, ok := pidWithComm(s); ok {
		ev.PID, s = pid, strings.TrimLeft(rest, " ")
	} else {
		prefixed = false
	}
	// Timestamp: 10:20:30.123456 (-tt), 10:20:30 (-t), 1700000000.123456
	// (-ttt), or the time since the previous call's entry, right-aligned
	// (-r); with both, -r's "(+ 0.000143)" follows the absolute time.
	s = strings.TrimLeft(s, " ")
	if !startsWithDigit(s) {
		// No timestamp: most lines of an -ff set (strace -s 0 -ff).
	} else if i := strings.IndexByte(s, ' '); i > 0 && looksLikeTime(s) {
		stamp := s[:i]
		t, err := parseTime(stamp)
		if err != nil {
			return nil, err
		}
		s = strings.TrimLeft(s[i+1:], " ")
		if !strings.ContainsRune(stamp, ':') && t < relativeTimeBelow {
			p.relClock += t // -r alone: the log's own running clock
			t = p.relClock
		}
		ev.Time = t
		if rest, ok := strings.CutPrefix(s, "(+"); ok {
			if end := strings.IndexByte(rest, ')'); end >= 0 {
				s = strings.TrimLeft(rest[end+1:], " ")
			}
		}
	}
	// The system call's number (-n, "[  59]") and the instruction pointer
	// (-i, "[00007f1783010ad7]"): not needed.
	for strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 || !isBracketedNumber(s[1:end]) {
			break
		}
		s = strings.TrimLeft(s[end+1:], " ")
	}
	if p.DefaultPID == 0 {
		if prefixed {
			if p.tracees.terminal() {
				p.sawPID(ev.PID, s)
			}
		} else {
			ev.PID = p.tracees.unprefixedPID()
			p.anonLine = ev.PID == 0
		}
	}
	switch {
	case strings.HasPrefix(s, "--- "):
		ev.Kind = Signal
		body := strings.TrimSuffix(strings.TrimPrefix(s, "--- "), " ---")
		ev.Name, ev.Args, _ = strings.Cut(body, " ")
		return ev, nil
	case strings.HasPrefix(s, "+++ "):
		body := strings.TrimSuffix(strings.TrimPrefix(s, "+++ "), " +++")
		if rest, ok := strings.CutPrefix(body, "exited with "); ok {
			ev.Kind = Exit
			st, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil {
				return nil, fmt.Errorf("bad exit status %q", rest)
			}
			ev.Status = st
			return ev, nil
		}
		if rest, ok := strings.CutPrefix(body, "killed by "); ok {
			ev.Kind = Killed
			ev.Name = strings.Fields(rest + " ")[0]
			return ev, nil
		}
		return nil, fmt.Errorf("unknown +++ line")
	case strings.HasPrefix(s, "<... "):
		// <... read resumed>"...", 4096) = 1024 <0.000010>
		end := strings.Index(s, " resumed>")
		if end < 5 {
			return nil, fmt.Errorf("resumed line without a call name and \"resumed>\"")
		}
		name := s[5:end]
		start, ok := p.pending[ev.PID]
		if !ok || start.Name != name {
			return nil, fmt.Errorf("%s resumed without its unfinished start", name)
		}
		delete(p.pending, ev.PID)
		start.Line = n
		args, ret, err := splitCall(s[end+len(" resumed>"):])
		if err != nil {
			return nil, err
		}
		start.Args += args
		if err := start.setResult(ret); err != nil {
			return nil, err
		}
		return start, nil
	}
	// name(args) = ret [ERRNO (desc)] [<dur>]
	open := strings.IndexByte(s, '(')
	if open <= 0 || !isIdent(s[:open]) {
		return nil, fmt.Errorf("not a system call line")
	}
	ev.Kind, ev.Name = Syscall, s[:open]
	rest := s[open+1:]
	// " <detached ...>": strace let the process go (Ctrl-C on -p) while
	// the call was in flight; like an unfinished call, it never ends here.
	if body, ok := cutInFlight(rest); ok {
		ev.Args = body
		if _, busy := p.pending[ev.PID]; busy {
			// A thread cannot have two calls in flight: the earlier one's
			// resumed line was lost.
			p.Lost++
		}
		own := *ev
		p.pending[ev.PID] = &own
		return nil, nil
	}
	args, ret, err := splitCall(rest)
	if err != nil {
		return nil, err
	}
	ev.Args = args
	if err := ev.setResult(ret); err != nil {
		return nil, err
	}
	return ev, nil
}

// cutInFlight cuts the mark of a call still in flight off its line.
func cutInFlight(rest string) (string, bool) {
	if body, ok := strings.CutSuffix(rest, " <unfinished ...>"); ok {
		return body, true
	}
	return strings.CutSuffix(rest, " <detached ...>")
}

// splitCall splits 'args) = ret...' at the ')' that closes the call. The
// fast path takes the last ") = " (with strace's padding between ')' and
// '=') when what follows reads as a return value
// (a quoted argument may contain ") = ", the return value may not, except in
// an fd's path, which the check catches); otherwise it scans, skipping quoted
// strings and nested brackets.
func splitCall(s string) (args, result string, err error) {
	// strace pads a short call's result to a column ("close(3)      = 0"),
	// which most lines of a log without -T are.
	if i := lastEquals(s); i >= 0 && looksLikeRet(s[i+3:]) {
		j := i
		for j > 0 && s[j-1] == ' ' {
			j--
		}
		if j > 0 && s[j-1] == ')' {
			return s[:j-1], s[j:], nil
		}
	}
	return scanCall(s)
}

// lastEquals is strings.LastIndex(s, " = "), by a scan from the end: the
// result is a few bytes from it, and LastIndex hashes its way there.
func lastEquals(s string) int {
	for i := len(s) - 2; i > 0; i-- {
		if s[i] == '=' && s[i-1] == ' ' && s[i+1] == ' ' {
			return i - 1
		}
	}
	return -1
}

// looksLikeRet reports whether s starts like a return value: a number, a
// pointer, or "?", followed by the end, a space, or an fd target "<".
func looksLikeRet(s string) bool {
	end := 0
	for end < len(s) && s[end] != ' ' && s[end] != '<' {
		end++
	}
	r := s[:end]
	if r == "?" {
		return true
	}
	r = strings.TrimPrefix(r, "-")
	if strings.HasPrefix(r, "0x") {
		r = r[2:]
		for i := 0; i < len(r); i++ {
			if c := r[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return r != ""
	}
	return allDigits(r)
}

// scanCall is splitCall's careful path.
func scanCall(s string) (args, result string, err error) {
	if i := topLevelIndex(s, ')'); i >= 0 {
		return s[:i], s[i+1:], nil
	}
	return "", "", fmt.Errorf("no closing parenthesis (truncated line?)")
}

// topLevelIndex is the index of the first stop byte outside quoted strings,
// nested brackets and fd annotations, or -1.
func topLevelIndex(s string, stop byte) int { return scanArgs(s, int(stop)) }

// scanArgs walks s outside quoted strings. It returns the index of the first
// stop byte outside brackets and fd annotations, or, for stop < 0, of the
// first fd annotation's '<'; -1 if there is none.
func scanArgs(s string, stop int) int {
	depth, inStr := 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inStr:
			if c == '\\' {
				i++
			} else if c == '"' {
				inStr = false
			}
		case c == '<' && i > 0 && s[i-1] >= '0' && s[i-1] <= '9':
			if stop < 0 {
				return i
			}
			// 3</a (b), "c">: the path may hold any bracket, quote or comma.
			if end := annotationEnd(s, i); end > 0 {
				i = end
			}
		case c == '"':
			inStr = true
		case depth == 0 && int(c) == stop:
			return i
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		}
	}
	return -1
}

// annotationEnd is the index of the '>' that closes the strace -y
// annotation opened at s[open], or -1. strace escapes '>' in paths (\76)
// but not in socket peers (TCP:[1.2.3.4:5->6.7.8.9:10]), so the closing one
// is the '>' that ends the string or is followed by a delimiter.
func annotationEnd(s string, open int) int {
	for i := open + 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '>':
			if i+1 == len(s) || strings.IndexByte(" ,)]}", s[i+1]) >= 0 {
				return i
			}
		}
	}
	return -1
}

// setResult parses ' = ret [ERRNO (desc)] [<dur>]'.
func (e *Event) setResult(s string) error {
	for s != "" && s[0] == ' ' { // strace's padding before " = ", quicker than TrimSpace's
		s = s[1:]
	}
	s = strings.TrimSpace(s)
	if strings.HasSuffix(s, ">") {
		if i := strings.LastIndex(s, " <"); i >= 0 {
			if d, err := strconv.ParseFloat(s[i+2:len(s)-1], 64); err == nil {
				e.Dur, s = d, strings.TrimSpace(s[:i])
			}
		}
	}
	rest, ok := strings.CutPrefix(s, "= ")
	if !ok {
		if s == "=" || s == "= ?" || s == "" {
			e.Ret = "?"
			return nil
		}
		return fmt.Errorf("no \" = \" return value")
	}
	ret, tail, _ := strings.Cut(rest, " ")
	// 3</a b> (strace -y): the fd's path may hold spaces.
	if i := strings.IndexByte(ret, '<'); i > 0 && allDigits(rest[:i]) {
		if end := annotationEnd(rest, i); end > 0 {
			ret, tail = rest[:end+1], rest[end+1:]
		}
	}
	e.Ret = ret
	tail = strings.TrimSpace(tail)
	if tail != "" && tail[0] == 'E' {
		e.Errno, _, _ = strings.Cut(tail, " ")
	}
	return nil
}

func startsWithDigit(s string) bool { return s != "" && s[0] >= '0' && s[0] <= '9' }

// digitsThenSpace is the length of the digits s starts with when a space
// follows them, or 0.
func digitsThenSpace(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i < len(s) && s[i] == ' ' {
		return i
	}
	return 0
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// relativeTimeBelow separates -r's deltas from -ttt's seconds since the
// epoch: no log is from before 1973, and no gap between calls is 3 years.
const relativeTimeBelow = 1e8

func looksLikeTime(s string) bool {
	i := strings.IndexByte(s, ' ')
	if i <= 0 {
		return false
	}
	t := s[:i]
	dot := strings.IndexByte(t, '.')
	if dot < 0 { // -t: 10:20:30
		return strings.Count(t, ":") == 2 && allDigits(strings.ReplaceAll(t, ":", ""))
	}
	if dot == 0 || !allDigits(t[dot+1:]) {
		return false
	}
	for j := 0; j < dot; j++ {
		if c := t[j]; c != ':' && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// isBracketedNumber is true for what -n and -i print between brackets:
// decimal or hexadecimal digits, space-padded ("?" where strace has none).
func isBracketedNumber(s string) bool {
	digits := strings.Trim(s, " ")
	if digits == "" {
		return false
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == '?') {
			return false
		}
	}
	return true
}

func isIdent(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// parseTime reads 10:20:30.123456 or 1700000000.123456 into seconds.
func parseTime(t string) (float64, error) {
	c1 := strings.IndexByte(t, ':')
	if c1 < 0 {
		return strconv.ParseFloat(t, 64)
	}
	c2 := strings.IndexByte(t[c1+1:], ':') + c1 + 1
	if c2 <= c1 {
		return 0, fmt.Errorf("bad time %q", t)
	}
	h, err1 := strconv.Atoi(t[:c1])
	m, err2 := strconv.Atoi(t[c1+1 : c2])
	sec, err3 := strconv.ParseFloat(t[c2+1:], 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, fmt.Errorf("bad time %q", t)
	}
	return float64(h*3600+m*60) + sec, nil
}

// Pending is how many calls are still waiting for their "resumed" line.
func (p *Parser) Pending() int { return len(p.pending) }
