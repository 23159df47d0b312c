package bench

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/option"
)

// The tracer's refusals reach a bench file's user in its keys, never as
// trace's flags they did not type.
func TestTracerErrorsInBenchKeys(t *testing.T) {
	err := fmt.Errorf("tracing: %w", option.Errorf("kernel 6.1 cannot run {calls}: a BPF feature it needs is missing; leave out {calls} and the rest of the trace works"))
	got := option.Reword(err, yamlSetting)
	if want := "tracing: kernel 6.1 cannot run a workload's calls: true: a BPF feature it needs is missing; leave out a workload's calls: true and the rest of the trace works"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := option.Reword(option.Errorf("{stages} needs the raw tracepoints"), yamlSetting); strings.Contains(got, "--") || !strings.HasPrefix(got, "trace: stages") {
		t.Errorf("stages: %q", got)
	}
}
