package labfs

import (
	"fmt"
	"regexp"
	"strings"
)

// An OptionError is a problem with the lab fs's options. It names each
// option by its name in Config's flag tags (latency, keep-cache) and never
// as a front end spells it: fs mount words them as --latency (Word), a
// front end with other names for them as its own.
type OptionError struct {
	// Option is the option at fault.
	Option string
	// Problem is the rest of the sentence; another option it names is in
	// braces: "and {direct-io} contradict each other: choose one".
	Problem string
}

// optionErr is an *OptionError whose problem is format's.
func optionErr(option, format string, args ...any) error {
	return &OptionError{Option: option, Problem: fmt.Sprintf(format, args...)}
}

// braced is an option named in a problem.
var braced = regexp.MustCompile(`\{([a-z0-9-]+)\}`)

// Word is the error as one sentence, each option written by name.
func (e *OptionError) Word(name func(option string) string) string {
	problem := braced.ReplaceAllStringFunc(e.Problem, func(m string) string { return name(m[1 : len(m)-1]) })
	sep := " "
	if strings.HasPrefix(problem, ":") {
		sep = ""
	}
	return name(e.Option) + sep + problem
}

// Error words the options by their bare names; front ends use Word.
func (e *OptionError) Error() string { return e.Word(func(o string) string { return o }) }
