//go:build race

package labfs

// raceEnabled: timing assertions are left out under the race detector,
// which slows every goroutine by an amount the machine decides.
const raceEnabled = true
