package strace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// Lines longer than the reader's buffer are kept whole up to headKeep
// bytes; past that, the rest of the string argument they are in is
// dropped (strace -s 5000000 of a 4 MiB write prints its data in one
// quoted string), so a line of any length parses in bounded memory: the
// call, its first bytes of data, and what follows the string (the count,
// the result, the duration). A line with more than maxKept bytes outside
// strings is skipped as malformed.
const (
	lineBuffer = 1 << 20
	headKeep   = 64 << 10
	maxKept    = 4 << 20
)

// lineReader reads a log's lines without a length limit.
type lineReader struct {
	r    *bufio.Reader
	long []byte // a long line as kept
	err  error
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, lineBuffer)}
}

// reset reads r from now on, with the same buffers: an strace -ff set of
// thousands of small files would otherwise allocate (and zero) a buffer
// per file, which took a third of the time of a Go build's set.
func (l *lineReader) reset(r io.Reader) {
	l.r.Reset(r)
	l.long, l.err = l.long[:0], nil
}

// errLineTooLong marks a line skipped for its length outside strings.
var errLineTooLong = errors.New("line too long")

// next returns the next line, without its newline (or \r\n), and
// errLineTooLong for a line kept in part; false at the end of the input
// or on a read error (Err).
func (l *lineReader) next() (string, error, bool) {
	b, err := l.r.ReadSlice('\n')
	if err == nil || (err == io.EOF && len(b) > 0) {
		return string(trimEOL(b)), nil, true
	}
	if err == io.EOF {
		return "", nil, false
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		l.err = err
		return "", nil, false
	}
	// A long line: kept as it comes, its long strings cut.
	k := keeper{out: l.long[:0]}
	for {
		k.add(b)
		if err != bufio.ErrBufferFull {
			break
		}
		b, err = l.r.ReadSlice('\n')
		if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
			l.err = err
			return "", nil, false
		}
	}
	l.long = k.out[:0]
	if k.tooLong {
		return string(k.out[:min(len(k.out), 200)]), fmt.Errorf("%w: %d bytes, more than %d outside quoted strings", errLineTooLong, k.seen, maxKept), true
	}
	return string(trimEOL(k.out)), nil, true
}

// Err is the read error that ended the lines, if any.
func (l *lineReader) Err() error { return l.err }

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// keeper keeps a long line's bytes, all of the first headKeep, then only
// those outside quoted strings: a string that goes past headKeep is closed
// where it was cut.
type keeper struct {
	out           []byte
	seen          int
	inString, esc bool
	cutting       bool // inside a string past headKeep: its bytes are dropped
	tooLong       bool
}

func (k *keeper) add(b []byte) {
	k.seen += len(b)
	if !k.inString && !k.cutting && len(k.out)+len(b) <= headKeep {
		// The common start of a long line: taken whole, the quote
		// state followed.
		k.out = append(k.out, b...)
		k.scan(b)
		return
	}
	for _, c := range b {
		keep := !k.cutting
		k.step(c)
		if k.cutting && !k.inString { // the cut string ended here
			k.cutting = false
			keep = true
		} else if k.inString && !k.cutting && !k.esc && len(k.out) >= headKeep {
			k.cutting = true // drop the rest of this string, from a whole character on
		}
		if !keep || k.tooLong {
			continue
		}
		if len(k.out) >= maxKept {
			k.tooLong = true
			continue
		}
		k.out = append(k.out, c)
	}
}

func (k *keeper) scan(b []byte) {
	for _, c := range b {
		k.step(c)
	}
}

// step follows strace's quoting: "..." with backslash escapes.
func (k *keeper) step(c byte) {
	switch {
	case k.esc:
		k.esc = false
	case k.inString && c == '\\':
		k.esc = true
	case c == '"':
		k.inString = !k.inString
	}
}
