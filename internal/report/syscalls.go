package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
)

// SyscallsCSVColumns are the columns of each table --csv can write
// (docs/syscalls.md), by table name; columns are only ever appended.
var SyscallsCSVColumns = map[string][]string{
	"syscalls":   {"syscall", "category", "calls", "errors", "time_s", "pct_time"},
	"files":      {"target", "kind", "opens", "reads", "bytes_read", "writes", "bytes_written", "calls", "time_s"},
	"categories": {"category", "calls", "time_s", "pct_time"},
	"waits":      {"pid", "line", "start", "syscall", "dur_s", "errno", "target"},
	"processes":  {"pid", "parent", "exec", "start", "end", "exit", "killed_by", "calls", "threads"},
	"timeline":   {"start_s", "category", "calls", "time_s"},
	"errnos":     {"syscall", "errno", "calls"},
}

// SyscallsCSVTables lists SyscallsCSVColumns' tables, the default first.
var SyscallsCSVTables = []string{"syscalls", "files", "categories", "waits", "processes", "timeline", "errnos"}

// WriteSyscallsCSV writes one row per system call.
func WriteSyscallsCSV(w io.Writer, r *profile.SyscallReport) error {
	return WriteSyscallsCSVTable(w, r, "syscalls")
}

// WriteSyscallsCSVTable writes one of the report's tables as CSV, every row: the
// text's --top does not apply.
func WriteSyscallsCSVTable(w io.Writer, r *profile.SyscallReport, table string) error {
	cols, ok := SyscallsCSVColumns[table]
	if !ok {
		return fmt.Errorf("no CSV table %q: give one of %s", table, strings.Join(SyscallsCSVTables, ", "))
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) }
	n := strconv.Itoa
	cw := csv.NewWriter(w)
	cw.Write(cols)
	switch table {
	case "syscalls":
		for _, s := range r.Syscalls {
			cw.Write([]string{s.Name, s.Category, n(s.Calls), n(s.Errors), f(s.TimeS), strconv.FormatFloat(pct(s.TimeS, r.TotalTime), 'f', 2, 64)})
		}
	case "files":
		for _, x := range r.Files {
			cw.Write([]string{x.Target, x.Kind, n(x.Opens), n(x.Reads), strconv.FormatInt(x.BytesRead, 10), n(x.Writes),
				strconv.FormatInt(x.BytesWritten, 10), n(x.Calls), f(x.TimeS)})
		}
	case "categories":
		for _, c := range r.Categories {
			cw.Write([]string{c.Category, n(c.Calls), f(c.TimeS), strconv.FormatFloat(pct(c.TimeS, r.TotalTime), 'f', 2, 64)})
		}
	case "waits":
		for _, x := range r.Waits {
			line := ""
			if x.Line > 0 {
				line = n(x.Line)
			}
			cw.Write([]string{n(x.PID), line, f(x.Start), x.Name, f(x.DurS), x.Errno, x.Target})
		}
	case "processes":
		for _, p := range r.Processes {
			parent, exit := "", ""
			if p.Parent != 0 {
				parent = n(p.Parent)
			}
			if p.Exit != nil {
				exit = n(*p.Exit)
			}
			cw.Write([]string{n(p.PID), parent, p.Exec, f(p.Start), f(p.End), exit, p.Killed, n(p.Calls), n(max(p.Threads, 1))})
		}
	case "errnos":
		for _, x := range r.Errnos {
			cw.Write([]string{x.Syscall, x.Errno, n(x.Calls)})
		}
	case "timeline":
		for _, b := range r.Timeline {
			for _, c := range profile.SyscallCategories { // every one, so that idle bins show
				cw.Write([]string{f(b.Start), c, n(b.Calls[c]), f(b.TimeS[c])})
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

func pct(v, total float64) float64 {
	if total <= 0 {
		return 0
	}
	return 100 * v / total
}

// WriteSyscallsText renders a system-call report as terminal tables; top limits each list.
func WriteSyscallsText(w io.Writer, r *profile.SyscallReport, top int) error {
	var b strings.Builder
	if l := r.Live; l != nil {
		what := fmt.Sprintf("process %d", l.PID)
		if len(l.Command) > 0 {
			what = strconv.Quote(strings.Join(l.Command, " "))
		}
		if len(l.Command) > 0 && l.CommandS > 0 {
			// The command's own run, from exec to exit; loading and
			// attaching the probes before it apart.
			fmt.Fprintf(&b, "live trace of %s: %s, %.3f s traced (set-up %.3f s before it", what,
				plural(len(r.Processes), "process", "processes"), l.CommandS, l.SetupS)
			if l.LoadedBy != "" {
				fmt.Fprintf(&b, ", on the programs of %s", l.LoadedBy)
			}
			b.WriteString(")")
		} else {
			fmt.Fprintf(&b, "live trace of %s: %s, %.3f s traced", what, plural(len(r.Processes), "process", "processes"), l.WallS)
		}
		if l.ExitStatus != nil {
			fmt.Fprintf(&b, ", exit status %d", *l.ExitStatus)
		}
		if l.KilledBy != "" {
			fmt.Fprintf(&b, ", killed by %s", l.KilledBy)
		}
	} else {
		fmt.Fprintf(&b, "%d lines, %d events, %s", r.Lines, r.Events, plural(len(r.Processes), "process", "processes"))
	}
	if r.Span > 0 && r.Live == nil {
		fmt.Fprintf(&b, ", %.3f s traced", r.Span)
	}
	if r.HasDuration {
		fmt.Fprintf(&b, ", %.3f s in system calls", r.TotalTime)
	}
	b.WriteString("\n")
	if r.Filter != nil {
		fmt.Fprintf(&b, "Kept only: %s\n", r.Filter.Flags())
	}
	if r.Malformed > 0 && len(r.FirstBad) > 0 {
		first := r.FirstBad[0]
		where := "line " + strconv.Itoa(first.Line)
		if first.File != "" {
			where = first.File + ":" + strconv.Itoa(first.Line)
		}
		fmt.Fprintf(&b, "%d malformed lines skipped, first at %s: %s\n", r.Malformed, where, first.Why)
	}
	if r.Unfinished > 0 {
		fmt.Fprintf(&b, "%d calls never finished (process killed, or the log was cut)\n", r.Unfinished)
	}
	if r.Live != nil {
		for _, k := range sortedKeys(r.Live.Drops) {
			fmt.Fprintf(&b, "live source: %d %s\n", r.Live.Drops[k], k)
		}
	}
	if r.Live != nil && len(r.Syscalls) == 0 && len(r.Files) == 0 && len(r.Waits) == 0 {
		// A -p process blocked in one call for the whole trace: a call in
		// progress at attach is not seen, nor are children started before.
		if r.Filter != nil {
			b.WriteString("No system call that was traced matches the filters.\n")
		} else {
			b.WriteString("No system call was traced: the process made none that started and ended while traced, and its children started before tracing are not followed (trace them with -p too).\n")
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	if !r.HasDuration {
		b.WriteString("No call durations in this log: record it with strace -T for times.\n")
	}

	b.WriteString("\nTime per category\n")
	rows := [][]string{{"CATEGORY", "CALLS", "TIME(s)", "PCT_TIME"}}
	for _, c := range r.Categories {
		rows = append(rows, cells("%s\t%d\t%.6f\t%.1f", c.Category, c.Calls, c.TimeS, pct(c.TimeS, r.TotalTime)))
	}
	Columns(&b, rows, "lr")

	b.WriteString("\nHot spots: system calls by total time\n")
	rows = [][]string{{"SYSCALL", "CATEGORY", "CALLS", "ERRORS", "TIME(s)", "PCT_TIME"}}
	for i, s := range r.Syscalls {
		if top > 0 && i >= top {
			break
		}
		rows = append(rows, cells("%s\t%s\t%d\t%d\t%.6f\t%.1f", s.Name, s.Category, s.Calls, s.Errors, s.TimeS, pct(s.TimeS, r.TotalTime)))
	}
	Columns(&b, rows, "llr")

	if len(r.Errnos) > 0 {
		b.WriteString("\nFailed calls by errno\n")
		rows := [][]string{{"SYSCALL", "ERRNO", "CALLS"}}
		for i, x := range r.Errnos {
			if top > 0 && i >= top {
				break
			}
			rows = append(rows, cells("%s\t%s\t%d", x.Syscall, Name(x.Errno), x.Calls))
		}
		Columns(&b, rows, "llr")
	}

	if len(r.Files) > 0 {
		b.WriteString("\nFiles, sockets and pipes by time")
		switch {
		case r.FollowedFDs:
			b.WriteString(" (a log without -y: fds followed from the calls that made them)")
		case r.Live == nil:
			b.WriteString(" (strace -y targets)")
		}
		b.WriteString("\n")
		// MISSING: lookups that failed with ENOENT (a search path's
		// probes), shown when there are any.
		missing := false
		for _, f := range r.Files {
			missing = missing || f.Missing > 0
		}
		rows := [][]string{{"KIND", "OPENS", "READS", "BYTES_READ", "WRITES", "BYTES_WRITTEN", "TIME(s)", "TARGET"}}
		align := "lrrrrrrl"
		if missing {
			rows[0] = slices.Insert(rows[0], 6, "MISSING")
			align = "lrrrrrrrl"
		}
		for i, f := range r.Files {
			if top > 0 && i >= top {
				break
			}
			row := cells("%s\t%d\t%d\t%d\t%d\t%d\t%.6f\t%s", f.Kind, f.Opens, f.Reads, f.BytesRead, f.Writes, f.BytesWritten, f.TimeS, Name(f.Target))
			if missing {
				row = slices.Insert(row, 6, strconv.Itoa(f.Missing))
			}
			rows = append(rows, row)
		}
		Columns(&b, rows, align)
	}
	if len(r.Waits) > 0 {
		b.WriteString("\nLongest waits (blocking calls")
		if r.Live != nil && r.Live.MinWaitS > 0 {
			fmt.Fprintf(&b, " of at least %v", time.Duration(r.Live.MinWaitS*1e9))
		}
		b.WriteString(")\n")
		// A log's waits are found by line; a live trace has no lines.
		where := "LINE"
		if r.Live != nil {
			where = "TIME"
		}
		rows := [][]string{{"PID", where, "SYSCALL", "DUR(s)", "ERRNO", "TARGET"}}
		for i, wt := range r.Waits {
			if top > 0 && i >= top {
				break
			}
			at := strconv.Itoa(wt.Line)
			if r.Live != nil {
				// Time of day, as strace -tt prints it.
				sec, frac := math.Modf(wt.Start)
				at = time.Unix(int64(sec), int64(frac*1e9)).Format("15:04:05.000000")
			}
			rows = append(rows, cells("%d\t%s\t%s\t%.6f\t%s\t%s", wt.PID, at, wt.Name, wt.DurS, Name(wt.Errno), Name(wt.Target)))
		}
		Columns(&b, rows, "rrlrll")
	}
	writeWaitGroups(&b, r, top)
	writeCriticalPath(&b, r, top)
	writeLanes(&b, r, top)
	if len(r.Timeline) > 0 {
		fmt.Fprintf(&b, "\nTimeline (%.3g s bins): calls per category\n", r.TimelineBinS)
		cats := profile.SyscallCategories
		rows := [][]string{append(append([]string{"START(s)"}, cats...), "TIME(s)")}
		for _, bin := range r.Timeline {
			row := []string{fmt.Sprintf("%.3f", bin.Start)}
			total := 0.0
			for _, c := range cats {
				row = append(row, strconv.Itoa(bin.Calls[c]))
				total += bin.TimeS[c]
			}
			rows = append(rows, append(row, fmt.Sprintf("%.6f", total)))
		}
		Columns(&b, rows, "r")
		if r.TimelineDropped > 0 {
			fmt.Fprintf(&b, "%d calls fell past the timeline's %d bins and are not in it: give a wider --timeline\n", r.TimelineDropped, profile.MaxTimelineBins)
		}
	}
	if len(r.Processes) > 1 || (len(r.Processes) == 1 && r.Processes[0].Threads > 1) {
		children := map[int][]profile.Process{}
		known := map[int]bool{}
		for _, p := range r.Processes {
			known[p.PID] = true
		}
		b.WriteString("\nProcess tree")
		if top > 0 && len(known) > top {
			// A build's trace has thousands: the first ones in tree order,
			// as every other list shows its first --top rows.
			fmt.Fprintf(&b, " (the first %d of %d processes)", top, len(known))
		}
		b.WriteString("\n")
		var roots []profile.Process
		for _, p := range r.Processes {
			if p.Parent != 0 && known[p.Parent] {
				children[p.Parent] = append(children[p.Parent], p)
			} else {
				roots = append(roots, p)
			}
		}
		// A report read back from JSON may repeat a PID (an edited file):
		// each is printed once, so a PID that is its own ancestor cannot
		// recurse.
		printed := map[int]bool{}
		var walk func(p profile.Process, depth int)
		walk = func(p profile.Process, depth int) {
			if printed[p.PID] || (top > 0 && len(printed) >= top) {
				return
			}
			printed[p.PID] = true
			status := "running at end of log"
			if r.Live != nil {
				status = "running at end of trace"
			}
			switch {
			case p.Exit != nil:
				status = fmt.Sprintf("exited %d", *p.Exit)
			case p.Killed != "":
				status = "killed by " + p.Killed
			}
			exec := Name(p.Exec)
			if exec == "" {
				exec = "(no exec seen)"
			}
			threads := ""
			if p.Threads > 1 {
				threads = fmt.Sprintf(", %d threads", p.Threads)
			}
			if len(p.Execs) > 0 {
				chain := make([]string, len(p.Execs))
				for i, x := range p.Execs {
					chain[i] = commandLine(x)
				}
				exec = strings.Join(chain, " -> ")
			}
			fmt.Fprintf(&b, "%s%d %s (%d calls%s, %.3f s: %.3f s in calls, %.3f s outside%s, %s)\n", strings.Repeat("  ", depth), p.PID, exec,
				p.Calls, threads, p.End-p.Start, p.SyscallS, p.OutsideS, cpuTimes(p), status)
			for _, c := range children[p.PID] {
				walk(c, depth+1)
			}
		}
		for _, p := range roots {
			walk(p, 0)
		}
		if hidden := len(known) - len(printed); top > 0 && hidden > 0 {
			what := "processes"
			if hidden == 1 {
				what = "process"
			}
			fmt.Fprintf(&b, "... %d more %s (--top 0 shows all)\n", hidden, what)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// commandLine is a program run as its arguments show it (the program's
// path when it had none), each name quoted where it must be, cut at 100
// characters.
func commandLine(x profile.ExecStep) string {
	args := x.Args
	if len(args) == 0 {
		args = []string{x.Program}
	}
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = Name(a)
	}
	line := strings.Join(q, " ")
	if len(line) > 100 {
		line = line[:97] + "..."
	}
	return line
}

// cpuTimes is a live trace's CPU times of a process, from the kernel.
func cpuTimes(p profile.Process) string {
	if p.UserCPUS == 0 && p.SysCPUS == 0 {
		return ""
	}
	return fmt.Sprintf(", CPU %.3f s user %.3f s system", p.UserCPUS, p.SysCPUS)
}

// writeWaitGroups writes the blocking calls of at least the report's
// threshold, by call and target.
func writeWaitGroups(b *strings.Builder, r *profile.SyscallReport, top int) {
	if len(r.WaitGroups) == 0 {
		return
	}
	fmt.Fprintf(b, "\nWaits of at least %v, by call and target\n", time.Duration(r.WaitMinS*1e9))
	rows := [][]string{{"CALLS", "TIME(s)", "MAX(s)", "CALL", "TARGET"}}
	for i, g := range r.WaitGroups {
		if top > 0 && i >= top {
			break
		}
		rows = append(rows, cells("%d\t%.6f\t%.6f\t%s\t%s", g.Calls, g.TimeS, g.MaxS, g.Name, Name(g.Target)))
	}
	Columns(b, rows, "rrrll")
}

// writeCriticalPath writes what the root process's run was made of: the
// top items, then the path itself (its first --top x 5 steps).
func writeCriticalPath(b *strings.Builder, r *profile.SyscallReport, top int) {
	if len(r.CriticalPath) == 0 {
		return
	}
	root := r.CriticalPath[0]
	total := 0.0
	for _, st := range r.CriticalPath {
		if st.Depth == 0 {
			total += st.DurS
		}
	}
	fmt.Fprintf(b, "\nCritical path of %d (%.3f s): where the time went\n", root.PID, total)
	rows := [][]string{{"TIME(s)", "SHARE", "WHAT"}}
	for i, it := range r.CriticalTop {
		if top > 0 && i >= top {
			break
		}
		what := "outside waits in " + Name(it.Program)
		if it.Program == "" && it.Kind == "outside" {
			what = "outside waits (before an exec)"
		}
		if it.Kind == "wait" {
			what = it.Name + " " + Name(it.Target)
		}
		rows = append(rows, cells("%.6f\t%.1f%%\t%s", it.DurS, 100*it.Share, what))
	}
	Columns(b, rows, "rrl")
	b.WriteString("Steps (START: seconds after the root's start):\n")
	rows = [][]string{{"START(s)", "TIME(s)", "STEP"}}
	limit := 5 * top
	for i, st := range r.CriticalPath {
		if top > 0 && i >= limit {
			break
		}
		var what string
		switch st.Kind {
		case "exec":
			prog := commandLine(profile.ExecStep{Program: st.Program, Args: st.Args})
			if st.Program == "" {
				prog = "(forked, before its exec)"
			}
			what = fmt.Sprintf("%d %s", st.PID, prog)
		case "wait":
			what = st.Name + " " + Name(st.Target)
		default:
			what = "outside waits (in all)"
		}
		rows = append(rows, []string{fmt.Sprintf("%.6f", st.Start-root.Start), fmt.Sprintf("%.6f", st.DurS), strings.Repeat("  ", st.Depth) + what})
	}
	Columns(b, rows, "rrl")
	if top > 0 && len(r.CriticalPath) > limit {
		fmt.Fprintf(b, "... %d more steps (--top 0 shows all)\n", len(r.CriticalPath)-limit)
	}
}

// laneWidth is the columns of the process timeline's lanes.
const laneWidth = 60

// writeLanes draws each process's life on one lane, in the order it
// started (the first --top): = running, ~ in a call of at least the wait
// threshold, | an exec, x its exit.
func writeLanes(b *strings.Builder, r *profile.SyscallReport, top int) {
	var procs []profile.Process
	start, end := 0.0, 0.0
	for _, p := range r.Processes {
		if p.PID == -1 || p.End <= p.Start {
			continue
		}
		if len(procs) == 0 || p.Start < start {
			start = p.Start
		}
		end = max(end, p.End)
		procs = append(procs, p)
	}
	if len(procs) < 1 || end <= start {
		return
	}
	sort.SliceStable(procs, func(i, j int) bool { return procs[i].Start < procs[j].Start })
	col := func(t float64) int {
		return min(laneWidth-1, max(0, int((t-start)/(end-start)*laneWidth+1e-9))) // 0.1/0.6*60 is 9.999...
	}
	fmt.Fprintf(b, "\nProcess timeline (%.3f s, %.3g ms a column; = running, ~ a call of at least %v, | exec, x exit)\n",
		end-start, 1000*(end-start)/laneWidth, time.Duration(r.WaitMinS*1e9))
	rows := [][]string{{"PID", "PROGRAM", "LANE"}}
	for i, p := range procs {
		if top > 0 && i >= top {
			break
		}
		lane := []byte(strings.Repeat(" ", laneWidth))
		for c := col(p.Start); c <= col(p.End); c++ {
			lane[c] = '='
		}
		for _, s := range p.Blocked {
			for c := col(s.Start); c <= col(s.Start+s.DurS); c++ {
				lane[c] = '~'
			}
		}
		for _, x := range p.Execs {
			lane[col(x.Start)] = '|'
		}
		if p.Exit != nil || p.Killed != "" {
			lane[col(p.End)] = 'x'
		}
		name := path.Base(p.Exec)
		if p.Exec == "" {
			name = "?"
		}
		rows = append(rows, []string{strconv.Itoa(p.PID), Name(name), "[" + string(lane) + "]"})
	}
	Columns(b, rows, "rll")
	if top > 0 && len(procs) > top {
		fmt.Fprintf(b, "... %d more processes (--top 0 shows all)\n", len(procs)-top)
	}
}

// WriteStraceSummary writes the per-call table as strace -c prints it
// (strace 6.x): % time, seconds, usecs/call, calls, errors, syscall, most
// time first, and the total.
func WriteStraceSummary(w io.Writer, r *profile.SyscallReport) error {
	var b strings.Builder
	total, calls, errs := 0.0, 0, 0
	for _, s := range r.Syscalls {
		total += s.TimeS
		calls += s.Calls
		errs += s.Errors
	}
	rows := slices.Clone(r.Syscalls)
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].TimeS != rows[j].TimeS {
			return rows[i].TimeS > rows[j].TimeS
		}
		return rows[i].Calls > rows[j].Calls
	})
	line := "------ ----------- ----------- --------- --------- ----------------\n"
	b.WriteString("% time     seconds  usecs/call     calls    errors syscall\n" + line)
	row := func(pct, secs float64, calls, errs int, name string) {
		per := 0
		if calls > 0 {
			per = int(secs * 1e6 / float64(calls))
		}
		e := ""
		if errs > 0 {
			e = strconv.Itoa(errs)
		}
		fmt.Fprintf(&b, "%6.2f %11.6f %11d %9d %9s %s\n", pct, secs, per, calls, e, name)
	}
	for _, s := range rows {
		pct := 0.0
		if total > 0 {
			pct = 100 * s.TimeS / total
		}
		row(pct, s.TimeS, s.Calls, s.Errors, s.Name)
	}
	b.WriteString(line)
	row(100, total, calls, errs, "total")
	_, err := io.WriteString(w, b.String())
	return err
}

func sortedKeys(m map[string]uint64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// cells formats one table row: format holds one verb per cell, separated
// by tabs, and each verb takes one argument.
func cells(format string, args ...any) []string {
	verbs := strings.Split(format, "\t")
	row := make([]string, len(verbs))
	for i, v := range verbs {
		row[i] = fmt.Sprintf(v, args[i])
	}
	return row
}
