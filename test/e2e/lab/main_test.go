// Package lab runs the lab file system (fusescope fs) against real tools,
// native directories and the model checker; the tracer's tests of it are in
// trace. Each mode's subtests run side by side: every one mounts its own.
package lab

import (
	"fmt"
	"testing"

	"github.com/fusescope/fusescope/test/e2e"
)

func TestMain(m *testing.M) {
	e2e.Main(m, e2e.Options{ModelChecker: true, Helpers: map[string]func(args []string) error{
		"write-shared": func(args []string) error { return writeSharedHere(args[0]) },
		"check-permissions": func(args []string) error {
			out, err := checkPermissions(args[0])
			fmt.Print(out)
			return err
		},
	}})
}
