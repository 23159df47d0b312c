package report

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
)

// Format is how records are shown: text (histograms and the table, in
// Unit), JSON or CSV.
type Format struct {
	Unit       hist.Unit
	JSON, CSV  bool
	CountsOnly bool // counters only: no histograms, no latency columns
	NoHists    bool // the table without the histograms
}

// Renderer writes records in a Format; in interval mode it is called once
// per interval (CSV prints its header once, JSON one object per line).
type Renderer struct {
	Format Format
	W      io.Writer
	Stamp  bool // -T: a time line before each text report
	Slow   bool // show: a record's slow requests are printed (live, they were as they ended)
	Lines  bool // JSON: one compact object per line (interval mode)
	// FindingsOnly: text shows a record's findings and not its requests
	// (fusescope doctor; show prints both).
	FindingsOnly bool

	csvDone bool
	fsDone  bool // text: a lab daemon's configuration was printed
	textN   int  // text reports printed: from the second on, a blank line comes first, as in bcc
}

// Render writes one record.
func (r *Renderer) Render(rec *profile.Record) error {
	switch {
	case r.Format.JSON:
		if r.Lines {
			b, err := json.Marshal(rec)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(r.W, "%s\n", b)
			return err
		}
		return rec.Write(r.W)
	case r.Format.CSV && rec.Bench != nil:
		return WriteBenchCSV(r.W, rec.Bench)
	case r.Format.CSV && FunctionsOf(rec) != nil && !rec.HasRequests():
		err := WriteFunctionsCSV(r.W, rec, !r.csvDone)
		r.csvDone = true
		return err
	case r.Format.CSV:
		err := WriteCSV(r.W, rec, r.Format.CountsOnly, !r.csvDone)
		r.csvDone = true
		return err
	}
	if r.textN++; r.textN > 1 {
		fmt.Fprintln(r.W)
	}
	if r.Stamp {
		fmt.Fprintf(r.W, "%s\n", rec.Meta.End.Format("15:04:05"))
	}
	if rec.Meta.FS != nil {
		// The lab daemon's own record (fs stats): its configuration first,
		// then, in later intervals, what changed.
		if r.fsDone {
			WriteFSCounters(r.W, rec)
		} else {
			WriteFSInfo(r.W, rec)
		}
		r.fsDone = true
		fmt.Fprintln(r.W)
	}
	if rec.HasRequests() && !r.FindingsOnly {
		if err := WriteText(r.W, rec, TextOptions{Unit: r.Format.Unit, CountsOnly: r.Format.CountsOnly, NoHists: r.Format.NoHists, SlowLines: r.Slow}); err != nil {
			return err
		}
		WriteConnections(r.W, rec)
	}
	if rec.Findings != nil {
		if rec.HasRequests() && !r.FindingsOnly {
			fmt.Fprintln(r.W)
		}
		WriteFindingsText(r.W, rec)
	}
	if rec.Syscalls != nil {
		return WriteSyscallsText(r.W, rec.Syscalls, 10)
	}
	if rec.Bench != nil {
		return WriteBenchText(r.W, rec.Bench)
	}
	if FunctionsOf(rec) != nil {
		return WriteFunctionsText(r.W, rec, r.Format.Unit)
	}
	return nil
}
