// Package top is fusescope top: a live terminal view (bubbletea) of
// interval records, per mount and opcode, as juicefs stats and top do.
// It takes records only: the run that makes them sends each interval's.
package top

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	tea "github.com/fusescope/fusescope/internal/thirdparty/bubbletea"

	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/report"
)

// The smallest terminal the view fits in.
const (
	MinWidth  = 80
	MinHeight = 12
)

// RecordMsg brings an interval's record.
type RecordMsg struct{ Rec *profile.Record }

// EndMsg says the run ended (the traced mount went away, SIGTERM); Err
// is why, if it failed.
type EndMsg struct{ Err error }

// Sort orders, in the order the s key steps through them.
var sortNames = []string{"time", "rate", "p99", "errors", "op"}

// Model is the view's state.
type Model struct {
	width, height int
	sortBy        int
	mount         string // "": every mount
	paused        bool
	rec           *profile.Record // the interval shown
	latest        *profile.Record // the last received (shown when unpaused)
	intervals     int
	hungAfter     time.Duration
	end           *EndMsg
}

// New returns the view; hungAfter is the age from which an in-flight
// request counts as hung.
func New(hungAfter time.Duration) *Model { return &Model{hungAfter: hungAfter} }

// Init starts nothing: the records come from the run.
func (m *Model) Init() tea.Cmd { return nil }

// Ended is how the run ended, if it did.
func (m *Model) Ended() *EndMsg { return m.end }

// Update handles keys, resizes and records.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tea.KeyMsg:
		switch msg.String() {
		case "q", "esc", "ctrl+c":
			return m, tea.Quit
		case "s":
			m.sortBy = (m.sortBy + 1) % len(sortNames)
		case "m":
			m.mount = m.nextMount()
		case "p", " ":
			m.paused = !m.paused
			if !m.paused {
				m.rec = m.latest
			}
		}
	case RecordMsg:
		m.latest = msg.Rec
		m.intervals++
		if !m.paused {
			m.rec = msg.Rec
		}
	case EndMsg:
		m.end = &msg
		return m, tea.Quit
	}
	return m, nil
}

// nextMount steps the mount filter through the mounts of the latest
// interval, in order, then all. The mount shown counts among them though
// it left, so that the steps go on from it: were it left out, a set of
// mounts that changed each interval would send each step back to the
// first mount, never to all.
func (m *Model) nextMount() string {
	mounts := m.mounts()
	if m.mount != "" && !slices.Contains(mounts, m.mount) {
		mounts = append(mounts, m.mount)
		slices.Sort(mounts)
	}
	i := slices.Index(mounts, m.mount) // -1 for all: the first mount comes next
	if i == len(mounts)-1 {
		return ""
	}
	return mounts[i+1]
}

func (m *Model) mounts() []string {
	if m.latest == nil {
		return nil
	}
	var out []string
	for _, mt := range m.latest.Meta.Mounts {
		if !mt.Gone {
			out = append(out, m.latest.Label(mt.Conn))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// row is one mount's opcode in the interval shown.
type row struct {
	mount, op                    string
	rate, errRate, p50, p99, sum float64 // /s, /s, us, us, s
	stages                       [3]float64
	staged                       bool
}

func (m *Model) rows(seconds float64) (rows []row, total float64) {
	for i := range m.rec.Profile.Ops {
		s := &m.rec.Profile.Ops[i]
		label := m.rec.Label(s.Conn)
		if m.mount != "" && label != m.mount || s.Count == 0 {
			continue
		}
		r := row{mount: label, op: s.Op, rate: float64(s.Count) / seconds, errRate: float64(s.Errors) / seconds,
			p50: s.Latency.Quantile(0.5) / 1e3, p99: s.Latency.Quantile(0.99) / 1e3, sum: float64(s.Latency.Sum) / 1e9}
		var means [3]float64
		var sum float64
		for k, st := range []profile.Stage{profile.StageQueue, profile.StageDaemon, profile.StageReply} {
			if h := s.Stage(st); h != nil && h.Count > 0 {
				means[k] = h.Mean()
				sum += means[k]
				r.staged = true
			}
		}
		for k := range means {
			if sum > 0 {
				r.stages[k] = 100 * means[k] / sum
			}
		}
		total += r.sum
		rows = append(rows, r)
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		switch sortNames[m.sortBy] {
		case "rate":
			return cmp.Compare(b.rate, a.rate)
		case "p99":
			return cmp.Compare(b.p99, a.p99)
		case "errors":
			return cmp.Compare(b.errRate, a.errRate)
		case "op":
			return cmp.Or(cmp.Compare(a.op, b.op), cmp.Compare(a.mount, b.mount))
		}
		return cmp.Compare(b.sum, a.sum)
	})
	return rows, total
}

// View draws the screen.
func (m *Model) View() string {
	if m.width > 0 && (m.width < MinWidth || m.height < MinHeight) {
		// Wrapped to the width: the terminal would cut a longer line.
		return wrap(fmt.Sprintf("terminal too small (%dx%d): fusescope top needs at least %dx%d; q quits", m.width, m.height, MinWidth, MinHeight), m.width)
	}
	var b strings.Builder
	state := ""
	if m.paused {
		state = "  [paused]"
	}
	mount := m.mount
	if mount == "" {
		mount = "all"
	}
	if m.rec == nil {
		fmt.Fprintf(&b, "fusescope top: waiting for the first interval...\n\nkeys: s sort  m mount  p pause  q quit\n")
		return b.String()
	}
	seconds := m.rec.Meta.End.Sub(m.rec.Meta.Start).Seconds()
	if seconds <= 0 {
		seconds = 1
	}
	if m.rec.Syscalls != nil {
		m.viewSyscalls(&b, seconds, state)
		return b.String()
	}
	// The mount last: a long path is what a narrow terminal cuts.
	fmt.Fprintf(&b, "fusescope top  %s  interval %.1fs  sort: %s%s  mount: %s\n\n", m.rec.Meta.End.Format("15:04:05"), seconds,
		sortNames[m.sortBy], state, report.Name(mount))
	lines := 2
	// The connections: fusectl's gauges, requests in flight and hung.
	inFlight, hung := map[uint32]int{}, map[uint32]int{}
	for _, h := range m.rec.Hung {
		inFlight[h.Conn]++
		if h.Age >= m.hungAfter {
			hung[h.Conn]++
		}
	}
	conns := [][]string{{"MOUNT", "WAITING", "MAX_BG", "IN_FLIGHT", "HUNG"}}
	// Which transport carried each mount's requests this interval, where
	// FUSE over io_uring could have: the ring was enabled, or carried some.
	rings := m.rec.Meta.FuseURing || slices.ContainsFunc(m.rec.Profile.Ops, func(s profile.OpStats) bool { return s.URing > 0 })
	if rings {
		conns[0] = append(conns[0], "TRANSPORT")
	}
	for _, mt := range m.rec.Meta.Mounts {
		label := m.rec.Label(mt.Conn)
		if mt.Gone || (m.mount != "" && label != m.mount) {
			continue
		}
		w, bg := "-", "-"
		if c := mt.Connection; c != nil {
			w, bg = fmt.Sprint(c.Waiting), fmt.Sprint(c.MaxBackground)
		}
		row := []string{report.Name(label), w, bg, fmt.Sprint(inFlight[mt.Conn]), fmt.Sprint(hung[mt.Conn])}
		if rings {
			name, _, _ := m.rec.Profile.Transport(mt.Conn)
			row = append(row, cmp.Or(name, "-"))
		}
		conns = append(conns, row)
	}
	budget := m.height - 8 // header, blank lines, the keys
	if m.height == 0 {
		budget = 40
	}
	connRows := min(len(conns), max(2, budget/4))
	report.Columns(&b, conns[:connRows], "lr")
	lines += connRows
	b.WriteString("\n")
	rows, total := m.rows(seconds)
	staged := slices.ContainsFunc(rows, func(r row) bool { return r.staged })
	head := []string{"MOUNT", "OP", "REQ/s", "ERR/s", "P50(us)", "P99(us)", "TIME%"}
	if staged {
		head = append(head, "QUEUE%", "DAEMON%", "REPLY%")
	}
	table := [][]string{head}
	room := max(1, budget-connRows-1-m.sideLines())
	for i, r := range rows {
		if i == room {
			break
		}
		share := 0.0
		if total > 0 {
			share = 100 * r.sum / total
		}
		cells := []string{report.Name(r.mount), r.op, fmt.Sprintf("%.1f", r.rate), fmt.Sprintf("%.1f", r.errRate),
			fmt.Sprintf("%.1f", r.p50), fmt.Sprintf("%.1f", r.p99), fmt.Sprintf("%.1f", share)}
		if staged {
			if r.staged {
				cells = append(cells, fmt.Sprintf("%.0f", r.stages[0]), fmt.Sprintf("%.0f", r.stages[1]), fmt.Sprintf("%.0f", r.stages[2]))
			} else {
				cells = append(cells, "-", "-", "-")
			}
		}
		table = append(table, cells)
	}
	if len(rows) == 0 {
		table = append(table, []string{"(no request this interval)"})
	}
	report.Columns(&b, table, "llr")
	if len(rows) > room {
		fmt.Fprintf(&b, "(%d more)\n", len(rows)-room)
	}
	m.writeSide(&b)
	b.WriteString("\nkeys: s sort  m mount  p pause  q quit\n")
	return b.String()
}

// wrap breaks text into lines of at most width characters, at spaces
// where it can.
func wrap(text string, width int) string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		for len(word) > width { // no space to break at
			if line != "" {
				lines, line = append(lines, line), ""
			}
			lines, word = append(lines, word[:width]), word[width:]
		}
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) <= width:
			line += " " + word
		default:
			lines, line = append(lines, line), word
		}
	}
	return strings.Join(append(lines, line), "\n")
}

// sideLines is how many lines the files and processes take.
func (m *Model) sideLines() int {
	files, procs := m.files(), m.procs()
	if len(files) == 0 && len(procs) == 0 {
		return 0
	}
	return 2 + min(5, max(len(files), len(procs)))
}

// files are the interval's busiest files on the mount shown.
func (m *Model) files() []profile.FileStats {
	var out []profile.FileStats
	for _, f := range m.rec.Files {
		if m.mount == "" || m.rec.Label(f.Conn) == m.mount {
			out = append(out, f)
		}
	}
	return out
}

type proc struct {
	name  string
	count int
	sum   time.Duration
}

// procs sums the interval's slow requests on the mount shown by
// requesting command; what the kernel sends on its own (pid 0: the
// RELEASE after a close, write-back) is "kernel", whichever task's
// command it was sent from.
func (m *Model) procs() []proc {
	by := map[string]*proc{}
	for _, s := range m.rec.Slow {
		if m.mount != "" && m.rec.Label(s.Conn) != m.mount {
			continue
		}
		k := fmt.Sprintf("%s[%d]", s.Comm, s.PID)
		if s.PID == 0 {
			k = "kernel"
		}
		p := by[k]
		if p == nil {
			p = &proc{name: k}
			by[k] = p
		}
		p.count++
		p.sum += s.Latency
	}
	var out []proc
	for _, p := range by {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b proc) int { return cmp.Or(cmp.Compare(b.sum, a.sum), cmp.Compare(a.name, b.name)) })
	return out
}

// writeSide lists the interval's top files and processes side by side.
func (m *Model) writeSide(b *strings.Builder) {
	if m.sideLines() == 0 {
		return
	}
	files, procs := m.files(), m.procs()
	table := [][]string{{"FILE", "REQS", "TIME(ms)", "", "PROCESS (slow requests)", "REQS", "TIME(ms)"}}
	for i := 0; i < 5; i++ {
		cells := []string{"", "", "", "", "", "", ""}
		if i < len(files) {
			f := files[i]
			path := report.Name(f.Path)
			if path == "" {
				path = "?" // named before the trace began, as trace --files prints it
			}
			cells[0], cells[1], cells[2] = path, fmt.Sprint(f.Count), fmt.Sprintf("%.1f", float64(f.Total)/1e6)
		}
		if i < len(procs) {
			p := procs[i]
			cells[4], cells[5], cells[6] = report.Name(p.name), fmt.Sprint(p.count), fmt.Sprintf("%.1f", float64(p.sum)/1e6)
		}
		if i >= len(files) && i >= len(procs) {
			break
		}
		table = append(table, cells)
	}
	b.WriteString("\n")
	report.Columns(b, table, "lrrllrr")
}

// viewSyscalls draws the system-call source's interval: per system call
// and per process.
func (m *Model) viewSyscalls(b *strings.Builder, seconds float64, state string) {
	r := m.rec.Syscalls
	sortBy := sortNames[m.sortBy]
	if sortBy == "p99" {
		sortBy = "latency" // the counters hold sums: the mean per call
	}
	root := ""
	if r.Live != nil {
		root = fmt.Sprintf("  pid %d and its children", r.Live.PID)
	}
	fmt.Fprintf(b, "fusescope top: system calls%s  %s  interval %.1fs  sort: %s%s\n\n", root, m.rec.Meta.End.Format("15:04:05"), seconds, sortBy, state)
	calls := slices.Clone(r.Syscalls)
	slices.SortStableFunc(calls, func(x, y profile.SyscallStat) int {
		switch sortBy {
		case "rate":
			return cmp.Compare(y.Calls, x.Calls)
		case "errors":
			return cmp.Compare(y.Errors, x.Errors)
		case "op":
			return cmp.Compare(x.Name, y.Name)
		case "latency":
			return cmp.Compare(y.TimeS/float64(max(1, y.Calls)), x.TimeS/float64(max(1, x.Calls)))
		}
		return cmp.Compare(y.TimeS, x.TimeS)
	})
	budget := m.height - 8
	if m.height == 0 {
		budget = 40
	}
	procRows := min(len(r.Processes), 5)
	room := max(1, budget-procRows-2)
	table := [][]string{{"SYSCALL", "CATEGORY", "CALLS/s", "ERR/s", "AVG(us)", "TIME%"}}
	for i, c := range calls {
		if i == room {
			break
		}
		share := 0.0
		if r.TotalTime > 0 {
			share = 100 * c.TimeS / r.TotalTime
		}
		table = append(table, []string{c.Name, c.Category, fmt.Sprintf("%.1f", float64(c.Calls)/seconds), fmt.Sprintf("%.1f", float64(c.Errors)/seconds),
			fmt.Sprintf("%.1f", 1e6*c.TimeS/float64(max(1, c.Calls))), fmt.Sprintf("%.1f", share)})
	}
	if len(calls) == 0 {
		table = append(table, []string{"(no system call this interval)"})
	}
	report.Columns(b, table, "llr")
	if len(calls) > room {
		fmt.Fprintf(b, "(%d more)\n", len(calls)-room)
	}
	if procRows > 0 {
		b.WriteString("\n")
		procs := [][]string{{"PID", "COMMAND", "CALLS/s", "TIME IN CALLS%"}}
		for _, p := range r.Processes[:procRows] {
			share := 0.0
			if r.TotalTime > 0 {
				share = 100 * p.SyscallS / r.TotalTime
			}
			procs = append(procs, []string{fmt.Sprint(p.PID), report.Name(p.Exec), fmt.Sprintf("%.1f", float64(p.Calls)/seconds), fmt.Sprintf("%.1f", share)})
		}
		report.Columns(b, procs, "rlr")
	}
	b.WriteString("\nkeys: s sort  p pause  q quit\n")
}
