package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fusescope/fusescope/internal/profile"
)

// runEnv is what a workload's run is given.
type runEnv struct {
	ctx context.Context
	// dir is the configuration's directory (its mount point, or the
	// source itself for native); src is the source directory, where
	// files every configuration reads were laid out once.
	dir, src string
	// drop drops the caches (a no-op with drop_caches: false).
	drop func() error
}

// layout puts in src what every configuration's runs of w read: one file,
// the same blocks for all, so that where it landed on the disk is no
// difference between them.
func layout(w Workload, src string) error {
	size := int64(0)
	switch {
	case w.Walk != nil:
		return layoutTree(filepath.Join(src, "bench-"+w.Name), w.Walk.Files, w.Walk.Dirs)
	case w.SmallFiles != nil:
		return layoutFiles(filepath.Join(src, "bench-"+w.Name), w.SmallFiles)
	case w.Untar != nil:
		// The tarball lives beside the source, not in it: reading it is
		// not the configuration's work.
		tree := filepath.Join(filepath.Dir(src), "bench-"+w.Name+".tree")
		if err := layoutFiles(tree, w.Untar); err != nil {
			return err
		}
		defer os.RemoveAll(tree)
		if out, err := exec.Command("tar", "-C", tree, "-cf", untarBall(src, w), ".").CombinedOutput(); err != nil {
			return fmt.Errorf("tar: %s", firstLine(out, err))
		}
		return nil
	case w.GitStatus != nil:
		repo := filepath.Join(src, "bench-"+w.Name)
		if err := layoutFiles(repo, w.GitStatus); err != nil {
			return err
		}
		for _, args := range [][]string{{"init", "-q"}, {"add", "-A"},
			{"-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-q", "-m", "generated"}} {
			cmd := exec.Command("git", args...)
			cmd.Dir = repo
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("git %s: %s", args[0], firstLine(out, err))
			}
		}
		return nil
	case w.Cat != nil:
		size, _ = ParseSize(w.Cat.Size)
	case w.Fio != nil && fioReads(w.Fio) && fioFiles(w.Fio):
		// fio lays its jobs' files out itself: once, here, with the
		// job's own options writing them.
		dir := filepath.Join(src, "bench-"+w.Name+".d")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		job := Workload{Name: w.Name, Fio: map[string]string{}}
		for k, v := range w.Fio {
			job.Fio[k] = v
		}
		job.Fio["rw"], job.Fio["direct"], job.Fio["fsync_on_close"] = "write", "0", "1"
		delete(job.Fio, "readwrite")
		delete(job.Fio, "runtime")
		delete(job.Fio, "time_based")
		if out, err := exec.Command("fio", fioArgs(job, dir)...).CombinedOutput(); err != nil {
			return fmt.Errorf("fio laying out the files: %s", firstLine(out, err))
		}
		return nil
	case w.Fio != nil && fioReads(w.Fio):
		var err error
		if size, err = ParseSize(w.Fio["size"]); err != nil {
			return fmt.Errorf("fio size: %w", err)
		}
	default:
		return nil
	}
	return writeRandom(readFile(src, w), size)
}

// readFile is the file w reads, under dir.
func readFile(dir string, w Workload) string { return filepath.Join(dir, "bench-"+w.Name+".dat") }

func writeRandom(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	rand.Read(buf)
	for left := size; left > 0; left -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(int64(len(buf)), left)]); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// run runs w once and returns its figures, the first being the one the
// table shows.
func runWorkload(w Workload, env runEnv) ([]profile.BenchMetric, error) {
	switch {
	case w.Fio != nil:
		return runFio(w, env)
	case w.Cat != nil:
		return runCat(w, env)
	case w.Tree != nil:
		return runTree(w, env)
	case w.Walk != nil:
		return runWalk(w, env)
	case w.SmallFiles != nil:
		return runSmallFiles(w, env)
	case w.Untar != nil:
		return runUntar(w, env)
	case w.GitStatus != nil:
		return runGitStatus(w, env)
	default:
		return runShell(w, env)
	}
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

// fioArgs are fio's arguments for w on file. fadvise_hint=0 unless the
// job sets it: fio's default hint (POSIX_FADV_SEQUENTIAL or _RANDOM) is
// advice the FUSE mount and the native file system act on differently (a
// random hint turns read-ahead off natively; under passthrough it does not
// reach the backing file), so a comparison would measure the hint.
func fioArgs(w Workload, file string) []string {
	where := "--filename=" + file
	if fioFiles(w.Fio) {
		where = "--directory=" + file
	}
	args := []string{"--name=" + w.Name, where, "--output-format=json"}
	keys := make([]string, 0, len(w.Fio))
	for k := range w.Fio {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if _, ok := w.Fio["fadvise_hint"]; !ok {
		args = append(args, "--fadvise_hint=0")
	}
	for _, k := range keys {
		if v := w.Fio[k]; v == "" {
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

func runFio(w Workload, env runEnv) ([]profile.BenchMetric, error) {
	file := readFile(env.dir, w)
	switch {
	case fioFiles(w.Fio) && fioReads(w.Fio):
		file = filepath.Join(env.dir, "bench-"+w.Name+".d") // laid out once
	case fioFiles(w.Fio):
		file = filepath.Join(env.dir, "bench-"+w.Name+".d")
		if err := os.MkdirAll(file, 0o755); err != nil {
			return nil, err
		}
		defer os.RemoveAll(file)
	case !fioReads(w.Fio):
		file = filepath.Join(env.dir, "bench-"+w.Name+".w.dat")
		defer os.Remove(file)
	}
	if d := w.Fio["direct"]; d == "1" || d == "true" {
		if err := probeDirect(env.dir); err != nil {
			return nil, err
		}
	}
	if err := env.drop(); err != nil {
		return nil, err
	}
	out, err := command(env.ctx, "fio", fioArgs(w, file)...).Output()
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

// runCat reads the file Times over, caches dropped before each read (seed
// 003's cold reads), and returns the mean MiB/s of the reads and the best;
// the spread across runs is the summary's.
func runCat(w Workload, env runEnv) ([]profile.BenchMetric, error) {
	file := readFile(env.dir, w)
	block, _ := ParseSize(w.Cat.Block)
	buf := make([]byte, block)
	rates := make([]float64, 0, w.Cat.Times)
	for range w.Cat.Times {
		if err := env.drop(); err != nil {
			return nil, err
		}
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		n, err := readAll(f, buf)
		elapsed := time.Since(start)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", file, err)
		}
		rates = append(rates, float64(n)/(1<<20)/elapsed.Seconds())
	}
	var sum, best float64
	for _, r := range rates {
		sum += r
		best = max(best, r)
	}
	return []profile.BenchMetric{
		{Name: "read", Unit: "MiB/s", Value: sum / float64(len(rates)), HigherIsBetter: true},
		{Name: "best", Unit: "MiB/s", Value: best, HigherIsBetter: true},
	}, nil
}

// readAll reads r to its end in reads of len(buf), as cat does (io.Copy
// to io.Discard would read 8 KiB at a time).
func readAll(r io.Reader, buf []byte) (int64, error) {
	var n int64
	for {
		k, err := r.Read(buf)
		n += int64(k)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// runTree runs the metadata tree's phases and returns each one's rate.
func runTree(w Workload, env runEnv) ([]profile.BenchMetric, error) {
	root := filepath.Join(env.dir, "bench-"+w.Name)
	os.RemoveAll(root)
	defer os.RemoveAll(root)
	var paths []string
	dirs := make([]string, w.Tree.Dirs)
	for d := range dirs {
		dirs[d] = filepath.Join(root, fmt.Sprintf("d%04d", d))
	}
	for i := range w.Tree.Files {
		paths = append(paths, filepath.Join(dirs[i%len(dirs)], fmt.Sprintf("f%06d", i)))
	}
	var m []profile.BenchMetric
	phase := func(name string, n int, f func() error) error {
		start := time.Now()
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		m = append(m, profile.BenchMetric{Name: name, Unit: "ops/s", Value: float64(n) / time.Since(start).Seconds(), HigherIsBetter: true})
		return nil
	}
	stat := func() error {
		for _, p := range paths {
			if _, err := os.Lstat(p); err != nil {
				return err
			}
		}
		return nil
	}
	if err := env.drop(); err != nil {
		return nil, err
	}
	steps := []struct {
		name string
		f    func() error
		cold bool
	}{
		{"create", func() error {
			for _, d := range dirs {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			for _, p := range paths {
				f, err := os.Create(p)
				if err != nil {
					return err
				}
				f.Close()
			}
			return nil
		}, false},
		{"stat_cold", stat, true},
		{"stat_warm", stat, false},
		{"readdir", func() error {
			for _, d := range dirs {
				f, err := os.Open(d)
				if err != nil {
					return err
				}
				_, err = f.Readdirnames(-1)
				f.Close()
				if err != nil {
					return err
				}
			}
			return nil
		}, true},
		{"ls_l", func() error {
			for _, d := range dirs {
				ents, err := os.ReadDir(d)
				if err != nil {
					return err
				}
				for _, e := range ents {
					if _, err := e.Info(); err != nil {
						return err
					}
				}
			}
			return nil
		}, true},
		{"delete", func() error {
			for _, p := range paths {
				if err := os.Remove(p); err != nil {
					return err
				}
			}
			return nil
		}, true},
	}
	for _, s := range steps {
		if s.cold {
			if err := env.drop(); err != nil {
				return nil, err
			}
		}
		if err := phase(s.name, len(paths), s.f); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// command is a workload's process, in a process group of its own that a
// stopped bench kills whole (fio's jobs are processes of their own, and any
// left would keep the mount busy).
func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

func untarBall(src string, w Workload) string {
	return filepath.Join(filepath.Dir(src), "bench-"+w.Name+".tar")
}

// layoutFiles makes f's tree under root: files of random bytes.
func layoutFiles(root string, f *FilesWorkload) error {
	size, _ := ParseSize(f.Size)
	buf := make([]byte, size)
	for i := range f.Files {
		dir := filepath.Join(root, fmt.Sprintf("d%04d", i%f.Dirs))
		if i < f.Dirs {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
		rand.Read(buf)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%06d", i)), buf, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// runSmallFiles reads every file of the tree whole: files/s and MiB/s.
func runSmallFiles(w Workload, env runEnv) ([]profile.BenchMetric, error) {
	root := filepath.Join(env.dir, "bench-"+w.Name)
	if err := env.drop(); err != nil {
		return nil, err
	}
	buf := make([]byte, 128<<10)
	var bytes int64
	start := time.Now()
	for i := range w.SmallFiles.Files {
		f, err := os.Open(filepath.Join(root, fmt.Sprintf("d%04d", i%w.SmallFiles.Dirs), fmt.Sprintf("f%06d", i)))
		if err != nil {
			return nil, err
		}
		n, err := readAll(f, buf)
		f.Close()
		if err != nil {
			return nil, err
		}
		bytes += n
	}
	secs := time.Since(start).Seconds()
	return []profile.BenchMetric{
		{Name: "files", Unit: "files/s", Value: float64(w.SmallFiles.Files) / secs, HigherIsBetter: true},
		{Name: "read", Unit: "MiB/s", Value: float64(bytes) / (1 << 20) / secs, HigherIsBetter: true},
	}, nil
}

// runUntar extracts the generated tarball into the configuration and
// removes what it made (not timed).
func runUntar(w Workload, env runEnv) ([]profile.BenchMetric, error) {
	dest := filepath.Join(env.dir, "bench-"+w.Name+".x")
	os.RemoveAll(dest)
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dest)
	if err := env.drop(); err != nil {
		return nil, err
	}
	start := time.Now()
	if out, err := command(env.ctx, "tar", "-C", dest, "-xf", untarBall(env.src, w)).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("tar: %s", firstLine(out, err))
	}
	secs := time.Since(start).Seconds()
	return []profile.BenchMetric{{Name: "extract", Unit: "files/s", Value: float64(w.Untar.Files) / secs, HigherIsBetter: true},
		{Name: "elapsed", Unit: "s", Value: secs}}, nil
}

// runGitStatus runs git status in the generated repository.
func runGitStatus(w Workload, env runEnv) ([]profile.BenchMetric, error) {
	if err := env.drop(); err != nil {
		return nil, err
	}
	cmd := command(env.ctx, "git", "-c", "safe.directory=*", "status", "--porcelain")
	cmd.Dir = filepath.Join(env.dir, "bench-"+w.Name)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	secs := time.Since(start).Seconds()
	if err != nil {
		return nil, fmt.Errorf("git status: %s", firstLine(out, err))
	}
	if len(out) > 0 {
		return nil, fmt.Errorf("git status found changes in the generated repository: %s", firstLine(out, nil))
	}
	return []profile.BenchMetric{{Name: "elapsed", Unit: "s", Value: secs}}, nil
}

// layoutTree makes files empty files in dirs directories under root.
func layoutTree(root string, files, dirs int) error {
	for d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, fmt.Sprintf("d%04d", d)), 0o755); err != nil {
			return err
		}
	}
	for i := range files {
		f, err := os.Create(filepath.Join(root, fmt.Sprintf("d%04d", i%dirs), fmt.Sprintf("f%06d", i)))
		if err != nil {
			return err
		}
		f.Close()
	}
	return nil
}

// runWalk walks the tree laid out for w, as find DIR -type f -exec stat
// does: each directory listed, each entry stat'ed.
func runWalk(w Workload, env runEnv) ([]profile.BenchMetric, error) {
	root := filepath.Join(env.dir, "bench-"+w.Name)
	if err := env.drop(); err != nil {
		return nil, err
	}
	start := time.Now()
	n := 0
	for range w.Walk.Passes {
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if _, err := os.Lstat(p); err != nil {
				return err
			}
			if !d.IsDir() {
				n++
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if want := w.Walk.Files * w.Walk.Passes; n != want {
		return nil, fmt.Errorf("walk found %d files, %d were laid out", n, want)
	}
	return []profile.BenchMetric{{Name: "walk", Unit: "files/s", Value: float64(n) / time.Since(start).Seconds(), HigherIsBetter: true}}, nil
}

// setupShell runs a shell workload's setup in dir, once per configuration.
func setupShell(ctx context.Context, w Workload, dir string) error {
	if w.Shell == nil || w.Shell.Setup == "" {
		return nil
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", w.Shell.Setup)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("setup %q failed: %s", w.Shell.Setup, firstLine(out, err))
	}
	return nil
}

func runShell(w Workload, env runEnv) ([]profile.BenchMetric, error) {
	if err := env.drop(); err != nil {
		return nil, err
	}
	cmd := command(env.ctx, "sh", "-c", w.Shell.Run)
	cmd.Dir = env.dir
	start := time.Now()
	out, err := cmd.CombinedOutput()
	elapsed := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("%q failed: %s", w.Shell.Run, firstLine(out, err))
	}
	if w.Shell.Metric == "" {
		return []profile.BenchMetric{{Name: "elapsed", Unit: "s", Value: elapsed.Seconds()}}, nil
	}
	m := regexp.MustCompile(w.Shell.Metric).FindSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("the output of %q has no match for the metric %q", w.Shell.Run, w.Shell.Metric)
	}
	v, perr := strconv.ParseFloat(string(m[1]), 64)
	if perr != nil {
		return nil, fmt.Errorf("the metric %q matched %q, which is not a number", w.Shell.Metric, m[1])
	}
	unit := w.Shell.Unit
	return []profile.BenchMetric{{Name: "metric", Unit: unit, Value: v, HigherIsBetter: w.Shell.HigherIsBetter},
		{Name: "elapsed", Unit: "s", Value: elapsed.Seconds()}}, nil
}
