package bench

import (
	"errors"
	"io"
	"os"

	"github.com/schollz/progressbar/v3"

	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/option"
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
		s, err = ktrace.OpenRequests(cfg)
	}
	if err != nil {
		return nil, nil, errors.New(option.Reword(err, yamlSetting))
	}
	return s, func() { s.Close() }, nil
}

// yamlSetting spells a tracer setting as a bench file sets it.
func yamlSetting(key string) string {
	switch key {
	case "calls":
		return "a workload's calls: true"
	case "stages":
		return "trace: stages"
	}
	return key
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
