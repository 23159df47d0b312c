package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/fusescope/fusescope/internal/profile"
)

// FioWorkload is a fio job: fio's options by name (rw, bs, size...), less
// those the bench sets (the job's name and files, its output).
type FioWorkload map[string]string

func init() { registerKind("fio", func() WorkloadKind { return new(FioWorkload) }, "fio") }

func (job *FioWorkload) check() error {
	for _, k := range []string{"filename", "directory", "output-format", "output", "name"} {
		if _, ok := (*job)[k]; ok {
			return fmt.Errorf("fio option %s is the bench's to set: leave it out", k)
		}
	}
	if (*job)["size"] == "" && (*job)["runtime"] == "" {
		return errors.New("fio: give size (and runtime if you want a time limit)")
	}
	return nil
}

func (job *FioWorkload) scale(f float64) {
	for _, k := range []string{"size", "filesize"} {
		if v, ok := (*job)[k]; ok {
			(*job)[k] = scaleSize(v, f)
		}
	}
}

// layout lays out what a job that only reads reads, once: one file, or
// the job's files, written by fio with the job's own options.
func (job *FioWorkload) layout(w *Workload, src string) error {
	opts := *job
	switch {
	case fioReads(opts) && fioFiles(opts):
		dir := filepath.Join(src, "bench-"+w.Name+".d")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		writer := FioWorkload{}
		for k, v := range opts {
			writer[k] = v
		}
		writer["rw"], writer["direct"], writer["fsync_on_close"] = "write", "0", "1"
		delete(writer, "readwrite")
		delete(writer, "runtime")
		delete(writer, "time_based")
		if out, err := exec.Command("fio", fioArgs(w.Name, writer, dir)...).CombinedOutput(); err != nil {
			return fmt.Errorf("fio laying out the files: %s", firstLine(out, err))
		}
		return nil
	case fioReads(opts):
		size, err := ParseSize(opts["size"])
		if err != nil {
			return fmt.Errorf("fio size: %w", err)
		}
		return writeRandom(readFile(src, w), size)
	}
	return nil // a job that writes makes its own files
}

// fioReads tells whether a fio job only reads (then its file is laid out
// once in the source).
func fioReads(opts map[string]string) bool {
	switch opts["rw"] {
	case "read", "randread":
		return true
	}
	return opts["readwrite"] == "read" || opts["readwrite"] == "randread"
}

// fioArgs are fio's arguments for the job named name on file. fadvise_hint=0 unless the
// job sets it: fio's default hint (POSIX_FADV_SEQUENTIAL or _RANDOM) is
// advice the FUSE mount and the native file system act on differently (a
// random hint turns read-ahead off natively; under passthrough it does not
// reach the backing file), so a comparison would measure the hint.
func fioArgs(name string, job FioWorkload, file string) []string {
	where := "--filename=" + file
	if fioFiles(job) {
		where = "--directory=" + file
	}
	args := []string{"--name=" + name, where, "--output-format=json"}
	keys := make([]string, 0, len(job))
	for k := range job {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if _, ok := job["fadvise_hint"]; !ok {
		args = append(args, "--fadvise_hint=0")
	}
	for _, k := range keys {
		if v := job[k]; v == "" {
			args = append(args, "--"+k)
		} else {
			args = append(args, "--"+k+"="+v)
		}
	}
	return args
}

// fioResult is what the bench reads of fio's JSON.
type fioResult struct {
	Jobs []struct {
		Error      int     `json:"error"`
		Read       fioDir  `json:"read"`
		Write      fioDir  `json:"write"`
		JobRuntime float64 `json:"job_runtime"`
	} `json:"jobs"`
}

type fioDir struct {
	BWBytes float64 `json:"bw_bytes"`
	IOPS    float64 `json:"iops"`
	Clat    struct {
		N          uint64             `json:"N"`
		Percentile map[string]float64 `json:"percentile"`
	} `json:"clat_ns"`
}

// fioFiles tells whether a fio job works on several files of its own
// (nrfiles, numjobs): then it gets a directory, made for each run.
func fioFiles(opts map[string]string) bool {
	return opts["nrfiles"] != "" || (opts["numjobs"] != "" && opts["numjobs"] != "1")
}

func (job *FioWorkload) run(w *Workload, env runEnv) ([]profile.BenchMetric, error) {
	opts := *job
	file := readFile(env.dir, w)
	switch {
	case fioFiles(opts) && fioReads(opts):
		file = filepath.Join(env.dir, "bench-"+w.Name+".d") // laid out once
	case fioFiles(opts):
		file = filepath.Join(env.dir, "bench-"+w.Name+".d")
		if err := os.MkdirAll(file, 0o755); err != nil {
			return nil, err
		}
		defer os.RemoveAll(file)
	case !fioReads(opts):
		file = filepath.Join(env.dir, "bench-"+w.Name+".w.dat")
		defer os.Remove(file)
	}
	if d := opts["direct"]; d == "1" || d == "true" {
		if err := probeDirect(env.dir); err != nil {
			return nil, err
		}
	}
	if err := env.drop(); err != nil {
		return nil, err
	}
	out, err := command(env.ctx, "fio", fioArgs(w.Name, opts, file)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("fio failed: %s", firstLine(ee.Stderr, err))
		}
		return nil, fmt.Errorf("fio: %w", err)
	}
	return parseFio(out)
}

// parseFio reads fio's JSON output (fio prints notes before it at times).
func parseFio(out []byte) ([]profile.BenchMetric, error) {
	if i := strings.IndexByte(string(out), '{'); i > 0 {
		out = out[i:]
	}
	var res fioResult
	if err := json.Unmarshal(out, &res); err != nil || len(res.Jobs) == 0 {
		return nil, fmt.Errorf("fio's output is not the JSON of a job")
	}
	var bw, iops, n float64
	var p50, p99 float64
	for _, j := range res.Jobs {
		if j.Error != 0 {
			return nil, fmt.Errorf("fio's job failed with error %d", j.Error)
		}
		for _, d := range []fioDir{j.Read, j.Write} {
			bw += d.BWBytes
			iops += d.IOPS
			if d.Clat.N > 0 {
				// Weighted by the I/Os of each direction: an approximation
				// where a job both reads and writes.
				w := float64(d.Clat.N)
				p50 += w * d.Clat.Percentile["50.000000"]
				p99 += w * d.Clat.Percentile["99.000000"]
				n += w
			}
		}
	}
	m := []profile.BenchMetric{
		{Name: "bw", Unit: "MiB/s", Value: bw / (1 << 20), HigherIsBetter: true},
		{Name: "iops", Unit: "IOPS", Value: iops, HigherIsBetter: true},
	}
	if n > 0 {
		m = append(m, profile.BenchMetric{Name: "clat_p50", Unit: "us", Value: p50 / n / 1000},
			profile.BenchMetric{Name: "clat_p99", Unit: "us", Value: p99 / n / 1000})
	}
	return m, nil
}

// probeDirect opens a file of dir with O_DIRECT, as fio's direct=1 will.
func probeDirect(dir string) error {
	p := filepath.Join(dir, ".bench-direct-probe")
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("direct=1: this file system refuses O_DIRECT (%v): leave direct out for it", err)
	}
	unix.Close(fd)
	os.Remove(p)
	return nil
}
