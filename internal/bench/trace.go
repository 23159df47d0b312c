package bench

import (
	"io"
	"os"

	"github.com/schollz/progressbar/v3"

	"github.com/fusescope/fusescope/internal/ktrace"
)

// OpenTracer traces every FUSE connection's requests for the bench, with
// their stages (where the kernel allows it) if asked; a run's requests are
// an interval of the trace, kept for its configuration's connection.
// With calls, the bench's own process and its children are the
// application whose file calls are joined to their requests.
func OpenTracer(stages, calls bool) (Tracer, func(), error) {
	cfg := ktrace.RequestConfig{Options: ktrace.Options{ReapAge: ktrace.DefaultReapAge, Attach: ktrace.AttachAuto, Stages: stages, Calls: calls}}
	if calls {
		cfg.CommandPID = os.Getpid()
	}
	s, err := ktrace.OpenRequests(cfg)
	if err != nil && stages {
		cfg.Stages = false
		if s, err = ktrace.OpenRequests(cfg); err != nil {
			return nil, nil, err
		}
	}
	return s, func() { s.Close() }, nil
}

// Bar is a Progress bar with the runs done, the rate and the time left,
// for a terminal.
type Bar struct {
	W   io.Writer
	bar *progressbar.ProgressBar
}

func (b *Bar) Start(total int, what string) {
	b.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(b.W), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true), progressbar.OptionFullWidth(),
		progressbar.OptionClearOnFinish(), progressbar.OptionShowElapsedTimeOnFinish())
}

func (b *Bar) Step(done int, line string) {
	b.bar.Describe(line)
	b.bar.Set(done)
}

func (b *Bar) Finish() { b.bar.Finish() }
