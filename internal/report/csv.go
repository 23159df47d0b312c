package report

import (
	"encoding/csv"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fusescope/fusescope/internal/profile"
)

// CSVColumns are the columns of the per-opcode CSV export, documented in
// docs/record.md. Times are nanoseconds; new columns are only ever appended.
var CSVColumns = []string{
	"end_time", "mount", "fs_type", "conn", "op", "count", "errors", "req_bytes", "reply_bytes",
	"total_ns", "avg_ns", "min_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns", "pct_time", "errnos",
	// trace --stages; empty without it.
	"staged", "not_taken", "not_replied",
	"queue_avg_ns", "queue_p50_ns", "queue_p99_ns", "daemon_avg_ns", "daemon_p50_ns", "daemon_p99_ns",
	"reply_avg_ns", "reply_p50_ns", "reply_p99_ns",
	// Of count, the requests FUSE over io_uring's ring carried.
	"uring",
}

// CountColumns are the columns of the counters-only CSV (trace --counts).
var CountColumns = []string{"end_time", "mount", "fs_type", "conn", "op", "count", "errors", "uring"}

// WriteCSV writes the record's statistics, sorted by total time, one row per
// (connection, opcode), after a header line if header is true. end_time is
// the end of the measured window, so interval reports append cleanly.
func WriteCSV(w io.Writer, r *profile.Record, countsOnly, header bool) error {
	cw := csv.NewWriter(w)
	cols := CSVColumns
	if countsOnly {
		cols = CountColumns
	}
	if header {
		if err := cw.Write(cols); err != nil {
			return err
		}
	}
	end := r.Meta.End.UTC().Format(time.RFC3339Nano)
	p := r.Profile
	p.Ops = append([]profile.OpStats(nil), p.Ops...)
	p.SortByTime()
	total := p.TotalNs()
	for i := range p.Ops {
		s := &p.Ops[i]
		fsType := ""
		if m := r.Mount(s.Conn); m != nil {
			fsType = m.FSType
		}
		row := []string{end, csvName(r.Label(s.Conn)), fsType, u(uint64(s.Conn)), s.Op, u(s.Count), u(s.Errors)}
		if !countsOnly {
			h := &s.Latency
			pct := 0.0
			if total > 0 {
				pct = 100 * float64(h.Sum) / float64(total)
			}
			row = append(row, u(s.ReqBytes), u(s.ReplyBytes), u(h.Sum), f(h.Mean()), u(h.Min),
				f(h.Quantile(0.5)), f(h.Quantile(0.9)), f(h.Quantile(0.99)), f(h.Quantile(0.999)), u(h.Max),
				strconv.FormatFloat(pct, 'f', 2, 64), errnoList(s.Errnos))
			row = append(row, stageCells(s)...)
		}
		row = append(row, u(s.URing))
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// stageCells are the --stages columns of an operation: empty when its
// stages were not measured.
func stageCells(s *profile.OpStats) []string {
	cells := make([]string, 12)
	if len(s.Stages) == 0 {
		return cells
	}
	q := s.Stage(profile.StageQueue)
	if q == nil {
		return cells
	}
	cells[0], cells[1], cells[2] = u(q.Count), u(s.StageGaps.NotTaken), u(s.StageGaps.NotReplied)
	for i, st := range []profile.Stage{profile.StageQueue, profile.StageDaemon, profile.StageReply} {
		h := s.Stage(st)
		if h == nil || h.Count == 0 {
			continue
		}
		cells[3+3*i], cells[4+3*i], cells[5+3*i] = f(h.Mean()), f(h.Quantile(0.5)), f(h.Quantile(0.99))
	}
	return cells
}

// csvName writes a name that came from the trace (a command, a mount
// point) as it is, or Go-quoted when it holds a character that is not
// printable: CSV is often printed to a terminal, which such a character
// could drive.
func csvName(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) && r != ' ' {
			return strconv.Quote(s)
		}
	}
	return s
}

func u(v uint64) string  { return strconv.FormatUint(v, 10) }
func f(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

// errnoList renders {"ENOENT": 3, "EIO": 1} as "EIO:1;ENOENT:3".
func errnoList(m map[string]uint64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ":" + u(m[k])
	}
	return strings.Join(parts, ";")
}

// SlowCSVColumns are the columns of trace --slower --csv, one row per slow
// request (bcc's ext4slower -j), documented in docs/record.md.
var SlowCSVColumns = []string{
	"end_time", "mount", "conn", "op", "latency_ns", "errno", "req_bytes", "reply_bytes", "node_id", "pid", "comm",
	"queue_ns", "daemon_ns", "reply_ns", // trace --stages; empty where not seen
	"file", // the node's path in its mount; empty when not known
}

// WriteSlowCSV writes slow requests, one row each in the order given, after
// a header line if header is true.
func WriteSlowCSV(w io.Writer, header bool, reqs ...profile.SlowRequest) error {
	cw := csv.NewWriter(w)
	if header {
		if err := cw.Write(SlowCSVColumns); err != nil {
			return err
		}
	}
	for _, s := range reqs {
		mount := s.Mount
		if mount == "" {
			mount = "conn " + u(uint64(s.Conn)) // as the per-opcode CSV labels it
		}
		row := []string{s.End.UTC().Format(time.RFC3339Nano), csvName(mount), u(uint64(s.Conn)), s.Op,
			u(uint64(s.Latency.Nanoseconds())), s.Errno, u(uint64(s.ReqBytes)), u(uint64(s.ReplyBytes)),
			u(s.NodeID), u(uint64(s.PID)), csvName(s.Comm), "", "", "", csvName(s.File)}
		if len(s.Stages) == 3 {
			for i, d := range s.Stages {
				row[11+i] = u(uint64(d.Nanoseconds()))
			}
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
