// Package doctor runs fusescope doctor against lab file systems configured
// to show each anti-pattern and to fix it (the lab fs is the ground truth:
// a confusion matrix over the rules), and against independent daemons.
package doctor

import (
	"testing"

	"github.com/fusescope/fusescope/test/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, e2e.Options{Plain: true}) }
