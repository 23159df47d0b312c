package ktrace

import (
	"context"

	"github.com/fusescope/fusescope/internal/session"
)

// TraceConfig is one run of fusescope trace: the request source's
// configuration, the run around it, and what the front end shows.
type TraceConfig struct {
	Requests RequestConfig
	// Run is the session: its interval, count, command, -p, output and
	// the records' Emit. Trace supplies its Ready.
	Run session.Config
	// Ready runs once the probes are attached, before the command (if
	// any) starts: the front end says what is traced.
	Ready func(*RequestSource)
}

// Trace traces FUSE requests until the run ends (Ctrl-C, the count, the
// command's or -p's exit), emitting a record per interval and at the end.
func Trace(ctx context.Context, cfg TraceConfig) error {
	var source *RequestSource
	run := cfg.Run
	run.Ready = func() {
		if cfg.Ready != nil {
			cfg.Ready(source)
		}
	}
	_, err := session.Run(ctx, run, func(target session.Target) (session.Source, error) {
		var err error
		source, err = OpenRequests(cfg.Requests)
		if err != nil {
			return nil, err
		}
		return source, nil
	})
	return err
}
