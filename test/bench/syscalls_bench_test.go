package bench

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

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
	p := systrace.NewParser()
	src := &logReader{block: logBlock(), size: size}
	n := 0
	start := time.Now()
	r, err := systrace.Analyze(func(emit func(*systrace.Event)) error {
		return p.Parse(src, func(e *systrace.Event) {
			emit(e)
			if n++; n%100000 == 0 {
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
			}
		})
	}, p, systrace.Options{MaxWaits: 10})
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

// TestBenchSyscallsVsStraceAnalyzer times fusescope syscalls and the Rust
// strace-analyzer (crates.io) on the same file, in the format
// strace-analyzer documents (strace -ff -ttt, no -y), pinned to one core.
func TestBenchSyscallsVsStraceAnalyzer(t *testing.T) {
	if os.Getenv("FUSESCOPE_BENCH") == "" {
		t.Skip("benchmark: run with make bench")
	}
	sa, err := exec.LookPath("strace-analyzer")
	if err != nil {
		home, _ := os.UserHomeDir()
		sa = filepath.Join(home, ".cargo", "bin", "strace-analyzer")
		if _, err := os.Stat(sa); err != nil {
			t.Skip("strace-analyzer is not installed (cargo install strace-analyzer)")
		}
	}
	bin, _ := filepath.Abs("../../bin/fusescope")
	size := int64(256 << 20)
	path := filepath.Join("/var/tmp", fmt.Sprintf("fusescope-bench-%d.log", os.Getpid()))
	defer os.Remove(path)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// -ff files have no PID column; -ttt timestamps; no -y targets.
	var block []byte
	for i := 0; len(block) < 4<<20; i++ {
		line := logTemplate[i%len(logTemplate)]
		line = fdTargetRE.ReplaceAllString(line, "$1")
		block = append(block, fmt.Sprintf("%.6f %s\n", 1700000000+float64(i)*0.000013, line)...)
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

var fdTargetRE = regexp.MustCompile(`(\d+)<[^>]*>`)
