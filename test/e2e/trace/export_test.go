package trace

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/test/e2e"
	"github.com/fusescope/fusescope/test/proctest"
)

// promQuery runs an instant PromQL query and returns its vector's values.
func promQuery(t *testing.T, base, query string) []float64 {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if r.Status != "success" {
		t.Fatalf("%s: %s", query, r.Error)
	}
	var out []float64
	for _, s := range r.Data.Result {
		v, _ := strconv.ParseFloat(s.Value[1].(string), 64)
		out = append(out, v)
	}
	return out
}

// TestExportPrometheus: a real Prometheus (Debian's, started here on
// 127.0.0.1) scrapes fusescope export while a workload runs. PromQL
// returns the LOOKUPs the daemon counted itself, exactly; promtool finds
// the exposition clean; every query of the Grafana dashboard returns data.
func TestExportPrometheus(t *testing.T) {
	t.Parallel()
	probes := e2e.WatchProbes(t)
	e2e.Need(t, "prometheus", "promtool")
	mnt, cfs := mountLab(t, 300, 1, 0)
	before := cfs.snapshot()[fuseproto.Lookup]
	exp := proctest.Start(t, exec.Command(e2e.Fusescope, "export", "--listen", "127.0.0.1:0", "--mount", mnt, "--stages", "--hung", "1s"),
		"Serving FUSE metrics at", 30*time.Second)
	m := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/metrics`).FindStringSubmatch(exp.Output())
	if m == nil {
		t.Fatalf("no address in %q", exp.Output())
	}
	target := m[1]

	// The workload: a stat of each of 300 files, three times (entry
	// timeouts of 0: a LOOKUP each), and reads.
	for round := 0; round < 3; round++ {
		for i := 0; i < 300; i++ {
			if _, err := os.Stat(filepath.Join(mnt, "files", fmt.Sprintf("f%03d", i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 0; i < 20; i++ {
		if _, err := os.ReadFile(filepath.Join(mnt, "files", fmt.Sprintf("f%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	want := cfs.snapshot()[fuseproto.Lookup] - before

	// promtool on the exposition as a scraper gets it.
	resp, err := http.Get("http://" + target + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	check := exec.Command("promtool", "check", "metrics")
	check.Stdin = strings.NewReader(string(body))
	if out, err := check.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}

	dir := t.TempDir()
	promPort := e2e.FreePort(t)
	config := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: fusescope\n    static_configs:\n      - targets: ['%s']\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := proctest.Start(t, exec.Command("prometheus", "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort)),
		"Server is ready to receive web requests", 60*time.Second)
	defer prom.Interrupt(t, 10*time.Second)
	base := fmt.Sprintf("http://127.0.0.1:%d", promPort)

	// The counter reaches the daemon's count, exactly, within a few scrapes.
	query := fmt.Sprintf(`sum(fusescope_fuse_requests_total{op="LOOKUP", mount=%q})`, mnt)
	e2e.Eventually(t, 30*time.Second, fmt.Sprintf("%s to reach the %d LOOKUPs the daemon counted while traced", query, want), func() (bool, string) {
		got := promQuery(t, base, query)
		return len(got) == 1 && uint64(got[0]) == want, fmt.Sprint(got)
	})

	// Every panel's query returns data once a rate has two samples.
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	data, err := os.ReadFile("../../../contrib/grafana/fusescope.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	expand := strings.NewReplacer("$__rate_interval", "15s", "$job", ".*", "$mount", ".*")
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			q := expand.Replace(tg.Expr)
			e2e.Eventually(t, 20*time.Second, fmt.Sprintf("panel %q: %s to return data", p.Title, q), func() (bool, string) {
				return len(promQuery(t, base, q)) > 0, "no data"
			})
		}
	}

	// Native histograms, to a Prometheus that asks for them (protobuf):
	// the LOOKUP histogram holds every LOOKUP.
	native := fmt.Sprintf("histogram_count(sum(fusescope_fuse_request_duration_seconds{op=\"LOOKUP\", mount=%q}))", mnt)
	nativePort := e2e.FreePort(t)
	nprom := proctest.Start(t, exec.Command("prometheus", "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "native"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", nativePort),
		"--enable-feature=native-histograms"),
		"Server is ready to receive web requests", 60*time.Second)
	defer nprom.Interrupt(t, 10*time.Second)
	nbase := fmt.Sprintf("http://127.0.0.1:%d", nativePort)
	// A minute, as for its start: a Prometheus started on a machine that
	// make test loads took more than 30 s to its first sample (run 27).
	e2e.Eventually(t, 60*time.Second, fmt.Sprintf("%s to reach %d", native, want), func() (bool, string) {
		got := promQuery(t, nbase, native)
		return len(got) == 1 && uint64(got[0]) == want, fmt.Sprint(got)
	})

	// Bad input: the port in use, a negative --hung: one line each.
	for _, args := range [][]string{
		{"export", "--listen", target},
		{"export", "--listen", "nonsense"},
		{"export", "--hung", "-1s"},
	} {
		out, err := exec.Command(e2e.Fusescope, args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Errorf("%v: want one line and a non-zero exit, got %v:\n%s", args, err, out)
		}
	}
	// Ctrl-C ends the export, its probes detached.
	if err := exp.Interrupt(t, 10*time.Second); err != nil {
		t.Errorf("export after Ctrl-C: %v\n%s", err, exp.Output())
	}
	probes.AssertNoneLeft(t, exp.Cmd.Process.Pid)
}

// scrapeCounter sums a counter's series for op in a Prometheus text exposition.
func scrapeCounter(t *testing.T, target, name, op string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + target + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, `op="`+op+`"`) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// TestExportDaemonSide: the lab file system's daemon serves its own
// statistics under the exporter's names (fs mount --metrics), and they
// agree with the kernel's (fusescope export on the same mount): two
// measurements that share no code but the names.
func TestExportDaemonSide(t *testing.T) {
	t.Parallel()
	src, mnt := t.TempDir(), t.TempDir()
	for i := 0; i < 100; i++ {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("f%03d", i)), []byte("x"), 0o644)
	}
	daemon := fmt.Sprintf("127.0.0.1:%d", e2e.FreePort(t))
	if msg, err := exec.Command(e2e.Fusescope, "fs", "mount", src, mnt, "--preset", "nocache", "--metrics", daemon, "--background").CombinedOutput(); err != nil {
		t.Fatalf("fs mount: %v\n%s", err, msg)
	}
	defer exec.Command(e2e.Fusescope, "fs", "umount", mnt).Run()
	// A second daemon on the same port is refused before it mounts.
	if out, err := exec.Command(e2e.Fusescope, "fs", "mount", src, t.TempDir(), "--metrics", daemon, "--background").CombinedOutput(); err == nil || !strings.Contains(string(out), "--metrics "+daemon+": the address is in use") {
		t.Errorf("a second daemon on %s: %v\n%s", daemon, err, out)
	}
	before := scrapeCounter(t, daemon, "fusescope_fuse_requests_total", "LOOKUP")
	exp := proctest.Start(t, exec.Command(e2e.Fusescope, "export", "--listen", "127.0.0.1:0", "--mount", mnt), "Serving FUSE metrics at", 30*time.Second)
	kernel := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/metrics`).FindStringSubmatch(exp.Output())[1]
	for round := 0; round < 2; round++ {
		for i := 0; i < 100; i++ {
			os.Stat(filepath.Join(mnt, fmt.Sprintf("f%03d", i)))
		}
	}
	k := scrapeCounter(t, kernel, "fusescope_fuse_requests_total", "LOOKUP")
	d := scrapeCounter(t, daemon, "fusescope_fuse_requests_total", "LOOKUP") - before
	if k < 200 || k != d {
		t.Errorf("LOOKUPs: the kernel's exporter counted %v, the daemon %v (200 stats of files with entry timeouts of 0)", k, d)
	}
	if err := exp.Interrupt(t, 10*time.Second); err != nil {
		t.Errorf("export after Ctrl-C: %v", err)
	}
}
