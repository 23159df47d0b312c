package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fusescope/fusescope/internal/fuseproto"

	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
)

// FunctionColumns are the columns of a kernel-function record's CSV
// (fusescope kfunc --csv), documented in docs/record.md. Times are
// nanoseconds, empty for a function only counted; new columns are only
// ever appended.
var FunctionColumns = []string{"end_time", "func", "module", "count", "total_ns", "avg_ns", "min_ns", "p50_ns", "p99_ns", "max_ns", "arg", "value"}

// WriteFunctionsText renders a kernel-function record as bcc's funccount
// and libbpf-tools' funclatency do: a log2 histogram per timed function,
// with its average, total and count, then the counted functions and their
// calls, fewest first.
func WriteFunctionsText(w io.Writer, r *profile.Record, unit hist.Unit) error {
	if unit.Divisor == 0 {
		unit = hist.Usecs
	}
	fn := FunctionsOf(r)
	var b strings.Builder
	for i := range fn.Functions {
		f := &fn.Functions[i]
		if f.Latency == nil {
			continue
		}
		fmt.Fprintf(&b, "\nfunc = %s\n", Name(f.Name))
		h := f.Latency
		if err := h.WriteLog2(&b, unit); err != nil {
			return err
		}
		if h.Count > 0 {
			fmt.Fprintf(&b, "\navg = %d %s, total: %d %s, count: %d\n", uint64(h.Mean())/unit.Divisor, unit.Name, h.Sum/unit.Divisor, unit.Name, h.Count)
		}
	}
	if fn.Pattern != "" {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		width := 36 // funccount's column
		for _, f := range fn.Functions {
			width = max(width, len(Name(f.Name)))
		}
		fmt.Fprintf(&b, "%-*s %8s\n", width, "FUNC", "COUNT")
		for _, f := range fn.Functions {
			if f.Count > 0 {
				fmt.Fprintf(&b, "%-*s %8d\n", width, Name(f.Name), f.Count)
			}
		}
	} else if len(fn.Functions) == 0 {
		b.WriteString("No call of a timed function returned.\n")
	}
	for _, f := range fn.Functions {
		if len(f.Values) == 0 {
			continue
		}
		label := argLabel(f.Name, f.Arg)
		fmt.Fprintf(&b, "\n%s, argument %d%s:\n", Name(f.Name), f.Arg, map[bool]string{true: " (" + label + ")", false: ""}[label != ""])
		fmt.Fprintf(&b, "  %20s %10s\n", "VALUE", "COUNT")
		shown := f.Values[:min(len(f.Values), maxValuesShown)]
		for _, v := range shown {
			fmt.Fprintf(&b, "  %20d %10d", v.Value, v.Count)
			if name := argValueName(f.Name, f.Arg, v.Value); name != "" {
				fmt.Fprintf(&b, "  %s", name)
			}
			b.WriteString("\n")
		}
		if more := len(f.Values) - len(shown); more > 0 {
			fmt.Fprintf(&b, "  (%d more %s, the least hit: show --csv lists them all)\n", more, map[bool]string{true: "value", false: "values"}[more == 1])
		}
	}
	if fn.ValuesLost > 0 {
		fmt.Fprintf(&b, "\n%d hits' values were not kept: the table of values (16,384) was full.\n", fn.ValuesLost)
	}
	if fn.Skipped > 0 {
		if r.Meta.Filters.PID > 0 {
			fmt.Fprintf(&b, "\n%d calls were not seen, and are not counted: the kernel skipped the program while a run of it was preempted on that CPU, so whose calls they were is not known.\n", fn.Skipped)
		} else {
			fmt.Fprintf(&b, "\n%d calls were counted without their program: the kernel skipped it while a run of it was preempted on that CPU.\n", fn.Skipped)
		}
	}
	if fn.Missed > 0 {
		fmt.Fprintf(&b, "\n%d calls were not timed: the table of calls in progress (10,240) was full, or the kernel skipped the program while a run of it was preempted.\n", fn.Missed)
	}
	if _, err := io.WriteString(w, strings.TrimPrefix(b.String(), "\n")); err != nil {
		return err
	}
	if fn.DaemonStage != nil {
		fmt.Fprintln(w)
		return WriteDaemonStageText(w, r, unit)
	}
	return nil
}

// WriteFunctionsCSV writes one row per function called, in the order of
// the text view, after a header line if header is true; end_time is the
// end of the record's window, so interval records append cleanly.
func WriteFunctionsCSV(w io.Writer, r *profile.Record, header bool) error {
	cw := csv.NewWriter(w)
	if header {
		if err := cw.Write(FunctionColumns); err != nil {
			return err
		}
	}
	end := r.Meta.End.UTC().Format(time.RFC3339Nano)
	fn := FunctionsOf(r)
	if fn == nil {
		fn = &profile.KernelFunctions{}
	}
	for _, fc := range fn.Functions {
		row := []string{end, csvName(fc.Name), csvName(fc.Module), u(fc.Count), "", "", "", "", "", "", "", ""}
		if h := fc.Latency; h != nil && h.Count > 0 {
			copy(row[4:], []string{u(h.Sum), f(h.Mean()), u(h.Min), f(h.Quantile(0.5)), f(h.Quantile(0.99)), u(h.Max)})
		}
		if err := cw.Write(row); err != nil {
			return err
		}
		// --arg: a row per value of the argument, its hits the count.
		for _, v := range fc.Values {
			vrow := []string{end, csvName(fc.Name), csvName(fc.Module), u(v.Count), "", "", "", "", "", "", strconv.Itoa(fc.Arg), strconv.FormatInt(v.Value, 10)}
			if err := cw.Write(vrow); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// FunctionsOf is a record's functions section: the kernel's (kfunc) or a
// program's own (ufunc), which read alike; nil if it has neither.
func FunctionsOf(r *profile.Record) *profile.KernelFunctions {
	if r.Functions != nil {
		return r.Functions
	}
	return r.DaemonFunctions
}

// maxValuesShown is how many values of --arg's argument the text shows
// per probe, the most hit first (a request's id has as many as requests).
const maxValuesShown = 10

// libfuse's USDT arguments whose values have names: request_process's
// opcode, request_reply's error (a negative errno) and the error of
// writing the reply.
func argLabel(fn string, arg int) string {
	switch {
	case fn == "usdt:libfuse:request_process" && arg == 1:
		return "FUSE opcode"
	case fn == "usdt:libfuse:request_reply" && (arg == 3 || arg == 4):
		return "negative errno"
	}
	return ""
}

// argValueName names a value of a known argument, "" otherwise.
func argValueName(fn string, arg int, v int64) string {
	switch argLabel(fn, arg) {
	case "FUSE opcode":
		if v >= 0 && v < 1<<32 {
			return fuseproto.Opcode(v).String()
		}
	case "negative errno":
		if v < 0 && v > -4096 {
			return unix.ErrnoName(syscall.Errno(-v))
		}
	}
	return ""
}
