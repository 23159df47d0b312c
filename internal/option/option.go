// Package option words a source's settings in its errors the way each
// front end spells them: the command line as flags (--files), a bench file
// as its YAML keys (calls:). A source names a setting by its key in braces,
// "{files} needs the raw tracepoints with BTF: leave out {attach}
// tracepoint", and never by a front end's spelling.
package option

import (
	"errors"
	"fmt"
	"strings"
)

// Error is a setting refused, in one sentence whose settings are {key}s.
type Error struct {
	text string
	err  error // wrapped (%w), if any
}

// Errorf is fmt.Errorf for a sentence naming settings as {key}; %w wraps.
func Errorf(format string, args ...any) *Error {
	wrapped := fmt.Errorf(format, args...)
	return &Error{text: wrapped.Error(), err: errors.Unwrap(wrapped)}
}

// Words is the sentence with each {key} spelt by name.
func (e *Error) Words(name func(key string) string) string {
	var b strings.Builder
	s := e.text
	for {
		open := strings.IndexByte(s, '{')
		end := strings.IndexByte(s[open+1:], '}')
		if open < 0 || end < 0 {
			b.WriteString(s)
			return b.String()
		}
		key := s[open+1 : open+1+end]
		b.WriteString(s[:open])
		if validKey(key) {
			b.WriteString(name(key))
		} else {
			b.WriteString(s[open : open+2+end])
		}
		s = s[open+2+end:]
	}
}

// validKey: a setting's key is lower case, digits and dashes, so that a
// brace from elsewhere in the text (a path, a value) is left as it is.
func validKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// Setting is the setting the sentence refuses: its first {key}, "" if it
// names none.
func (e *Error) Setting() string {
	s := e.text
	for {
		open := strings.IndexByte(s, '{')
		if open < 0 {
			return ""
		}
		end := strings.IndexByte(s[open+1:], '}')
		if end < 0 {
			return ""
		}
		if key := s[open+1 : open+1+end]; validKey(key) {
			return key
		}
		s = s[open+1:]
	}
}

// Error is the command line's wording, the front end most errors reach.
func (e *Error) Error() string { return e.Words(Flag) }

func (e *Error) Unwrap() error { return e.err }

// Flag spells a key as a command-line flag: "-p" for pid, else --key.
func Flag(key string) string {
	if key == "pid" {
		return "-p"
	}
	return "--" + key
}

// Reword is err's text with the settings of the Error inside it (wrapped
// or not) spelt by name instead of as flags; err.Error() if it holds none.
func Reword(err error, name func(key string) string) string {
	var e *Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	return strings.Replace(err.Error(), e.Error(), e.Words(name), 1)
}
