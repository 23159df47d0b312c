// Package grafana holds fusescope's Grafana dashboard (fusescope.json);
// its test checks what a reader of the dashboard relies on.
package grafana

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The unit of each series the dashboard draws, by the metric it reads:
// a panel's axis has one unit, so every query of a panel must have its.
var units = []struct {
	metric *regexp.Regexp
	unit   string
}{
	{regexp.MustCompile(`histogram_quantile\(.*_seconds_bucket`), "s"},
	{regexp.MustCompile(`rate\(fusescope_fuse_request(_error)?s_total`), "reqps"},
	{regexp.MustCompile(`rate\(fusescope_fuse_re(quest|ply)_bytes_total`), "Bps"},
	{regexp.MustCompile(`rate\(fusescope_fuse_request_duration_seconds_sum`), "s"},       // seconds in FUSE per second
	{regexp.MustCompile(`rate\(fusescope_bpf_program_run_seconds_total`), "percentunit"}, // CPU seconds per second: a share of one CPU
	{regexp.MustCompile(`rate\(fusescope_trace_drops_total`), "cps"},
	{regexp.MustCompile(`fusescope_fuse_(requests_in_flight|connection_waiting|requests_hung|connection_max_background)`), "short"},
	{regexp.MustCompile(`process_resident_memory_bytes`), "bytes"},
	{regexp.MustCompile(`fusescope_scrape_snapshot_duration_seconds`), "s"},
}

type dashboard struct {
	Inputs []struct {
		Name string `json:"name"`
	} `json:"__inputs"`
	Panels []struct {
		Title       string `json:"title"`
		FieldConfig struct {
			Defaults struct {
				Unit string `json:"unit"`
			} `json:"defaults"`
			Overrides []json.RawMessage `json:"overrides"`
		} `json:"fieldConfig"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func load(t *testing.T) (dashboard, string) {
	t.Helper()
	raw, err := os.ReadFile("fusescope.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	return d, string(raw)
}

// Each panel draws one unit, on an axis that says which: RSS bytes and
// seconds, or CPU seconds per second and drops per second, are two
// panels.
func TestPanelUnits(t *testing.T) {
	d, _ := load(t)
	for _, p := range d.Panels {
		if len(p.FieldConfig.Overrides) > 0 {
			t.Errorf("panel %q: overrides give its series other units than its axis's", p.Title)
		}
		for _, tg := range p.Targets {
			unit := ""
			for _, u := range units {
				if u.metric.MatchString(tg.Expr) {
					unit = u.unit
					break
				}
			}
			switch {
			case unit == "":
				t.Errorf("panel %q: no unit known for %s: add its metric to the test's table", p.Title, tg.Expr)
			case unit != p.FieldConfig.Defaults.Unit:
				t.Errorf("panel %q is in %q, but %s is in %q", p.Title, p.FieldConfig.Defaults.Unit, tg.Expr, unit)
			}
		}
	}
}

// The data source comes from the dashboard's own variable: an input it
// declares must be used, or Grafana asks for one on import for nothing.
func TestInputsUsed(t *testing.T) {
	d, raw := load(t)
	for _, in := range d.Inputs {
		if !strings.Contains(raw, "${"+in.Name+"}") {
			t.Errorf("__inputs declares %s, which no panel or variable uses", in.Name)
		}
	}
	if strings.Count(raw, `"uid": "${datasource}"`) < len(d.Panels) {
		t.Errorf("a panel does not take its data source from $datasource")
	}
}
