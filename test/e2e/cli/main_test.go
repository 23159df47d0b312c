// Package cli runs fusescope's commands at their edges as a user would:
// bad input, records shown and reported, the demo, bench end to end.
package cli

import (
	"testing"

	"github.com/fusescope/fusescope/test/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, e2e.Options{}) }
