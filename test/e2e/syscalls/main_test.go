// Package syscalls runs fusescope syscalls, live and over strace's logs,
// against strace on the same workloads.
package syscalls

import (
	"testing"

	"github.com/fusescope/fusescope/test/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, e2e.Options{}) }
