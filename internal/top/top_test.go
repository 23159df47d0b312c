package top

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

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
	// Too small: one line.
	m.Update(tea.WindowSizeMsg{Width: 70, Height: 10})
	if v := m.View(); strings.Count(v, "\n") != 0 || !strings.Contains(v, "terminal too small (70x10)") {
		t.Errorf("too small: %q", v)
	}
	// q quits; so does the run's end.
	if _, cmd := m.Update(key("q")); cmd == nil {
		t.Error("q does not quit")
	}
	if _, cmd := m.Update(EndMsg{}); cmd == nil || m.Ended() == nil {
		t.Error("the run's end does not quit")
	}
}
