package bench

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
)

// ShellWorkload runs a command with sh -c in the mounted directory, after
// Setup (run once per configuration and not timed). Without Metric the
// figure is the elapsed time; with it, the first group of Metric (a regular
// expression) in the command's output, in Unit.
type ShellWorkload struct {
	Run    string `yaml:"run"`
	Setup  string `yaml:"setup"`
	Metric string `yaml:"metric"`
	Unit   string `yaml:"unit"`
	// HigherIsBetter says which way the metric is better (elapsed time:
	// lower).
	HigherIsBetter bool `yaml:"higher_is_better"`
}

func init() { registerKind("shell", func() WorkloadKind { return new(ShellWorkload) }) }

func (k *ShellWorkload) check() error {
	if k.Run == "" {
		return errors.New("shell: give run, the command")
	}
	if k.Metric != "" {
		re, err := regexp.Compile(k.Metric)
		if err != nil || re.NumSubexp() < 1 {
			return fmt.Errorf("shell metric %q: give a regular expression with one group around the number", k.Metric)
		}
	}
	return nil
}

// scale leaves the command as it is: its work is its own.
func (k *ShellWorkload) scale(float64) {}

// layout lays out nothing: setup runs in each configuration instead.
func (k *ShellWorkload) layout(*Workload, string) error { return nil }

// setup runs the workload's setup in dir, once per configuration.
func (k *ShellWorkload) setup(ctx context.Context, _ *Workload, dir string) error {
	if k.Setup == "" {
		return nil
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", k.Setup)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("setup %q failed: %s", k.Setup, firstLine(out, err))
	}
	return nil
}

func (k *ShellWorkload) run(_ *Workload, env runEnv) ([]profile.BenchMetric, error) {
	if err := env.drop(); err != nil {
		return nil, err
	}
	cmd := command(env.ctx, "sh", "-c", k.Run)
	cmd.Dir = env.dir
	start := time.Now()
	out, err := cmd.CombinedOutput()
	elapsed := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("%q failed: %s", k.Run, firstLine(out, err))
	}
	if k.Metric == "" {
		return []profile.BenchMetric{{Name: "elapsed", Unit: "s", Value: elapsed.Seconds()}}, nil
	}
	m := regexp.MustCompile(k.Metric).FindSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("the output of %q has no match for the metric %q", k.Run, k.Metric)
	}
	v, perr := strconv.ParseFloat(string(m[1]), 64)
	if perr != nil {
		return nil, fmt.Errorf("the metric %q matched %q, which is not a number", k.Metric, m[1])
	}
	return []profile.BenchMetric{{Name: "metric", Unit: k.Unit, Value: v, HigherIsBetter: k.HigherIsBetter},
		{Name: "elapsed", Unit: "s", Value: elapsed.Seconds()}}, nil
}
