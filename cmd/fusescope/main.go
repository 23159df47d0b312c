// Command fusescope shows where a FUSE file system spends its time.
package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/fusescope/fusescope/internal/session"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	session.RunGateIfAsked() // a run's -- CMD: the command, held until traced
	root := newRootCmd()
	if err := root.Execute(); err != nil {
		if ce, ok := session.IsExit(err); ok {
			os.Exit(ce.Code) // a traced command's status: the report said it all
		}
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(os.Stderr, "fusescope: "+ee.msg)
			}
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "fusescope: "+err.Error())
		os.Exit(1)
	}
}

// exitError carries an exit status other than 1, or a status with no message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "fusescope",
		Short: "Show where a FUSE file system spends its time",
		Long: `fusescope shows where a FUSE file system spends its time.

  trace     per-opcode request latency and counts, measured in the kernel for any
            FUSE file system with no change to its daemon
  fs        a lab file system in which every FUSE caching and transport mode is a
            switch, with an emulated slow backend and its own histograms
  syscalls  system-call analysis of strace logs, or live with eBPF (-- CMD, -p PID)
  show      render a saved record or syscalls report exactly as the live view did
  diff      compare two records of one kind, B against A (docs/views.md)
  export    serve a running trace's FUSE metrics to Prometheus
  report    one self-contained HTML page of records
  top       a live terminal view of FUSE requests per mount and opcode
  kfunc     count and time calls of kernel functions (fuse_*), as bcc's funccount does
  bench     compare file system configurations with repeated, interleaved runs

Records are versioned JSON (docs/record.md); every view renders them the same.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(flagError)
	root.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		if err := checkEmpty(c); err != nil {
			return err
		}
		return checkExclusive(c)
	}
	root.AddCommand(newTraceCmd(), newShowCmd(), newFSCmd(), newSyscallsCmd(), newBenchCmd(), newDiffCmd(), newExportCmd(), newReportCmd(), newTopCmd(), newKfuncCmd(), newUfuncCmd(), newDoctorCmd())
	for _, c := range allCommands(root) {
		if c.Args != nil {
			c.Args = withUsage(c.Args)
		}
	}
	return root
}

func allCommands(c *cobra.Command) []*cobra.Command {
	all := []*cobra.Command{c}
	for _, sub := range c.Commands() {
		all = append(all, allCommands(sub)...)
	}
	return all
}

// withUsage adds the command's usage line to cobra's argument-count errors,
// which otherwise say only how many arguments were wrong.
func withUsage(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if err := check(c, args); err != nil {
			return fmt.Errorf("%v: usage: %s", err, c.UseLine())
		}
		return nil
	}
}

// exclusiveAnnotation lists, on a command, groups of flags of which at most
// one may be given (comma-separated names, groups separated by ";").
const exclusiveAnnotation = "fusescope_exclusive"

// exclusive marks flags of which at most one may be given. Cobra's own
// MarkFlagsMutuallyExclusive names them by their long names in Go syntax;
// this names them as the user typed them.
func exclusive(c *cobra.Command, names ...string) {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	group := strings.Join(names, ",")
	if old := c.Annotations[exclusiveAnnotation]; old != "" {
		group = old + ";" + group
	}
	c.Annotations[exclusiveAnnotation] = group
}

func checkExclusive(c *cobra.Command) error {
	groups := c.Annotations[exclusiveAnnotation]
	if groups == "" {
		return nil
	}
	for _, group := range strings.Split(groups, ";") {
		var all, set []string
		for _, name := range strings.Split(group, ",") {
			f := c.Flags().Lookup(name)
			shown := "--" + f.Name
			if f.Shorthand != "" {
				shown = "-" + f.Shorthand
			}
			all = append(all, shown)
			if f.Changed {
				set = append(set, shown)
			}
		}
		if len(set) > 1 {
			return fmt.Errorf("%s cannot be used together: give one of %s", strings.Join(set, " and "), strings.Join(all, ", "))
		}
	}
	return nil
}

// negativeArg is how pflag reports a negative number given as an argument.
var negativeArg = regexp.MustCompile(`^unknown shorthand flag: '\d' in (-[\d.]+)$`)

// badFlagValue is how pflag reports a value its parser refused.
var badFlagValue = regexp.MustCompile(`^invalid argument "(.*)" for "(?:-\w, )?--([\w-]+)" flag: (.*)$`)

// flagError says in one sentence which flag's value is wrong and what to
// give instead, with an example, instead of the parser's text
// (strconv.ParseUint: parsing "abc": invalid syntax).
func flagError(c *cobra.Command, err error) error {
	if m := negativeArg.FindStringSubmatch(err.Error()); m != nil {
		// pflag reads "trace 1 -5" as the flags -5.
		return fmt.Errorf("%s: an interval or a count is a positive number: usage: %s", m[1], c.UseLine())
	}
	m := badFlagValue.FindStringSubmatch(err.Error())
	f := (*pflag.Flag)(nil)
	if m != nil {
		f = c.Flags().Lookup(m[2])
	}
	if f == nil {
		return fmt.Errorf("%v (see %s --help)", err, c.CommandPath())
	}
	value, why := m[1], m[3]
	switch t := f.Value.Type(); {
	case t == "duration":
		why = "give a duration with its unit, like --" + f.Name + " 10ms (ns, us, ms, s, m, h)"
	case strings.HasPrefix(t, "uint"):
		why = "give a whole number of 0 or more, like --" + f.Name + " 12"
	case strings.HasPrefix(t, "int"):
		why = "give a whole number, like --" + f.Name + " 12"
	case strings.HasPrefix(t, "float"):
		why = "give a number, like --" + f.Name + " 2.5"
	case t == "bool":
		why = "give true or false, like --" + f.Name + "=false"
	}
	return fmt.Errorf("--%s %q: %s (see %s --help)", f.Name, value, why, c.CommandPath())
}

// checkEmpty refuses a text flag given an empty value (--op with nothing,
// --latency=): pflag takes it, and it would mean the default, or nothing.
func checkEmpty(c *cobra.Command) error {
	var err error
	c.Flags().Visit(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		empty := false
		switch v := f.Value.(type) {
		case pflag.SliceValue:
			for _, s := range v.GetSlice() {
				empty = empty || strings.TrimSpace(s) == ""
			}
			empty = empty || len(v.GetSlice()) == 0
		default:
			empty = f.Value.Type() == "string" && strings.TrimSpace(f.Value.String()) == ""
		}
		if empty {
			err = fmt.Errorf("--%s was given an empty value: give it one, or leave it out (see %s --help)", f.Name, c.CommandPath())
		}
	})
	return err
}
