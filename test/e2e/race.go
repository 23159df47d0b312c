//go:build race

package e2e

// Under the race detector (make test), the fusescope binary the tests run
// is built with it too: a race in the CLI's goroutines fails the test that
// met it (the binary exits 66 after printing the report).
func init() { raceBuild = true }
