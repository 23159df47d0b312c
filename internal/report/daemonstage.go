package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
)

// DaemonStageColumns are the columns of the daemon stage by function's
// CSV (ufunc --stages --csv, show --csv --table daemon-stage): one row per
// function per connection and opcode, the opcode's figures repeated on
// each (an opcode no function's call fell in has one row, func empty).
// Times are nanoseconds; new columns are only ever appended.
var DaemonStageColumns = []string{"end_time", "conn", "op", "requests", "held_ns", "in_functions_ns", "unaccounted_ns", "func", "calls", "func_ns"}

// WriteDaemonStageText renders the daemon stage by function: per
// connection and opcode, the daemon's time with the requests, each
// function's share of it, and what no function accounts for.
func WriteDaemonStageText(w io.Writer, r *profile.Record, unit hist.Unit) error {
	fn := FunctionsOf(r)
	if fn == nil || fn.DaemonStage == nil {
		return nil
	}
	if unit.Divisor == 0 {
		unit = hist.Usecs
	}
	var b strings.Builder
	b.WriteString("Daemon stage by function (a call that begins while the daemon holds a request counts for it, up to the reply):\n")
	if len(fn.DaemonStage) == 0 {
		b.WriteString("No request was held by the daemon's threads in this window.\n")
	}
	width := len("(unaccounted for)")
	for _, s := range fn.DaemonStage {
		for _, f := range s.Functions {
			width = max(width, len(Name(f.Name)))
		}
	}
	t := func(ns uint64) string {
		return fmt.Sprintf("%.3f", float64(ns)/float64(unit.Divisor))
	}
	share := func(ns, of uint64) string {
		if of == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(ns)/float64(of))
	}
	for _, s := range fn.DaemonStage {
		fmt.Fprintf(&b, "\nconn %d %s: %d requests held %s %s", s.Conn, s.Op, s.Requests, t(s.HeldNs), unit.Name)
		if s.Requests > 0 {
			fmt.Fprintf(&b, " (%s %s each)", t(s.HeldNs/s.Requests), unit.Name)
		}
		fmt.Fprintf(&b, ", %s inside the functions\n", share(min(s.InFunctionsNs, s.HeldNs), s.HeldNs))
		fmt.Fprintf(&b, "  %-*s %10s %14s %7s\n", width, "FUNC", "CALLS", "TIME("+unit.Name+")", "SHARE")
		for _, f := range s.Functions {
			fmt.Fprintf(&b, "  %-*s %10d %14s %7s\n", width, Name(f.Name), f.Calls, t(f.Ns), share(f.Ns, s.HeldNs))
		}
		fmt.Fprintf(&b, "  %-*s %10s %14s %7s\n", width, "(unaccounted for)", "", t(s.UnaccountedNs()), share(s.UnaccountedNs(), s.HeldNs))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteDaemonStageCSV writes the daemon stage by function's rows, after
// a header line if header is true.
func WriteDaemonStageCSV(w io.Writer, r *profile.Record, header bool) error {
	cw := csv.NewWriter(w)
	if header {
		if err := cw.Write(DaemonStageColumns); err != nil {
			return err
		}
	}
	end := r.Meta.End.UTC().Format(time.RFC3339Nano)
	if fn := FunctionsOf(r); fn != nil {
		for _, s := range fn.DaemonStage {
			row := []string{end, u(uint64(s.Conn)), s.Op, u(s.Requests), u(s.HeldNs), u(s.InFunctionsNs), u(s.UnaccountedNs()), "", "", ""}
			if len(s.Functions) == 0 {
				if err := cw.Write(row); err != nil {
					return err
				}
			}
			for _, f := range s.Functions {
				copy(row[7:], []string{csvName(f.Name), u(f.Calls), u(f.Ns)})
				if err := cw.Write(row); err != nil {
					return err
				}
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
