// Command fusescope shows where a FUSE file system spends its time.
package main

import (
	"errors"
	"fmt"
	"os"

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
  show      render a saved record exactly as the live view did

Records are versioned JSON (docs/record.md); every view renders them the same.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%v (see %s --help)", err, c.CommandPath())
	})
	root.AddCommand(newTraceCmd(), newShowCmd(), newFSCmd(), newSyscallsCmd())
	return root
}
