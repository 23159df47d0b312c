package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/stats"
)

// fsConfig is one file system under test: mount returns the directory to
// run workloads in and what unmounts it.
type fsConfig struct {
	name  string
	mount func(t *testing.T, src, mnt string) (dir string, umount func())
}

func labfsConfig(bin, preset string, extra ...string) fsConfig {
	name := strings.TrimSpace("labfs " + preset + " " + strings.Join(extra, " "))
	return fsConfig{name, func(t *testing.T, src, mnt string) (string, func()) {
		args := append([]string{"fs", "mount", "--background", "--preset", preset, src, mnt}, extra...)
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("fs mount %s: %v %s", preset, err, out)
		}
		return mnt, func() { exec.Command(bin, "fs", "umount", mnt).Run() }
	}}
}

const loopbackName = "go-fuse loopback (no passthrough)"

func loopbackConfig(bin string) fsConfig {
	return fsConfig{loopbackName, func(t *testing.T, src, mnt string) (string, func()) {
		cmd := exec.Command(bin, mnt, src)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if line, _ := bufio.NewReader(out).ReadString('\n'); !strings.HasPrefix(line, "Mounted") {
			t.Fatalf("loopback: %q", line)
		}
		return mnt, func() { exec.Command("umount", mnt).Run(); cmd.Wait() }
	}}
}

// scratchFS makes a fresh ext4 file system, with a journal, on a loop device
// (direct I/O, so the outer file system does not cache it) and returns its
// mount point. The VM's root file system has no journal, and ext4 without
// one checks for recently deleted inodes (deleted in the last 60 s, 360 s if
// still dirty) before it reuses any: on it, creating 5,000 files through a
// FUSE mount right after another mount's delete phase ran at 1,400-5,800/s,
// and the next create at 7,500-10,700/s, so the create column measured the
// order of the configurations. On the scratch file system the order made no
// difference.
func scratchFS(t *testing.T, name string) string {
	img := filepath.Join("/var/tmp", name+".img")
	mnt := filepath.Join("/var/tmp", name)
	run := func(args ...string) string {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(2 << 30)
	f.Close()
	t.Cleanup(func() { os.Remove(img) })
	run("mkfs.ext4", "-q", "-F", "-N", "131072", img)
	dev := run("losetup", "--direct-io=on", "--find", "--show", img)
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	os.MkdirAll(mnt, 0o755)
	run("mount", dev, mnt)
	t.Cleanup(func() { exec.Command("umount", mnt).Run(); os.Remove(mnt) })
	return mnt
}

// buildLoopback builds the go-fuse loopback baseline (test/bench/loopback),
// or takes the one FUSESCOPE_BENCH_LOOPBACK names (for a machine with no
// Go toolchain).
func buildLoopback(t *testing.T) string {
	if prebuilt := os.Getenv("FUSESCOPE_BENCH_LOOPBACK"); prebuilt != "" {
		return prebuilt
	}
	loop := filepath.Join(t.TempDir(), "loopback")
	if out, err := exec.Command("go", "build", "-o", loop, "./loopback").CombinedOutput(); err != nil {
		t.Fatalf("building the loopback baseline: %v %s", err, out)
	}
	return loop
}

func dropCaches(t *testing.T) {
	exec.Command("sync").Run()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o200); err != nil {
		t.Fatal(err)
	}
}

// fioJob is one fio workload of the passthrough paper's matrix (seed 004):
// 4 KiB blocks, the sync engine, fsync on close, caches dropped before.
type fioJob struct {
	name string
	args []string
}

var fioJobs = []fioJob{
	{"read", []string{"--rw=read"}},
	{"write", []string{"--rw=write"}},
	// O_DIRECT for random reads: fio's random fadvise hint does not reach the
	// backing file under passthrough, and read-ahead would serve the reads.
	{"randread", []string{"--rw=randread", "--direct=1"}},
	{"randwrite", []string{"--rw=randwrite"}},
}

// fileIn is the file a job works on in dir: every configuration reads the
// same file, laid out once, so that where it landed on the virtual disk (and
// what of it the host still caches) is the same for all of them; writes go
// to a file of the workdir's own.
func (j fioJob) fileIn(dir, workdir string) string {
	if j.reads() {
		return filepath.Join(dir, "read.dat")
	}
	return filepath.Join(workdir, "write.dat")
}

func (j fioJob) reads() bool { return j.name == "read" || j.name == "randread" }

// fio runs one job on file and returns MiB/s.
func fio(t *testing.T, file string, job fioJob, size string) float64 {
	args := append([]string{"--name=bench", "--filename=" + file, "--size=" + size,
		"--bs=4k", "--ioengine=sync", "--fsync_on_close=1", "--fadvise_hint=0", "--output-format=json"}, job.args...)
	out, err := exec.Command("fio", args...).Output()
	if err != nil {
		t.Fatalf("fio %s on %s: %v\n%s", job.name, file, err, out)
	}
	var res struct {
		Jobs []struct {
			Read struct {
				BW float64 `json:"bw"`
			} `json:"read"`
			Write struct {
				BW float64 `json:"bw"`
			} `json:"write"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res.Jobs) == 0 {
		t.Fatalf("fio output: %v", err)
	}
	return (res.Jobs[0].Read.BW + res.Jobs[0].Write.BW) / 1024 // KiB/s -> MiB/s
}

// entryExpiry is the pause before the delete phase: longer than the 1 s entry
// timeout of every configuration, so that each starts delete from the same
// state (every name looked up again). Without it, which dentries are still
// valid depends on how long the phases before took: go-fuse's loopback,
// which always uses READDIRPLUS, refreshes every dentry in its slower ls -l
// and then deletes without LOOKUPs, while a READDIRPLUS_AUTO mount's fast
// ls -l leaves delete to look each name up.
const entryExpiry = 1500 * time.Millisecond

// metadata runs the metadata phases on n files and returns each phase's
// rate in operations per second.
func metadata(t *testing.T, dir string, n int) map[string]float64 {
	d := filepath.Join(dir, "meta")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	names := make([]string, n)
	for i := range names {
		names[i] = filepath.Join(d, fmt.Sprintf("f%05d", i))
	}
	rate := map[string]float64{}
	phase := func(name string, f func()) {
		start := time.Now()
		f()
		rate[name] = float64(n) / time.Since(start).Seconds()
	}
	phase("create", func() {
		for _, p := range names {
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	})
	dropCaches(t)
	stat := func() {
		for _, p := range names {
			if _, err := os.Lstat(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	phase("stat cold", stat)
	phase("stat warm", stat)
	phase("ls -l", func() {
		ents, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			e.Info()
		}
	})
	time.Sleep(entryExpiry)
	phase("delete", func() {
		for _, p := range names {
			os.Remove(p)
		}
	})
	return rate
}

func TestBenchLabFS(t *testing.T) {
	setup(t)
	bin, _ := filepath.Abs("../../bin/fusescope")
	loop := buildLoopback(t)
	configs := []fsConfig{
		nativeConfig,
		labfsConfig(bin, "default"), labfsConfig(bin, "default", "--readdirplus=on"),
		labfsConfig(bin, "nocache"), labfsConfig(bin, "writeback"),
		labfsConfig(bin, "passthrough"), loopbackConfig(loop),
	}
	reps, size, files := 5, "64m", 19000
	if os.Getenv("FUSESCOPE_BENCH_QUICK") != "" {
		reps, size, files = 1, "16m", 2000
	}
	base := scratchFS(t, fmt.Sprintf("fusescope-bench-%d", os.Getpid()))
	type key struct{ workload, config string }
	results := map[key][]float64{}
	ratios := map[key][]float64{}
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	// One source directory for all: the file to read is laid out once.
	src := filepath.Join(base, "src")
	os.MkdirAll(src, 0o755)
	fio(t, filepath.Join(src, "read.dat"), fioJob{"read", []string{"--rw=write"}}, size)
	for rep := 0; rep < reps; rep++ {
		got := map[key]float64{}
		for _, i := range r.Perm(len(configs)) {
			c := configs[i]
			mnt := filepath.Join(base, fmt.Sprint("mnt", i))
			os.MkdirAll(mnt, 0o755)
			dir, umount := c.mount(t, src, mnt)
			for _, job := range fioJobs {
				dropCaches(t)
				file := job.fileIn(dir, dir)
				got[key{job.name, c.name}] = fio(t, file, job, size)
				if !job.reads() {
					os.Remove(file)
				}
			}
			for phase, v := range metadata(t, dir, files) {
				got[key{phase, c.name}] = v
			}
			umount()
		}
		for k, v := range got {
			results[k] = append(results[k], v)
			ratios[k] = append(ratios[k], v/got[key{k.workload, "native"}])
		}
	}
	fmt.Printf("\n### fio, 4 KiB, sync engine, fsync_on_close, caches dropped (%s file, %d interleaved repetitions)\n\n", size, reps)
	fmt.Println("Cells: median MiB/s, and in brackets the median ratio to native of the same repetition.")
	fmt.Println()
	header := "| workload |"
	sep := "|---|"
	for _, c := range configs {
		header += " " + c.name + " |"
		sep += "---|"
	}
	fmt.Println(header)
	fmt.Println(sep)
	row := func(w, unit string) {
		line := "| " + w + " |"
		for _, c := range configs {
			k := key{w, c.name}
			line += fmt.Sprintf(" %.1f%s (%.2fx) |", stats.Median(results[k]), unit, stats.Median(ratios[k]))
		}
		fmt.Println(line)
	}
	for _, job := range fioJobs {
		row(job.name, "")
	}
	fmt.Printf("\n### Metadata, %d files (operations per second)\n\n", files)
	fmt.Println(header)
	fmt.Println(sep)
	for _, phase := range []string{"create", "stat cold", "stat warm", "ls -l", "delete"} {
		row(phase, "")
	}

	// The second target, as a paired comparison: each repetition's
	// default-mode result over the loopback's of the same repetition.
	fmt.Printf("\n### labfs default / go-fuse loopback, paired by repetition\n\n")
	fmt.Println("| workload | median ratio | min-max | repetitions faster |")
	fmt.Println("|---|---|---|---|")
	for _, w := range []string{"read", "write", "randread", "randwrite", "create", "stat cold", "stat warm", "ls -l", "delete"} {
		lab, loop := results[key{w, "labfs default"}], results[key{w, loopbackName}]
		var r []float64
		faster := 0
		for i := range min(len(lab), len(loop)) {
			r = append(r, lab[i]/loop[i])
			if lab[i] >= loop[i] {
				faster++
			}
		}
		if len(r) == 0 {
			continue
		}
		fmt.Printf("| %s | %.2fx | %.2f-%.2f | %d of %d |\n", w, stats.Median(r), slices.Min(r), slices.Max(r), faster, len(r))
	}
}
