package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/strace"
	"github.com/fusescope/fusescope/internal/systrace"
)

// logTemplate is a block of lines as strace -f -tt -T -y writes them, with
// the mix a real program produces: file and socket I/O, an
// unfinished/resumed pair, errors, mmap, a signal.
var logTemplate = []string{
	`openat(AT_FDCWD</srv/app>, "/srv/app/data/file-000123.bin", O_RDONLY|O_CLOEXEC) = 3</srv/app/data/file-000123.bin> <0.000021>`,
	`fstat(3</srv/app/data/file-000123.bin>, {st_mode=S_IFREG|0644, st_size=65536, ...}) = 0 <0.000004>`,
	`read(3</srv/app/data/file-000123.bin>, "\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00>\x00\x01\x00\x00\x00"..., 65536) = 65536 <0.000031>`,
	`close(3</srv/app/data/file-000123.bin>) = 0 <0.000005>`,
	`openat(AT_FDCWD</srv/app>, "/srv/app/missing.conf", O_RDONLY) = -1 ENOENT (No such file or directory) <0.000012>`,
	`mmap(NULL, 262144, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f3a2c000000 <0.000007>`,
	`sendto(5<TCP:[10.0.0.1:43210->10.0.0.2:5432]>, "Q\0\0\0\35SELECT 1\0", 30, MSG_NOSIGNAL, NULL, 0) = 30 <0.000018>`,
	`recvfrom(5<TCP:[10.0.0.1:43210->10.0.0.2:5432]>,  <unfinished ...>`,
	`futex(0x7f3a2c0008d0, FUTEX_WAKE_PRIVATE, 1) = 1 <0.000006>`,
	`<... recvfrom resumed>"T\0\0\0!\0\1?column?\0\0\0\0\0\0\0\0\0\0\27\0\4\377\377\377\377\0\0D"..., 16384, 0, NULL, NULL) = 66 <0.000410>`,
	`write(1<pipe:[123456]>, "processed file-000123.bin in 0.4 ms\n", 36) = 36 <0.000009>`,
	`--- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=4242, si_uid=1000, si_status=0, si_utime=0, si_stime=0} ---`,
}

// logBlock builds about 4 MiB of strace log: two threads interleaved.
func logBlock() []byte {
	var b []byte
	t := 36000.0
	for i := 0; len(b) < 4<<20; i++ {
		pid := 4000 + (i/len(logTemplate))%2
		if i%len(logTemplate) == 7 || i%len(logTemplate) == 9 {
			pid = 4000 // the unfinished/resumed pair stays on one thread
		}
		t += 0.000013
		ts := fmt.Sprintf("%02d:%02d:%09.6f", int(t/3600)%24, int(t/60)%60, t-float64(int(t/60)*60))
		b = append(b, strconv.Itoa(pid)+" "+ts+" "+logTemplate[i%len(logTemplate)]+"\n"...)
	}
	return b
}

// logReader repeats a block until size bytes have been read, so that the
// benchmark measures the parser, and nothing holds the log in memory.
type logReader struct {
	block      []byte
	size, done int64
	off        int
}

func (r *logReader) Read(p []byte) (int, error) {
	if r.done >= r.size {
		return 0, io.EOF
	}
	n := copy(p, r.block[r.off:])
	r.off = (r.off + n) % len(r.block)
	r.done += int64(n)
	return n, nil
}

func TestBenchSyscallsParse(t *testing.T) {
	if os.Getenv("FUSESCOPE_BENCH") == "" {
		t.Skip("benchmark: run with make bench")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one core
	size := int64(1 << 30)
	if os.Getenv("FUSESCOPE_BENCH_QUICK") != "" {
		size = 64 << 20
	}
	var ms runtime.MemStats
	peak := uint64(0)
	p := strace.NewParser()
	block := logBlock()
	// Whole blocks, so that the log ends with a whole line.
	src := &logReader{block: block, size: (size + int64(len(block)) - 1) / int64(len(block)) * int64(len(block))}
	n := 0
	start := time.Now()
	// What fusescope syscalls LOG runs: the parser, Named's preprocessing,
	// the analyzers.
	r, err := systrace.Analyze(strace.Named(func(emit func(*strace.Event)) error {
		return p.Parse(src, func(e *strace.Event) {
			emit(e)
			if n++; n%100000 == 0 {
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
			}
		})
	}, p), p, systrace.Options{MaxWaits: 10})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if r.Malformed != 0 {
		t.Fatalf("%d malformed lines in the generated log: %+v", r.Malformed, r.FirstBad)
	}
	mb := float64(src.done) / 1e6
	fmt.Printf("\n### strace log analysis (fusescope syscalls), one core\n\n")
	fmt.Printf("| log | lines | time | MB/s | lines/s | peak heap |\n|---|---|---|---|---|---|\n")
	fmt.Printf("| %.0f MB generated on the fly | %d | %.1f s | %.0f | %.0f | %.1f MiB |\n",
		mb, p.Lines, elapsed.Seconds(), mb/elapsed.Seconds(), float64(p.Lines)/elapsed.Seconds(), float64(peak)/(1<<20))
}

// straceAnalyzerTemplate is a block of a log as strace-analyzer reads it
// (`strace -s 0 -ff -o LOG`: no PID column, no timestamps, no -T, no -y,
// strings cut to ""...): file and socket I/O, an error, mmap, a signal.
var straceAnalyzerTemplate = []string{
	`openat(AT_FDCWD, "/srv/app/data/file-%03d.bin", O_RDONLY|O_CLOEXEC) = 3`,
	`fstat(3, {st_mode=S_IFREG|0644, st_size=65536, ...}) = 0`,
	`read(3, ""..., 65536) = 65536`,
	`read(3, "", 65536) = 0`,
	`close(3) = 0`,
	`openat(AT_FDCWD, "/srv/app/missing.conf", O_RDONLY) = -1 ENOENT (No such file or directory)`,
	`mmap(NULL, 262144, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f3a2c000000`,
	`socket(AF_INET, SOCK_STREAM|SOCK_CLOEXEC, IPPROTO_TCP) = 5`,
	`connect(5, {sa_family=AF_INET, sin_port=htons(5432), sin_addr=inet_addr("10.0.0.2")}, 16) = 0`,
	`write(5, ""..., 30) = 30`,
	`read(5, ""..., 16384) = 66`,
	`close(5) = 0`,
	`futex(0x7f3a2c0008d0, FUTEX_WAKE_PRIVATE, 1) = 1`,
	`openat(AT_FDCWD, "/srv/app/out/result-%03d.txt", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 4`,
	`write(4, ""..., 36) = 36`,
	`close(4) = 0`,
	`--- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=4242, si_uid=1000, si_status=0, si_utime=0, si_stime=0} ---`,
}

// straceAnalyzer finds the strace-analyzer binary, or skips.
func straceAnalyzer(t *testing.T) string {
	sa, err := exec.LookPath("strace-analyzer")
	if err == nil {
		return sa
	}
	home, _ := os.UserHomeDir()
	sa = filepath.Join(home, ".cargo", "bin", "strace-analyzer")
	if _, err := os.Stat(sa); err != nil {
		t.Skip("strace-analyzer is not installed (cargo install strace-analyzer)")
	}
	return sa
}

// TestBenchSyscallsVsStraceAnalyzer compares fusescope syscalls with the Rust
// strace-analyzer 0.5.6 (crates.io) on logs in the only format
// strace-analyzer reads (`strace -s 0 -ff`, no timestamps): first what both
// report, per-file reads and writes of a real run, then the time both take
// on the same large log, pinned to one core.
func TestBenchSyscallsVsStraceAnalyzer(t *testing.T) {
	if os.Getenv("FUSESCOPE_BENCH") == "" {
		t.Skip("benchmark: run with make bench")
	}
	sa := straceAnalyzer(t)
	bin, _ := filepath.Abs("../../bin/fusescope")
	compareWithStraceAnalyzer(t, sa, bin)

	size := int64(256 << 20)
	if os.Getenv("FUSESCOPE_BENCH_QUICK") != "" {
		size = 32 << 20
	}
	path := filepath.Join("/var/tmp", fmt.Sprintf("fusescope-bench-%d.log", os.Getpid()))
	defer os.Remove(path)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	var block []byte
	for i := 0; len(block) < 4<<20; i++ {
		line := straceAnalyzerTemplate[i%len(straceAnalyzerTemplate)]
		if strings.Contains(line, "%03d") {
			line = fmt.Sprintf(line, (i/len(straceAnalyzerTemplate))%1000)
		}
		block = append(block, line+"\n"...)
	}
	for written := int64(0); written < size; written += int64(len(block)) {
		f.Write(block)
	}
	f.Close()
	fi, _ := os.Stat(path)
	mb := float64(fi.Size()) / 1e6
	timeIt := func(name string, args ...string) float64 {
		exec.Command("cat", path).Run() // warm the page cache
		start := time.Now()
		cmd := exec.Command("taskset", append([]string{"-c", "0", name}, args...)...)
		cmd.Stdout = io.Discard
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return time.Since(start).Seconds()
	}
	fmt.Printf("\n### fusescope syscalls and strace-analyzer on the same %.0f MB log, one core (taskset -c 0)\n\n", mb)
	fmt.Println("| tool | run | seconds | MB/s |")
	fmt.Println("|---|---|---|---|")
	for rep := 1; rep <= 3; rep++ {
		s := timeIt(bin, "syscalls", "--json", path)
		fmt.Printf("| fusescope syscalls --json | %d | %.2f | %.0f |\n", rep, s, mb/s)
		s = timeIt(sa, path)
		fmt.Printf("| strace-analyzer | %d | %.2f | %.0f |\n", rep, s, mb/s)
	}
}

// compareWithStraceAnalyzer records a shell script that copies files with
// dd and head as strace-analyzer asks (`strace -s 0 -ff -o LOG`), runs both
// tools on the set, and prints what each found per file: calls exactly,
// bytes as strace-analyzer rounds them. Files whose calls differ fail.
func compareWithStraceAnalyzer(t *testing.T, sa, bin string) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	os.Mkdir(data, 0o755)
	script := `d=$1
dd if=/dev/zero of=$d/f1 bs=4096 count=100 status=none
dd if=/dev/zero of=$d/f2 bs=1000 count=33 status=none
dd if=$d/f1 of=/dev/null bs=512 status=none
dd if=$d/f2 of=$d/f3 bs=3000 status=none
head -c 5000 $d/f1 > /dev/null
`
	os.WriteFile(filepath.Join(dir, "work.sh"), []byte(script), 0o644)
	prefix := filepath.Join(dir, "log")
	// bash, not sh: strace-analyzer follows clone(), and dash uses vfork().
	if out, err := exec.Command("strace", "-s", "0", "-ff", "-o", prefix, "bash", filepath.Join(dir, "work.sh"), data).CombinedOutput(); err != nil {
		t.Fatalf("strace: %v: %s", err, out)
	}
	logs, _ := filepath.Glob(prefix + ".*")
	sort.Slice(logs, func(i, j int) bool { return strace.PIDSuffix(logs[i]) < strace.PIDSuffix(logs[j]) })

	// strace-analyzer: one line per file per open (-v: /tmp and /dev too),
	// "read 400.0K with 100 ops (4.0K / op) /path".
	out, err := exec.Command(sa, "-v", logs[0]).Output()
	if err != nil {
		t.Fatalf("strace-analyzer: %v", err)
	}
	type totals struct {
		reads, writes     int
		bytesR, bytesW    float64
		slackR, slackW    float64 // strace-analyzer's rounding
		ourBR, ourBW      int64
		ourReads, ourWrit int
	}
	files := map[string]*totals{}
	get := func(name string) *totals {
		if files[name] == nil {
			files[name] = &totals{}
		}
		return files[name]
	}
	line := regexp.MustCompile(`^(read|write) ([0-9.]+)([KMGT]?)B? with (\d+) ops \(.*\) (.+)$`)
	for _, l := range strings.Split(string(out), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		unit := map[string]float64{"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[m[3]]
		ops, _ := strconv.Atoi(m[4])
		f := get(m[5])
		slack := 0.05 * unit
		if m[3] == "" {
			slack = 0
		}
		if m[1] == "read" {
			f.reads, f.bytesR, f.slackR = f.reads+ops, f.bytesR+v*unit, f.slackR+slack
		} else {
			f.writes, f.bytesW, f.slackW = f.writes+ops, f.bytesW+v*unit, f.slackW+slack
		}
	}
	out, err = exec.Command(bin, append([]string{"syscalls", "--json", "--top", "0"}, logs...)...).Output()
	if err != nil {
		t.Fatalf("fusescope syscalls: %v", err)
	}
	rec, err := profile.Parse(out)
	if err != nil || rec.Syscalls == nil {
		t.Fatalf("fusescope syscalls --json: %v, or no syscalls section", err)
	}
	r := rec.Syscalls
	for _, fs := range r.Files {
		if fs.Reads+fs.Writes == 0 {
			continue
		}
		f := get(fs.Target)
		f.ourReads, f.ourWrit, f.ourBR, f.ourBW = fs.Reads, fs.Writes, fs.BytesRead, fs.BytesWritten
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Printf("\n### What fusescope syscalls and strace-analyzer report on the same strace -s 0 -ff set\n\n")
	fmt.Println("| file | reads (fusescope / strace-analyzer) | bytes read | writes | bytes written | agree |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, n := range names {
		f := files[n]
		agree := f.reads == f.ourReads && f.writes == f.ourWrit &&
			math.Abs(float64(f.ourBR)-f.bytesR) <= f.slackR && math.Abs(float64(f.ourBW)-f.bytesW) <= f.slackW
		fmt.Printf("| %s | %d / %d | %d / %.0f | %d / %d | %d / %.0f | %v |\n", strings.TrimPrefix(n, dir+"/"),
			f.ourReads, f.reads, f.ourBR, f.bytesR, f.ourWrit, f.writes, f.ourBW, f.bytesW, agree)
		if strings.HasPrefix(n, data) && !agree {
			t.Errorf("%s: fusescope and strace-analyzer disagree", n)
		}
	}
}

// TestBenchSyscallsFileSetVsStraceAnalyzer compares fusescope syscalls with
// strace-analyzer on the kind of set strace-analyzer is made for: a real
// `strace -s 0 -ff` set of many small files, a Go build with a clean
// GOCACHE (about 2,700 files, 68 MB; quick: one package's build). Both read
// the same files: those strace-analyzer opens as it follows the clones
// (under strace -e openat), given to fusescope by name. CPU seconds (user
// and system) of each, interleaved, five runs each; fusescope's text view
// and --json.
func TestBenchSyscallsFileSetVsStraceAnalyzer(t *testing.T) {
	if os.Getenv("FUSESCOPE_BENCH") == "" {
		t.Skip("benchmark: run with make bench")
	}
	sa := straceAnalyzer(t)
	bin, _ := filepath.Abs("../../bin/fusescope")
	root, _ := filepath.Abs("../..")
	dir := t.TempDir()
	pkg := "./cmd/fusescope"
	if os.Getenv("FUSESCOPE_BENCH_QUICK") != "" {
		pkg = "./internal/profile"
	}
	build := exec.Command("strace", "-s", "0", "-ff", "-o", filepath.Join(dir, "set", "t"), "go", "build", "-o", filepath.Join(dir, "out"), pkg)
	build.Dir = root
	build.Env = append(os.Environ(), "GOCACHE="+filepath.Join(dir, "gocache"), "GOFLAGS=-mod=mod")
	os.Mkdir(filepath.Join(dir, "set"), 0o755)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("strace go build: %v\n%s", err, out)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "set", "t.*"))
	sort.Slice(logs, func(i, j int) bool { return strace.PIDSuffix(logs[i]) < strace.PIDSuffix(logs[j]) })
	// The files strace-analyzer reads of the set, starting from the first.
	opened := filepath.Join(dir, "opened")
	if out, err := exec.Command("strace", "-f", "-e", "trace=openat", "-o", opened, sa, logs[0]).CombinedOutput(); err != nil {
		t.Fatalf("strace-analyzer: %v\n%s", err, out)
	}
	data, _ := os.ReadFile(opened)
	var read []string
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`"(`+regexp.QuoteMeta(filepath.Join(dir, "set"))+`/t\.\d+)"`).FindAllStringSubmatch(string(data), -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			read = append(read, m[1])
		}
	}
	var bytes int64
	for _, f := range read {
		if st, err := os.Stat(f); err == nil {
			bytes += st.Size()
		}
	}
	mb := float64(bytes) / 1e6
	cpu := func(name string, args ...string) float64 {
		cmd := exec.Command(name, args...)
		cmd.Stdout = io.Discard
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	exec.Command("cat", read...).Run() // the page cache warm
	runs := map[string][]float64{}
	order := []string{"fusescope syscalls", "fusescope syscalls --json", "strace-analyzer"}
	for range 5 {
		runs[order[0]] = append(runs[order[0]], cpu(bin, append([]string{"syscalls"}, read...)...))
		runs[order[1]] = append(runs[order[1]], cpu(bin, append([]string{"syscalls", "--json"}, read...)...))
		runs[order[2]] = append(runs[order[2]], cpu(sa, logs[0]))
	}
	median := func(x []float64) float64 {
		s := append([]float64(nil), x...)
		sort.Float64s(s)
		return s[len(s)/2]
	}
	fmt.Printf("\n### An strace -s 0 -ff set of go build %s: %d files, the %d (%.1f MB) strace-analyzer reads, given to both\n\n", pkg, len(logs), len(read), mb)
	fmt.Println("| tool | CPU seconds, 5 runs interleaved | MB per CPU-second (median) | against strace-analyzer |")
	fmt.Println("|---|---|---|---|")
	base := median(runs[order[2]])
	for _, name := range order {
		var s []string
		for _, v := range runs[name] {
			s = append(s, fmt.Sprintf("%.2f", v))
		}
		m := median(runs[name])
		fmt.Printf("| %s | %s | %.0f | %.2fx |\n", name, strings.Join(s, ", "), mb/m, base/m)
	}
	// What this set gave after the buffers were shared (2.6x text, 2.1x
	// JSON): a regression to where it was (0.5x) fails.
	if ratio := base / median(runs[order[0]]); ratio < 1.5 {
		t.Errorf("fusescope syscalls is %.2fx strace-analyzer on an -ff set, below 1.5x", ratio)
	}
}
