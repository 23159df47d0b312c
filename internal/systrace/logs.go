package systrace

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/session"
	"github.com/fusescope/fusescope/internal/strace"
	"golang.org/x/sys/unix"
)

// LogsConfig is what AnalyzeLogs reads, what it keeps, and where the
// report goes.
type LogsConfig struct {
	Logs     []string // strace logs, an -ff set's files, strace.Stdin
	PIDs     []int    // keep only these processes and their threads; empty: all
	Filter   Filter   // its PIDs are set from PIDs
	Analysis Options
	Tool     string   // fusescope version, recorded in the metadata
	Command  []string // the command line, recorded in the metadata
	// Output is the file the report is written to (session.CreateOutput:
	// made before anything is read, put in place at the end); "" writes
	// it to Stdout.
	Output string
	Stdout io.Writer
	Write  func(w io.Writer, rec *profile.Record) error // the view
}

// logsGCPercent is the garbage collector's GOGC while strace logs are
// analysed (GOGC in the environment overrides it).
const logsGCPercent = 400

// logsMemoryLimit is the soft limit past which the collector runs as
// often as by default again (GOMEMLIMIT overrides it).
const logsMemoryLimit = 512 << 20

// AnalyzeLogs analyses strace logs and writes the record of their report
// with cfg.Write. A log that cannot be read is refused before any is, and
// logs without a call the filters keep are an error that says why (none
// matched, an strace -c table, not a log).
func AnalyzeLogs(cfg LogsConfig) error {
	if err := checkLogs(cfg.Logs); err != nil {
		return err
	}
	if os.Getenv("GOGC") == "" {
		// A batch job whose heap is small beside the logs it streams: the
		// collector runs a quarter as often, for a heap ~1.6x the size
		// (an -ff set of a Go build: 10% less CPU, 37 -> 59 MB;
		// docs/performance.md).
		defer debug.SetGCPercent(debug.SetGCPercent(logsGCPercent))
		if os.Getenv("GOMEMLIMIT") == "" {
			// where the collector works harder again
			defer debug.SetMemoryLimit(debug.SetMemoryLimit(logsMemoryLimit))
		}
	}
	out, err := session.CreateOutput(cfg.Output)
	if err != nil {
		return err
	}
	rec, err := analyzeLogs(cfg)
	if err != nil {
		out.Finish(nil)
		return err
	}
	if out == nil {
		return cfg.Write(cfg.Stdout, rec)
	}
	return out.Finish(func(w io.Writer) error { return cfg.Write(w, rec) })
}

// analyzeLogs reads the logs into a record.
func analyzeLogs(cfg LogsConfig) (*profile.Record, error) {
	p := strace.NewParser()
	events := strace.Logs(cfg.Logs, p)
	filter := cfg.Filter
	filter.PIDs = map[int]bool{}
	for _, pid := range cfg.PIDs {
		filter.PIDs[pid] = true
	}
	r, err := Analyze(filter.Wrap(events), p, cfg.Analysis)
	names := strings.Join(cfg.Logs, ", ")
	if err == nil && r.Events == 0 {
		switch {
		case p.Parsed > 0:
			err = fmt.Errorf("no system call in %s matches the filters (of %d events read)", names, p.Parsed)
		case p.Summary > 0:
			err = fmt.Errorf("%s holds an strace -c summary table, not a log of the calls: record one with strace -f -tt -T -y -o LOG CMD", names)
		default:
			err = fmt.Errorf("no system calls found in %s (%d lines, %d malformed): is it an strace log? Record one with strace -f -tt -T -y -o LOG CMD", names, r.Lines, r.Malformed)
		}
	}
	if err != nil {
		return nil, err
	}
	r.Filter = filter.Record()
	return &profile.Record{Schema: profile.Schema, Meta: profile.Meta{Tool: cfg.Tool, Source: "strace log: " + names, Command: cfg.Command}, Syscalls: r}, nil
}

// checkLogs refuses, before anything is read, a log that cannot be: a
// missing file, a directory, or one that cannot be opened.
func checkLogs(logs []string) error {
	stdin := 0
	for _, path := range logs {
		if path == strace.Stdin {
			if stdin++; stdin > 1 {
				return fmt.Errorf("standard input (-) is given twice: it can be read once")
			}
			continue
		}
		st, err := os.Stat(path)
		if err == nil && st.IsDir() {
			return fmt.Errorf("%s is a directory: give the log files in it (strace -ff writes LOG.PID files: %s/LOG.*)", path, path)
		}
		if err == nil {
			// access, not an open: an -ff set is thousands of files.
			err = unix.Access(path, unix.R_OK)
		}
		if err != nil {
			return fmt.Errorf("%s: %v: give strace logs, as written by strace -f -tt -T -y -o LOG CMD", path, session.WithoutPath(err))
		}
	}
	return nil
}
