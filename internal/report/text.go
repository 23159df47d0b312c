// Package report renders profiles for people: bcc-style histograms and a
// per-opcode table ordered by total time, the same for a live trace and a
// saved record.
package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
)

// TextOptions choose what the text view shows.
type TextOptions struct {
	Unit       hist.Unit
	CountsOnly bool // counters only: no histograms, no latency columns
	NoHists    bool // the table without the histograms
	// SlowLines prints the record's slow requests (trace --slower) first,
	// as the live trace printed them when they ended (show).
	SlowLines bool
}

// WriteText renders a record: a log2 histogram per (mount, opcode), then the
// table, then what the tracer could not account for.
func WriteText(w io.Writer, r *profile.Record, o TextOptions) error {
	if o.Unit.Divisor == 0 {
		o.Unit = hist.Usecs
	}
	p := r.Profile
	p.Ops = append([]profile.OpStats(nil), p.Ops...)
	p.SortByTime()
	var b strings.Builder
	stages := p.HasStages()
	if o.SlowLines && len(r.Slow) > 0 {
		WriteSlowHeader(&b, o.Unit, stages)
		for _, s := range r.Slow {
			WriteSlow(&b, s, o.Unit, stages)
		}
	}
	switch {
	case len(p.Ops) > 0:
	case r.Meta.FS != nil: // the lab daemon's own record
		b.WriteString("No requests reached the daemon.\n")
	case len(r.Hung) > 0:
		b.WriteString("No FUSE request ended.\n")
	default:
		b.WriteString("No FUSE requests were traced.\n")
	}
	if !o.CountsOnly && !o.NoHists {
		for i := range p.Ops {
			s := &p.Ops[i]
			fmt.Fprintf(&b, "\nmount = %s  op = %s\n", mountTitle(r, s.Conn), s.Op)
			if err := s.Latency.WriteLog2(&b, o.Unit); err != nil {
				return err
			}
			for _, st := range s.Stages {
				if st.Latency.Count == 0 {
					continue
				}
				fmt.Fprintf(&b, "\nmount = %s  op = %s  stage = %s\n", mountTitle(r, s.Conn), s.Op, st.Stage)
				if err := st.Latency.WriteLog2(&b, o.Unit); err != nil {
					return err
				}
			}
		}
		if len(p.Ops) > 0 {
			b.WriteString("\n")
		}
	}
	if len(p.Ops) > 0 {
		writeTable(&b, r, &p, o)
	}
	if stages {
		writeStageNotes(&b, r, &p)
	}
	writeHung(&b, r, o.Unit)
	writeFiles(&b, r, o.Unit)
	writePageCache(&b, r)
	if err := writeCalls(&b, r, o); err != nil {
		return err
	}
	writeDrops(&b, p.Drops)
	if r.SlowLost > 0 {
		fmt.Fprintf(&b, "\n%d slow requests not listed: the kernel's ring buffer was full, or the record held %d already.\n", r.SlowLost, profile.MaxSlow)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mountTitle(r *profile.Record, conn uint32) string {
	m := r.Mount(conn)
	if m == nil || m.MountPoint == "" {
		return fmt.Sprintf("conn %d", conn)
	}
	return fmt.Sprintf("%s (%s, conn %d)", Name(m.MountPoint), Name(m.FSType), conn)
}

func writeTable(w io.Writer, r *profile.Record, p *profile.Profile, o TextOptions) {
	u := shortUnit(o.Unit)
	rows := [][]string{{"MOUNT", "OP", "COUNT", "ERRORS"}}
	if !o.CountsOnly {
		rows[0] = append(rows[0], "REQ_BYTES", "REPLY_BYTES", "AVG("+u+")", "P50("+u+")", "P99("+u+")", "MAX("+u+")", "%TIME")
	}
	stages := !o.CountsOnly && p.HasStages()
	if stages {
		// Means, so that the three add up to the total's mean of the
		// requests they timed.
		rows[0] = append(rows[0], "QUEUE("+u+")", "DAEMON("+u+")", "REPLY("+u+")", "STAGED")
	}
	total := p.TotalNs()
	for i := range p.Ops {
		s := &p.Ops[i]
		row := []string{Name(r.Label(s.Conn)), s.Op, fmt.Sprint(s.Count), fmt.Sprint(s.Errors)}
		if !o.CountsOnly {
			h := &s.Latency
			pct := 0.0
			if total > 0 {
				pct = 100 * float64(h.Sum) / float64(total)
			}
			row = append(row, Bytes(s.ReqBytes), Bytes(s.ReplyBytes), inUnit(h.Mean(), o.Unit),
				inUnit(h.Quantile(0.5), o.Unit), inUnit(h.Quantile(0.99), o.Unit),
				inUnit(float64(h.Max), o.Unit), fmt.Sprintf("%.1f", pct))
		}
		if stages {
			row = append(row, stageMeans(s, o.Unit)...)
		}
		rows = append(rows, row)
	}
	Columns(w, rows, "llr")
	var errs []string
	for i := range p.Ops {
		s := &p.Ops[i]
		if len(s.Errnos) > 0 {
			errs = append(errs, fmt.Sprintf("  %s %s: %s", Name(r.Label(s.Conn)), s.Op, countList(s.Errnos)))
		}
	}
	if len(errs) > 0 {
		fmt.Fprintf(w, "\nErrors by errno:\n%s\n", strings.Join(errs, "\n"))
	}
}

// stageMeans are an operation's stage columns: each stage's mean, and the
// share of its requests timed in all three stages; "-" where none was.
func stageMeans(s *profile.OpStats, unit hist.Unit) []string {
	cells := []string{"-", "-", "-", "0%"}
	for i, st := range []profile.Stage{profile.StageQueue, profile.StageDaemon, profile.StageReply} {
		if h := s.Stage(st); h != nil && h.Count > 0 {
			cells[i] = inUnit(h.Mean(), unit)
		}
	}
	if q := s.Stage(profile.StageQueue); q != nil && s.Count > 0 {
		cells[3] = fmt.Sprintf("%.0f%%", 100*float64(q.Count)/float64(s.Count))
	}
	return cells
}

// writeStageNotes says which requests the stages leave out, and why.
func writeStageNotes(w io.Writer, r *profile.Record, p *profile.Profile) {
	var notTaken, notReplied, none uint64
	for i := range p.Ops {
		s := &p.Ops[i]
		notTaken += s.StageGaps.NotTaken
		notReplied += s.StageGaps.NotReplied
		if len(s.Stages) == 0 {
			none += s.Count
		}
	}
	if notTaken > 0 {
		why := "a daemon was not watched, or the kernel ended them itself (interrupted, aborted)"
		if r.Meta.FuseURing {
			why += "; or FUSE over io_uring's ring carried them where its io_uring tracepoints could not be used"
		}
		fmt.Fprintf(w, "\nNot split into stages: %d requests not seen taken by a daemon, from /dev/fuse or its ring (%s).\n", notTaken, why)
	}
	if notReplied > 0 {
		fmt.Fprintf(w, "\nNot split into stages: %d requests read by a daemon whose reply write was not seen (interrupted, or answered by a path not watched).\n", notReplied)
	}
	if none > 0 {
		fmt.Fprintf(w, "\nNot split into stages: %d requests of operations no stage was measured for.\n", none)
	}
	for _, m := range r.Meta.Mounts {
		if m.PassthroughOpens > 0 {
			fmt.Fprintf(w, "\n%s: %d opens were answered with FUSE passthrough: those files' reads and writes go to the backing file in the kernel, are no FUSE requests, and are in no row above.\n",
				Name(mountLabel(m)), m.PassthroughOpens)
		}
		for _, d := range m.Daemons {
			if !d.Watched.IsZero() && !r.Meta.Start.IsZero() && d.Watched.Sub(r.Meta.Start) > lateWatch {
				fmt.Fprintf(w, "\nDaemon %d %s of %s was found at %s, after the trace began: its requests before then are not split into stages.\n",
					d.PID, Name(d.Comm), Name(m.MountPoint), d.Watched.Format("15:04:05.000"))
			}
		}
	}
}

// writeCalls prints the application's file calls on the traced mounts
// (trace --calls): a histogram per call, then a table with the share of
// calls the kernel's caches served alone and the share of their time spent
// waiting for FUSE requests.
func writeCalls(w io.Writer, r *profile.Record, o TextOptions) error {
	if len(r.Calls) == 0 {
		return nil
	}
	if !o.CountsOnly && !o.NoHists {
		for _, c := range r.Calls {
			fmt.Fprintf(w, "\ncall = %s\n", c.Syscall)
			if err := c.Latency.WriteLog2(w, o.Unit); err != nil {
				return err
			}
		}
	}
	u := shortUnit(o.Unit)
	fmt.Fprintf(w, "\nThe application's calls on the traced mounts (CACHED: served without a FUSE request; IN_FUSE: the calls' time waiting for their requests):\n")
	rows := [][]string{{"CALL", "COUNT", "ERRORS", "AVG(" + u + ")", "P50(" + u + ")", "P99(" + u + ")", "CACHED", "REQS/CALL", "IN_FUSE"}}
	for _, c := range r.Calls {
		h := &c.Latency
		cached, perCall, inFuse := "-", "-", "-"
		if c.Count > 0 {
			cached = fmt.Sprintf("%.1f%%", 100*float64(c.Count-min(c.WithRequests, c.Count))/float64(c.Count))
			perCall = fmt.Sprintf("%.2f", float64(c.Requests)/float64(c.Count))
		}
		if h.Sum > 0 {
			inFuse = fmt.Sprintf("%.1f%%", 100*float64(min(c.FuseNs, h.Sum))/float64(h.Sum))
		}
		rows = append(rows, []string{c.Syscall, fmt.Sprint(c.Count), fmt.Sprint(c.Errors), inUnit(h.Mean(), o.Unit),
			inUnit(h.Quantile(0.5), o.Unit), inUnit(h.Quantile(0.99), o.Unit), cached, perCall, inFuse})
	}
	Columns(w, rows, "lr")
	return nil
}

// writePageCache prints each mount's page cache (trace --page-cache).
func writePageCache(w io.Writer, r *profile.Record) {
	if len(r.PageCache) == 0 {
		return
	}
	fmt.Fprintf(w, "\nPage cache (4 KiB pages; hit ratio: pages read from the cache / pages read, FUSE READs being the misses):\n")
	rows := [][]string{{"MOUNT", "READS", "READ_PAGES", "ADDED", "REMOVED", "RA_SYNC", "RA_ASYNC", "RA_PAGES", "HIT_RATIO"}}
	for _, pc := range r.PageCache {
		mount := pc.Mount
		if mount == "" {
			mount = fmt.Sprintf("conn %d", pc.Conn)
		}
		ratio := "-"
		if v, ok := r.PageCacheHitRatio(pc); ok {
			ratio = fmt.Sprintf("%.3f", v)
		}
		ra := []string{fmt.Sprint(pc.ReadaheadSync), fmt.Sprint(pc.ReadaheadAsync), fmt.Sprint(pc.ReadaheadPages)}
		if pc.NoReadahead {
			ra = []string{"-", "-", "-"} // not measured: no readahead tracepoints
		}
		rows = append(rows, append(append([]string{Name(mount), fmt.Sprint(pc.Reads), fmt.Sprint(pc.ReadPages), fmt.Sprint(pc.Added), fmt.Sprint(pc.Removed)},
			ra...), ratio))
	}
	Columns(w, rows, "lr")
}

// writeFiles lists the files with the most FUSE time (trace --files), as
// the table lists opcodes.
func writeFiles(w io.Writer, r *profile.Record, unit hist.Unit) {
	if len(r.Files) == 0 {
		return
	}
	u := shortUnit(unit)
	fmt.Fprintf(w, "\nFiles by FUSE time (the requests about each node; ? where its name was looked up before the trace):\n")
	rows := [][]string{{"MOUNT", "FILE", "NODEID", "COUNT", "ERRORS", "TOTAL(" + u + ")", "AVG(" + u + ")", "MAX(" + u + ")"}}
	for _, f := range r.Files {
		mount := f.Mount
		if mount == "" {
			mount = fmt.Sprintf("conn %d", f.Conn)
		}
		path := Name(f.Path)
		if path == "" {
			path = "?"
		}
		rows = append(rows, []string{Name(mount), path, fmt.Sprint(f.Node), fmt.Sprint(f.Count), fmt.Sprint(f.Errors),
			inUnit(float64(f.Total.Nanoseconds()), unit), inUnit(float64(f.Total.Nanoseconds())/float64(f.Count), unit),
			inUnit(float64(f.Max.Nanoseconds()), unit)})
	}
	Columns(w, rows, "llr")
}

// writeHung lists the requests in flight beyond trace --hung, oldest first.
func writeHung(w io.Writer, r *profile.Record, unit hist.Unit) {
	if len(r.Hung) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%d requests in flight beyond --hung (the daemon has not answered them):\n", len(r.Hung))
	rows := [][]string{{"MOUNT", "OP", "AGE(" + shortUnit(unit) + ")", "STAGE", "PID", "COMM"}}
	for _, h := range r.Hung {
		mount := h.Mount
		if mount == "" {
			mount = fmt.Sprintf("conn %d", h.Conn)
		}
		stage := h.Stage
		switch stage {
		case "":
			stage = "-" // without --stages: queued or with the daemon
		case "daemon":
			stage = "with daemon"
		}
		comm := h.Comm
		if comm == "" {
			comm = "?"
		}
		rows = append(rows, []string{Name(mount), h.Op, inUnit(float64(h.Age.Nanoseconds()), unit), stage, fmt.Sprint(h.PID), Name(comm)})
	}
	Columns(w, rows, "llrlrl")
}

func mountLabel(m profile.Mount) string {
	if m.MountPoint != "" {
		return m.MountPoint
	}
	return fmt.Sprintf("conn %d", m.Conn)
}

// lateWatch is how long after the trace's start a daemon must have been
// found for the notes to say it started late (the first scan takes a
// moment).
const lateWatch = 500 * time.Millisecond

func writeDrops(w io.Writer, d profile.Drops) {
	var parts []string
	add := func(n uint64, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(d.InflightFull, "requests not timed (both in-flight slots busy)")
	add(d.StatsFull, "requests not counted (statistics table full)")
	add(d.ReapedConnGone, "requests that will never end (their connection is gone)")
	add(d.ReapedStale, "requests in flight beyond the reap age (given up)")
	add(d.UniqueZero, "requests without an id (kernel before 6.18)")
	add(d.ErrnoFull, "errors not broken down by errno (table full)")
	add(d.UnmatchedEnd, "replies to requests sent before tracing began")
	add(d.StagesFull, "requests not split into stages (stage table full)")
	add(d.NodesFull, "requests not summed by file (file table full)")
	if len(parts) > 0 {
		fmt.Fprintf(w, "\nNot in the statistics: %s.\n", strings.Join(parts, "; "))
	}
}

// WriteConnections prints each traced mount with its fusectl counters.
func WriteConnections(w io.Writer, r *profile.Record) {
	for _, m := range r.Meta.Mounts {
		if m.Connection == nil {
			continue
		}
		if m.Connection.Aborted {
			fmt.Fprintf(w, "conn %d %s (%s): aborted (its daemon died, or it was aborted through fusectl), waiting %d\n",
				m.Conn, Name(m.MountPoint), Name(m.FSType), m.Connection.Waiting)
			continue
		}
		fmt.Fprintf(w, "conn %d %s (%s): waiting %d, max_background %d, congestion_threshold %d%s%s\n",
			m.Conn, Name(m.MountPoint), Name(m.FSType), m.Connection.Waiting, m.Connection.MaxBackground, m.Connection.CongestionThreshold,
			daemons(m.Daemons), transport(r, m.Conn))
	}
}

// transport says which transport carried a connection's requests where
// the kernel had FUSE over io_uring enabled or the ring carried some:
// "; transport io_uring (37 of 37 requests)", "; transport /dev/fuse".
// Otherwise every request was /dev/fuse's, and nothing is said.
func transport(r *profile.Record, conn uint32) string {
	name, ring, all := r.Profile.Transport(conn)
	switch {
	case name == "" || (ring == 0 && !r.Meta.FuseURing):
		return ""
	case ring == 0:
		return "; transport " + name
	}
	return fmt.Sprintf("; transport %s (%d of %d requests over the ring)", name, ring, all)
}

// daemons names the processes serving a connection: "; daemon 4242
// sshfs", "; daemons 7 passthrough_hp (4 fds), 9 helper".
func daemons(ds []profile.Daemon) string {
	if len(ds) == 0 {
		return ""
	}
	var parts []string
	for _, d := range ds {
		p := fmt.Sprintf("%d %s", d.PID, Name(d.Comm))
		if d.FDs > 1 {
			p += fmt.Sprintf(" (%d fds)", d.FDs)
		}
		parts = append(parts, p)
	}
	if len(ds) == 1 {
		return "; daemon " + parts[0]
	}
	return "; daemons " + strings.Join(parts, ", ")
}

func shortUnit(u hist.Unit) string {
	switch u.Divisor {
	case 1:
		return "ns"
	case 1000:
		return "us"
	case 1000000:
		return "ms"
	}
	return u.Name
}

func inUnit(ns float64, u hist.Unit) string {
	v := ns / float64(u.Divisor)
	switch {
	case u.Divisor == 1 || v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// Bytes formats a byte count with binary prefixes, as ls -h does.
func Bytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%c", float64(n)/float64(div), "KMGTPE"[exp])
}

// WriteFSInfo prints what the lab file system says about itself: its
// configuration, what the kernel negotiated, and its instrumentation's cost.
func WriteFSInfo(w io.Writer, r *profile.Record) {
	fs := r.Meta.FS
	if fs == nil {
		return
	}
	fmt.Fprintf(w, "lab file system %s -> %s (conn %d)\n", Name(fs.Source), Name(r.Label(firstConn(r))), firstConn(r))
	// The flags are over the default preset, or over the one their first
	// flag names (docs/record.md).
	preset, flags := "default", fs.Flags
	if len(flags) > 0 && strings.HasPrefix(flags[0], "--preset=") {
		preset, flags = strings.TrimPrefix(flags[0], "--preset="), flags[1:]
	}
	switch {
	case fs.Flags != nil && len(flags) == 0:
		fmt.Fprintf(w, "  config: the %s preset\n", preset)
	case fs.Flags != nil:
		fmt.Fprintf(w, "  config: the %s preset with %s\n", preset, strings.Join(flags, " "))
	default: // a record from before flags were saved
		var cfg bytes.Buffer
		if json.Compact(&cfg, fs.Config) != nil {
			cfg.Write(fs.Config)
		}
		fmt.Fprintf(w, "  config: %s\n", cfg.String())
	}
	fmt.Fprintf(w, "  negotiated INIT flags: %s\n", strings.Join(fs.Negotiated, " "))
	fmt.Fprintf(w, "  kernel offered, not requested: %s\n", strings.Join(minus(fs.Offered, fs.Negotiated), " "))
	fmt.Fprintf(w, "  max_write %s, max_pages %d, max_readahead %s, max_background %d, congestion_threshold %d\n",
		Bytes(uint64(fs.MaxWrite)), fs.MaxPages, Bytes(uint64(fs.MaxReadahead)), fs.MaxBackground, fs.Congestion)
	WriteFSCounters(w, r)
}

// WriteFSCounters writes the lines of WriteFSInfo that change as the daemon
// serves: requests, the heap and the user-space features' counters. An
// interval view (fs stats MNT INTERVAL) prints them alone after its first
// report.
func WriteFSCounters(w io.Writer, r *profile.Record) {
	fs := r.Meta.FS
	if fs == nil {
		return
	}
	fmt.Fprintf(w, "  requests served %d, timer overhead %.0f ns per request, heap %s\n", fs.Requests, fs.TimerNs, Bytes(fs.HeapBytes))
	if len(fs.Counters) > 0 {
		fmt.Fprintf(w, "  %s\n", countList(fs.Counters))
	}
}

// countList renders named counts sorted by name: "EIO 1, ENOENT 3".
func countList(m map[string]uint64) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func firstConn(r *profile.Record) uint32 {
	if len(r.Meta.Mounts) > 0 {
		return r.Meta.Mounts[0].Conn
	}
	return 0
}

func minus(a, b []string) []string {
	drop := map[string]bool{}
	for _, s := range b {
		drop[s] = true
	}
	var out []string
	for _, s := range a {
		if !drop[s] {
			out = append(out, s)
		}
	}
	return out
}
