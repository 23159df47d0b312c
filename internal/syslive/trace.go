package syslive

import (
	"context"
	"fmt"
	"io"

	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/session"
)

// TraceConfig is a live run: what it traces and how its events are
// analysed (LiveConfig), and where its report goes.
type TraceConfig struct {
	LiveConfig
	// Output is the file the report is written to (session.Config's);
	// "" writes it to Stdout, while the traced command keeps the terminal
	// otherwise.
	Output string
	Stdout io.Writer
	Stderr io.Writer                                    // where -p's run says it has begun
	Write  func(w io.Writer, rec *profile.Record) error // the view
}

// Trace runs the traced command (cfg.Traced) or follows cfg.PID with the
// live source until it ends, and writes the report. The error is the
// run's, as session.Run's (the command's exit status as an
// *session.ExitError).
func Trace(ctx context.Context, cfg TraceConfig) error {
	if err := ktrace.CheckPrivileges(); err != nil {
		return err
	}
	run := session.Config{Command: cfg.Traced, PID: cfg.PID, Output: cfg.Output, Save: cfg.Write,
		Ready: func() {
			if cfg.PID > 0 {
				fmt.Fprintf(cfg.Stderr, "Tracing the system calls of process %d and of the processes it starts... Hit Ctrl-C to end.\n", cfg.PID)
			}
		},
		Emit: func(rec *profile.Record, _ bool) error {
			if cfg.Output != "" {
				return nil // the report goes to -o; the command keeps the terminal
			}
			return cfg.Write(cfg.Stdout, rec)
		},
	}
	_, err := session.Run(ctx, run, func(t session.Target) (session.Source, error) {
		s, err := OpenLive(cfg.LiveConfig, t)
		if err != nil {
			return nil, err // not a nil *LiveSource in a non-nil Source
		}
		return s, nil
	})
	return err
}
