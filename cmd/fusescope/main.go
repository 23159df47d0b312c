// Command fusescope shows where a FUSE file system spends its time.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if os.Getenv(gateEnv) != "" {
		runGate() // fusescope syscalls -- CMD: the command, held until traced
	}
	root := newRootCmd()
	if err := root.Execute(); err != nil {
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

Records are versioned JSON (docs/record.md); every view renders them the same.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%v (see %s --help)", err, c.CommandPath())
	})
	root.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		return checkExclusive(c)
	}
	root.AddCommand(newTraceCmd(), newShowCmd(), newFSCmd(), newSyscallsCmd())
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
