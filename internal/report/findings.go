package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"strings"

	"github.com/fusescope/fusescope/internal/profile"
)

// WriteFindingsText writes fusescope doctor's findings: worst first, each
// with its evidence, cause, fix and expected gain; then the rules that
// could not decide, and what they need.
func WriteFindingsText(w io.Writer, rec *profile.Record) {
	f := rec.Findings
	if f == nil {
		return
	}
	mounts := map[string]bool{}
	for _, x := range f.Findings {
		mounts[x.Mount] = true
	}
	switch len(f.Findings) {
	case 0:
		fmt.Fprintf(w, "doctor: no anti-pattern found by %d rules on %s.\n", len(f.Rules), traced(rec))
	default:
		fmt.Fprintf(w, "doctor: %s on %s, worst first (%d rules):\n", plural(len(f.Findings), "finding", "findings"), traced(rec), len(f.Rules))
	}
	for i, x := range f.Findings {
		where := Name(x.Mount)
		if x.Mount == "" {
			where = fmt.Sprintf("conn %d", x.Conn)
		}
		fmt.Fprintf(w, "\n%d. %s [%s] on %s\n", i+1, x.Title, x.Rule, where)
		block(w, "evidence", x.Evidence)
		block(w, "cause", []string{x.Cause})
		block(w, "fix", x.Fix)
		block(w, "gain", []string{x.Gain})
	}
	if len(f.Undecided) > 0 {
		fmt.Fprintf(w, "\nUndecided: the record lacks what these rules read\n")
		for _, u := range f.Undecided {
			fmt.Fprintf(w, "  %-16s %s: %s\n", u.Rule, u.Missing, u.Record)
		}
	}
}

// traced says over what the rules ran.
func traced(rec *profile.Record) string {
	switch n := len(rec.Meta.Mounts); n {
	case 0:
		return "no FUSE mount"
	case 1:
		return Name(rec.Label(rec.Meta.Mounts[0].Conn))
	default:
		return fmt.Sprintf("%d FUSE mounts", n)
	}
}

func block(w io.Writer, label string, lines []string) {
	for i, l := range lines {
		l = printable(l)
		if i == 0 {
			fmt.Fprintf(w, "   %-9s %s\n", label+":", l)
		} else {
			fmt.Fprintf(w, "   %-9s %s\n", "", l)
		}
	}
}

// FindingsCSVHeader are the columns of the findings' CSV table.
var FindingsCSVHeader = []string{"rule", "conn", "mount_point", "title", "cost_ns", "evidence", "cause", "fix", "gain"}

// findingsRows are the findings as CSV rows; multi-line fields are joined
// with " | ".
func findingsRows(f *profile.Findings) [][]string {
	var rows [][]string
	for _, x := range f.Findings {
		rows = append(rows, []string{x.Rule, fmt.Sprint(x.Conn), x.Mount, x.Title, fmt.Sprint(x.Cost),
			strings.Join(x.Evidence, " | "), x.Cause, strings.Join(x.Fix, " | "), x.Gain})
	}
	return rows
}

// WriteFindingsCSV writes the record's findings as a CSV table (show
// --csv --table findings), after a header line if header is true.
func WriteFindingsCSV(w io.Writer, rec *profile.Record, header bool) error {
	cw := csv.NewWriter(w)
	if header {
		if err := cw.Write(FindingsCSVHeader); err != nil {
			return err
		}
	}
	if rec.Findings != nil {
		for _, row := range findingsRows(rec.Findings) {
			row[2] = csvName(row[2])
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
