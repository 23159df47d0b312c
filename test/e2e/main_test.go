package e2e

import "testing"

// The helpers' own tests: some run fusescope (root, BPF), as the packages
// that use them do.
func TestMain(m *testing.M) { Main(m, Options{}) }
