package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// machineTmp is the system's temporary directory, where the packages that
// go test runs side by side meet (each sets TMPDIR to a directory of its
// own).
var machineTmp = os.TempDir()

// DropsCaches waits until no test that counts on the kernel's caches runs,
// in this package or another, and keeps them waiting until t ends: t drops
// every mount's caches (drop_caches, or a bench's cold runs). Tests that
// drop them run together.
func DropsCaches(t testing.TB) { holdCaches(t, dropper) }

// DropsCachesAlone is DropsCaches for a test that also counts on what the
// kernel caches between its own drops: no test that drops or keeps them
// runs beside it.
func DropsCachesAlone(t testing.TB) { holdCaches(t, alone) }

// KeepsCaches waits until no test that drops the kernel's caches runs, and
// keeps them waiting until t ends: t counts on what the kernel cached (its
// pages, entries, attributes or inodes) staying cached while it runs.
// Tests that keep them run together.
func KeepsCaches(t testing.TB) { holdCaches(t, keeper) }

// The caches' room: tests of one kind share it, the kinds take turns.
// One flock cannot say that (a shared and an exclusive lock would keep
// droppers apart from each other, and a waiting exclusive lock lets new
// shared ones in before it, for as long as they keep coming), so the room
// is a list of its holders and of those waiting, in a file that a flock
// guards: a test enters when no holder is of another kind and no test of
// another kind has waited longer. Entries of processes that are gone (a
// test binary killed at its timeout) are dropped.
type cacheUse string

const (
	dropper cacheUse = "drops"
	keeper  cacheUse = "keeps"
	alone   cacheUse = "alone"
)

// together reports whether tests of uses a and b may use the caches at
// once.
func together(a, b cacheUse) bool { return a == b && a != alone }

// cacheEntry is a test in the room or waiting for it: its process, and the
// order in which it asked.
type cacheEntry struct {
	use     cacheUse
	pid     int
	seq     int
	holding bool
}

func holdCaches(t testing.TB, use cacheUse) {
	t.Helper()
	t.Cleanup(enterRoom(t, use))
}

// enterRoom waits until t may use the caches as use says, and returns
// what leaves the room.
func enterRoom(t testing.TB, use cacheUse) (leave func()) {
	t.Helper()
	me := cacheEntry{use: use, pid: os.Getpid()}
	withRoom(t, func(room *[]cacheEntry, seq *int) {
		*seq++
		me.seq = *seq
		*room = append(*room, me)
	})
	leave = func() {
		withRoom(t, func(room *[]cacheEntry, _ *int) {
			*room = slices.DeleteFunc(*room, func(e cacheEntry) bool { return e.pid == me.pid && e.seq == me.seq })
		})
	}
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		entered := false
		withRoom(t, func(room *[]cacheEntry, _ *int) {
			for _, e := range *room {
				if e.seq != me.seq && !together(e.use, use) && (e.holding || e.seq < me.seq) {
					return
				}
			}
			for i, e := range *room {
				if e.pid == me.pid && e.seq == me.seq {
					(*room)[i].holding, entered = true, true
				}
			}
		})
		if entered {
			return leave
		}
		time.Sleep(wait)
	}
}

// withRoom runs f on the room's entries and its last sequence number under
// the room's flock, and writes back what f left.
func withRoom(t testing.TB, f func(room *[]cacheEntry, seq *int)) {
	t.Helper()
	path := filepath.Join(machineTmp, "fusescope-e2e-caches.room")
	file, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if err := unix.Flock(int(file.Fd()), unix.LOCK_EX); err != nil {
		t.Fatalf("locking the kernel's caches: %v", err)
	}
	var room []cacheEntry
	seq := 0
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		var e cacheEntry
		var state string
		if n, _ := fmt.Sscanf(sc.Text(), "%s %d %d %s", &e.use, &e.pid, &e.seq, &state); n == 4 {
			seq = max(seq, e.seq)
			if e.pid > 0 && unix.Kill(e.pid, 0) != unix.ESRCH {
				e.holding = state == "in"
				room = append(room, e)
			}
		}
	}
	f(&room, &seq)
	var b strings.Builder
	// The last sequence number stays (pid 0), so that a new entry comes
	// after those that left.
	fmt.Fprintf(&b, "%s 0 %d last\n", dropper, seq)
	for _, e := range room {
		state := "waiting"
		if e.holding {
			state = "in"
		}
		b.WriteString(string(e.use) + " " + strconv.Itoa(e.pid) + " " + strconv.Itoa(e.seq) + " " + state + "\n")
	}
	if err := file.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if _, err := file.WriteAt([]byte(b.String()), 0); err != nil {
		t.Fatal(err)
	}
}
