//go:build !race

package labfs

const raceEnabled = false
