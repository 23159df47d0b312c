package bench

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/stats"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// manyOps makes a mount see as many FUSE opcodes as a file system's users
// can send: names, data, links, attributes, xattrs, locks, sync, space.
const manyOps = `
import os, sys, fcntl
d = sys.argv[1]
p = lambda n: os.path.join(d, n)
os.mkdir(p("dir")); os.listdir(p("dir")); os.rmdir(p("dir"))
fd = os.open(p("f"), os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b"x" * 8192); os.fsync(fd); os.fdatasync(fd)
os.pread(fd, 4096, 0); os.lseek(fd, 0, os.SEEK_DATA)
try: os.posix_fallocate(fd, 0, 65536)
except OSError: pass
fcntl.lockf(fd, fcntl.LOCK_EX); fcntl.lockf(fd, fcntl.LOCK_UN)
fcntl.flock(fd, fcntl.LOCK_EX); fcntl.flock(fd, fcntl.LOCK_UN)
os.ftruncate(fd, 100); os.close(fd)
os.chmod(p("f"), 0o600); os.utime(p("f")); os.access(p("f"), os.R_OK); os.statvfs(d)
for name, value in (("user.a", b"1"),):
    try:
        os.setxattr(p("f"), name, value); os.getxattr(p("f"), name); os.listxattr(p("f")); os.removexattr(p("f"), name)
    except OSError: pass
os.link(p("f"), p("g")); os.symlink("f", p("s")); os.readlink(p("s")); os.rename(p("g"), p("h"))
os.mkfifo(p("fifo")); os.unlink(p("fifo"))
src = os.open(p("f"), os.O_RDONLY); dst = os.open(p("c"), os.O_CREAT | os.O_WRONLY, 0o644)
try: os.copy_file_range(src, dst, 100)
except OSError: pass
os.close(src); os.close(dst)
dfd = os.open(d, os.O_RDONLY); os.fsync(dfd); os.close(dfd)
for n in ("h", "s", "c", "f"): os.unlink(p(n))
os.stat(p("missing")) if os.path.exists(p("missing")) else None
`

// TestBenchExportScrape measures fusescope export's scrape of 50 lab
// file system mounts, each having served ~40 opcodes: the time of a whole
// scrape (the HTTP GET of /metrics, as Prometheus makes it) and the
// exporter's resident memory, against the targets of 50 ms and 50 MB.
// The floor is measured beside it: a scrape of the same exporter with no
// FUSE mount (the Go and process collectors and the map reads alone).
func TestBenchExportScrape(t *testing.T) {
	setup(t)
	bin, _ := filepath.Abs("../../bin/fusescope")
	const mounts, scrapes = 50, 30
	var mnts []string
	for i := 0; i < mounts; i++ {
		src, mnt := t.TempDir(), t.TempDir()
		if msg, err := exec.Command(bin, "fs", "mount", src, mnt, "--background").CombinedOutput(); err != nil {
			t.Fatalf("fs mount: %v\n%s", err, msg)
		}
		mnts = append(mnts, mnt)
		t.Cleanup(func() { exec.Command(bin, "fs", "umount", mnt).Run() })
	}
	scrape := func(withMounts, stages bool, more ...string) (times []float64, rssMB float64, series, ops int) {
		args := append([]string{"export", "--listen", "127.0.0.1:0"}, more...)
		if stages {
			args = append(args, "--stages")
		}
		exp := exec.Command(bin, args...)
		stderr, _ := exp.StderrPipe()
		if err := exp.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { exp.Process.Signal(os.Interrupt); exp.Wait() }()
		sc := bufio.NewScanner(stderr)
		var target string
		for sc.Scan() {
			if m := regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/metrics`).FindStringSubmatch(sc.Text()); m != nil {
				target = m[1]
				break
			}
		}
		go io.Copy(io.Discard, stderr)
		if withMounts {
			for _, mnt := range mnts {
				os.RemoveAll(filepath.Join(mnt, "f")) // left by a run before
				if msg, err := exec.Command("python3", "-c", manyOps, mnt).CombinedOutput(); err != nil {
					t.Fatalf("workload on %s: %v\n%s", mnt, err, msg)
				}
			}
		}
		var body string
		for i := 0; i < scrapes; i++ {
			start := time.Now()
			resp, err := http.Get("http://" + target + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			times = append(times, time.Since(start).Seconds())
			body = string(b)
		}
		opSet := map[string]bool{}
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "process_resident_memory_bytes ") {
				v, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
				rssMB = v / (1 << 20)
			}
			if line != "" && !strings.HasPrefix(line, "#") {
				series++
			}
			if strings.HasPrefix(line, "fusescope_fuse_requests_total{") {
				opSet[regexp.MustCompile(`op="([^"]+)"`).FindStringSubmatch(line)[1]] = true
			}
		}
		return times, rssMB, series, len(opSet)
	}
	floor, floorRSS, floorSeries, _ := scrape(false, false)
	plain, plainRSS, plainSeries, ops := scrape(true, false)
	staged, stagedRSS, stagedSeries, _ := scrape(true, true)
	unbounded, unboundedRSS, unboundedSeries, _ := scrape(true, true, "--max-series", "0")
	fmt.Printf("\nfusescope export of %d lab fs mounts: a whole scrape (HTTP GET /metrics with gzip, as Prometheus asks), %d scrapes each.\n\n", mounts, scrapes)
	fmt.Println("| exporter | series | median scrape | min-max | RSS after |")
	fmt.Println("|---|---|---|---|---|")
	row := func(name string, series int, times []float64, rss float64) {
		fmt.Printf("| %s | %d | %.1f ms | %.1f-%.1f ms | %.1f MB |\n", name, series, 1000*stats.Median(times), 1000*slices.Min(times), 1000*slices.Max(times), rss)
	}
	row("before any request (the fixed cost: maps, /proc, the Go and process collectors)", floorSeries, floor, floorRSS)
	row(fmt.Sprintf("after the workload, %d opcodes per mount", ops), plainSeries, plain, plainRSS)
	row("the same with --stages (three more histograms per opcode), at the default bound of the series", stagedSeries, staged, stagedRSS)
	row("the same, --max-series 0 (no bound)", unboundedSeries, unbounded, unboundedRSS)
	libTimes, libSeries := clientGolangFloor(t, mounts, ops, scrapes)
	row("floor: client_golang alone, the same histograms as a plain HistogramVec, promhttp's defaults (in the test process)", libSeries, libTimes, 0)
	fmt.Printf("\nTargets: under 50 ms and 50 MB; under 100 ms at the default bound of the series. Command: make bench (TestBenchExportScrape).\n")
}

// clientGolangFloor scrapes what any client_golang exporter of the same
// histograms would serve: mounts x ops series of a HistogramVec with the
// export's 24 classic buckets, observed once in each bucket, through
// promhttp's own handler, over HTTP with gzip.
func clientGolangFloor(t *testing.T, mounts, ops, scrapes int) ([]float64, int) {
	reg := prometheus.NewRegistry()
	hv := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "floor_request_duration_seconds", Help: "floor",
		Buckets: prometheus.ExponentialBuckets(1.024e-6, 2, 24)}, []string{"mount", "op"})
	cv := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "floor_requests_total", Help: "floor"}, []string{"mount", "op"})
	reg.MustRegister(hv, cv)
	for m := 0; m < mounts; m++ {
		for o := 0; o < ops; o++ {
			mount, op := fmt.Sprintf("/tmp/TestBenchExportScrape/%03d", m), fmt.Sprintf("OP%02d", o)
			for b := 0; b < 24; b++ {
				hv.WithLabelValues(mount, op).Observe(1e-6 * float64(int(1)<<b))
			}
			for _, name := range []string{"a", "b", "c", "d"} {
				cv.WithLabelValues(mount+name, op).Inc()
			}
		}
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	var times []float64
	series := 0
	for i := 0; i < scrapes; i++ {
		start := time.Now()
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		times = append(times, time.Since(start).Seconds())
		series = 0
		for _, line := range strings.Split(string(b), "\n") {
			if line != "" && !strings.HasPrefix(line, "#") {
				series++
			}
		}
	}
	return times, series
}
