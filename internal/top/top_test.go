package top

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/fusescope/fusescope/internal/thirdparty/bubbletea"

	"github.com/fusescope/fusescope/internal/golden"
	"github.com/fusescope/fusescope/internal/profile"
)

func interval(at time.Time, ops ...profile.OpStats) *profile.Record {
	return &profile.Record{Schema: profile.Schema,
		Meta: profile.Meta{Start: at, End: at.Add(time.Second), Mounts: []profile.Mount{
			{Conn: 40, MountPoint: "/mnt/a", Connection: &profile.ConnInfo{Waiting: 3, MaxBackground: 12}},
			{Conn: 41, MountPoint: "/mnt/b"}}},
		Profile: profile.Profile{Ops: ops},
		Hung:    []profile.HungRequest{{Conn: 40, Age: time.Minute}, {Conn: 40, Age: time.Millisecond}},
		Files:   []profile.FileStats{{Conn: 40, Path: "/data/x", Count: 7, Total: 3 * time.Millisecond}},
		Slow:    []profile.SlowRequest{{Comm: "cat", PID: 9, Mount: "/mnt/a", Latency: 2 * time.Millisecond}, {Comm: "cat", PID: 9, Mount: "/mnt/a", Latency: 4 * time.Millisecond}},
	}
}

func op(conn uint32, name string, n int, lat time.Duration, errors uint64) profile.OpStats {
	s := profile.OpStats{Conn: conn, Op: name, Errors: errors}
	for i := 0; i < n; i++ {
		s.Latency.Add(uint64(lat))
	}
	s.Count = s.Latency.Count
	return s
}

func key(s string) tea.KeyMsg { return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)} }

func TestView(t *testing.T) {
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	m := New(5 * time.Second)
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	m.Update(RecordMsg{interval(at, op(40, "LOOKUP", 100, time.Millisecond, 5), op(40, "READ", 1000, 20*time.Microsecond, 0), op(41, "GETATTR", 10, 50*time.Microsecond, 0))})
	golden.Check(t, "view.golden", []byte(m.View()))

	// s: by rate, READ first; m: /mnt/a, then /mnt/b, then all again.
	m.Update(key("s"))
	if v := m.View(); !strings.Contains(v, "sort: rate") || strings.Index(v, "READ") > strings.Index(v, "LOOKUP") {
		t.Errorf("sort by rate:\n%s", v)
	}
	for _, want := range []string{"/mnt/a", "/mnt/b", "all"} {
		m.Update(key("m"))
		if v := m.View(); !strings.Contains(v, "mount: "+want) {
			t.Errorf("m: want mount %s:\n%s", want, v)
		}
	}
	// p: a record that comes while paused is not shown until unpaused.
	m.Update(key("p"))
	m.Update(RecordMsg{interval(at.Add(time.Second), op(40, "MKDIR", 1, time.Millisecond, 0))})
	if v := m.View(); strings.Contains(v, "MKDIR") || !strings.Contains(v, "[paused]") {
		t.Errorf("paused:\n%s", v)
	}
	m.Update(key(" "))
	if v := m.View(); !strings.Contains(v, "MKDIR") {
		t.Errorf("unpaused:\n%s", v)
	}
	// Too small: the one sentence, wrapped to the width (a terminal cuts
	// what is wider), for any width.
	for _, w := range []int{79, 70, 40, 12, 5} {
		m.Update(tea.WindowSizeMsg{Width: w, Height: 10})
		v := m.View()
		want := fmt.Sprintf("terminal too small (%dx10): fusescope top needs at least 80x12; q quits", w)
		if squeeze := strings.NewReplacer(" ", "", "\n", ""); squeeze.Replace(v) != squeeze.Replace(want) {
			t.Errorf("too small at %d columns: %q, want %q", w, v, want)
		}
		for _, line := range strings.Split(v, "\n") {
			if len(line) > w {
				t.Errorf("too small at %d columns: a line of %d: %q", w, len(line), line)
			}
		}
	}
	// q quits; so does the run's end.
	if _, cmd := m.Update(key("q")); cmd == nil {
		t.Error("q does not quit")
	}
	if _, cmd := m.Update(EndMsg{}); cmd == nil || m.Ended() == nil {
		t.Error("the run's end does not quit")
	}
}

// m steps through the mounts and back to all, even when the mounts with
// requests change between intervals.
func TestMountCycle(t *testing.T) {
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	only := func(i int, mount string, conn uint32) *profile.Record {
		r := interval(at.Add(time.Duration(i)*time.Second), op(conn, "LOOKUP", 10, time.Millisecond, 0))
		r.Meta.Mounts = []profile.Mount{{Conn: conn, MountPoint: mount}}
		return r
	}
	m := New(5 * time.Second)
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	// Intervals with /mnt/a alone and /mnt/b alone, in turn: m reaches
	// all within two steps of any mount.
	m.Update(RecordMsg{only(0, "/mnt/a", 40)})
	m.Update(key("m"))
	if m.mount != "/mnt/a" {
		t.Fatalf("m picked %q, want /mnt/a", m.mount)
	}
	for i := 1; i <= 6; i++ {
		if i%2 == 1 {
			m.Update(RecordMsg{only(i, "/mnt/b", 41)})
		} else {
			m.Update(RecordMsg{only(i, "/mnt/a", 40)})
		}
		m.Update(key("m"))
		if m.mount == "" {
			break
		}
		if i == 2 {
			t.Fatalf("m never comes back to all while the mounts change: still %q", m.mount)
		}
	}
	if v := m.View(); !strings.Contains(v, "mount: all") {
		t.Errorf("not all:\n%s", v)
	}
}

// The files and the processes follow the mount picked; the requests the
// kernel sends on its own (pid 0) are the kernel's, not the command's
// whose close made them.
func TestMountFilesAndKernel(t *testing.T) {
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	m := New(5 * time.Second)
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	r := interval(at.Add(10*time.Second), op(40, "READ", 10, time.Millisecond, 0), op(41, "READ", 10, time.Millisecond, 0))
	r.Files = []profile.FileStats{{Conn: 40, Node: 2, Path: "/on-a", Count: 9, Total: 9 * time.Millisecond}, {Conn: 41, Node: 2, Path: "/on-b", Count: 1, Total: time.Millisecond}, {Conn: 41, Node: 3, Count: 1, Total: time.Microsecond}}
	r.Slow = []profile.SlowRequest{{Conn: 40, Comm: "cat", PID: 9, Mount: "/mnt/a", Latency: 2 * time.Millisecond},
		{Conn: 41, Comm: "touch", PID: 0, Mount: "/mnt/b", Op: "RELEASE", Latency: 3 * time.Millisecond},
		{Conn: 41, Comm: "touch", PID: 0, Mount: "/mnt/b", Op: "RELEASE", Latency: 3 * time.Millisecond}}
	m.Update(RecordMsg{r})
	if v := m.View(); !strings.Contains(v, "/on-a") || !strings.Contains(v, "/on-b") || !strings.Contains(v, "cat[9]") {
		t.Errorf("all mounts: a file or process missing:\n%s", v)
	}
	for m.mount != "/mnt/b" {
		m.Update(key("m"))
	}
	v := m.View()
	if strings.Contains(v, "/on-a") || strings.Contains(v, "cat[9]") || !strings.Contains(v, "/on-b") {
		t.Errorf("mount /mnt/b shows another mount's files or processes:\n%s", v)
	}
	if !regexp.MustCompile(`(?m)^/on-b\s+1\s+1\.0\s+kernel\s+2\s+6\.0\n\?\s+1\s+0\.0$`).MatchString(v) || strings.Contains(v, "touch[0]") {
		t.Errorf("the kernel's requests (pid 0) and the file with no name:\n%s", v)
	}
}

// Where FUSE over io_uring could carry requests, the connections' table
// says which transport carried each mount's this interval; elsewhere it
// has no such column.
func TestViewTransport(t *testing.T) {
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	m := New(5 * time.Second)
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	m.Update(RecordMsg{interval(at, op(40, "LOOKUP", 10, time.Millisecond, 0))})
	if v := m.View(); strings.Contains(v, "TRANSPORT") {
		t.Errorf("the ring neither enabled nor used, a transport column:\n%s", v)
	}
	ring := op(40, "LOOKUP", 10, time.Millisecond, 0)
	ring.URing = 10
	rec := interval(at.Add(time.Second), ring, op(41, "GETATTR", 3, time.Millisecond, 0))
	rec.Meta.FuseURing = true
	m.Update(RecordMsg{rec})
	v := m.View()
	var a, b string
	for _, line := range strings.Split(v, "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && f[0] == "/mnt/a" && a == "" {
			a = f[len(f)-1]
		}
		if len(f) > 1 && f[0] == "/mnt/b" && b == "" {
			b = f[len(f)-1]
		}
	}
	if !strings.Contains(v, "TRANSPORT") || a != "io_uring" || b != "/dev/fuse" {
		t.Errorf("transports: /mnt/a %q, /mnt/b %q, want io_uring and /dev/fuse:\n%s", a, b, v)
	}
}
