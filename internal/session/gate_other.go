//go:build !amd64

package session

import (
	"errors"
	"os"
)

// newGate: the small gate is x86-64 code; elsewhere fusescope itself is
// the gate.
func newGate(int) (*os.File, error) { return nil, errors.ErrUnsupported }
