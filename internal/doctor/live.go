package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/ktrace"
	"github.com/fusescope/fusescope/internal/option"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/session"
)

// waitingPeriod is how often fusectl's waiting count is sampled.
const waitingPeriod = 10 * time.Millisecond

// LiveConfig is one live run of fusescope doctor: a trace of the mounts
// with what the rules read (stages, the page cache, the application's
// calls where one is named, hung requests), fusectl sampled beside it.
type LiveConfig struct {
	Requests ktrace.RequestConfig
	Duration time.Duration // 0: until the command or -p exits, or Ctrl-C
	Command  []string
	PID      int
	Output   string   // -o: the record, findings included
	Rules    []string // only these rules; all when empty
	Log      io.Writer
	// Ready is called once the probes are attached.
	Ready func(*ktrace.RequestSource)
	// Show renders the record once the rules have run.
	Show func(*profile.Record) error
}

// Live traces, then diagnoses the run's record.
func Live(ctx context.Context, cfg LiveConfig) error {
	if _, err := Diagnose(&profile.Record{}, cfg.Rules...); err != nil {
		return err // an unknown rule, before anything is attached
	}
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	for {
		err := live(ctx, cfg)
		var refused *option.Error
		if !errors.As(err, &refused) || !cfg.without(refused.Setting()) {
			return err
		}
		// What this kernel cannot record, doctor does without: the rules
		// that read it say so, undecided.
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "note: %v; doctor goes on without it.\n", strings.TrimSuffix(refused.Error(), "."))
		}
	}
}

// without turns off the recording of setting (an option.Error's key),
// saying whether it was on.
func (cfg *LiveConfig) without(setting string) bool {
	o := &cfg.Requests.Options
	switch {
	case setting == "page-cache" && o.PageCache:
		o.PageCache = false
	case setting == "calls" && o.Calls:
		o.Calls = false
	case setting == "stages" && o.Stages:
		o.Stages = false
	case setting == "files" && cfg.Requests.Files > 0:
		cfg.Requests.Files = 0
	default:
		return false
	}
	return true
}

func live(ctx context.Context, cfg LiveConfig) error {
	var waiting *fuseconn.Waiting
	defer func() {
		if waiting != nil {
			waiting.Stop(nil)
		}
	}()
	return ktrace.Trace(ctx, ktrace.TraceConfig{
		Requests: cfg.Requests,
		Run: session.Config{Command: cfg.Command, PID: cfg.PID, Output: cfg.Output, Log: cfg.Log,
			Emit: func(rec *profile.Record, final bool) error {
				if !final {
					return nil
				}
				if waiting != nil {
					waiting.Stop(rec.Meta.Mounts)
					waiting = nil
				}
				fuseconn.AddBacking(rec.Meta.Mounts)
				for i := range rec.Hung {
					rec.Hung[i].ThreadState = threadState(rec.Hung[i].PID)
				}
				f, err := Diagnose(rec, cfg.Rules...)
				if err != nil {
					return err
				}
				rec.Findings = f
				return cfg.Show(rec)
			}},
		Ready: func(s *ktrace.RequestSource) {
			waiting = fuseconn.SampleWaiting(waitingPeriod, s.Conns)
			if cfg.Ready != nil {
				cfg.Ready(s)
			}
		},
	})
}

// threadState is a thread's state letter from /proc/PID/stat ("D": in
// uninterruptible sleep), "" if it is gone.
func threadState(pid uint32) string {
	if pid == 0 {
		return ""
	}
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/stat")
	if err != nil {
		return ""
	}
	// pid (comm) S ...: the command may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}
