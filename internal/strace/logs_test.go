package strace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// eventsJSON reads events as the analyzers would and returns them, one
// JSON line each with the target and peer named, and the parser's counts.
func eventsJSON(t *testing.T, events func(emit func(*Event)) error, p *Parser) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	err := events(func(e *Event) {
		enc.Encode(struct {
			*Event
			Target, Peer string
		}{e, e.Target(), e.Peer()})
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Malformed {
		p.Malformed[i].File = filepath.Base(p.Malformed[i].File)
	}
	fmt.Fprintf(&b, "lines %d, parsed %d, bad %d %v, unfinished %d, followed fds %v\n",
		p.Lines, p.Parsed, p.Bad, p.Malformed, p.Pending()+p.Lost, p.FollowedFDs)
	return b.String()
}

// logJSON reads the logs at paths as eventsJSON does.
func logJSON(t *testing.T, paths ...string) string {
	t.Helper()
	p := NewParser()
	return eventsJSON(t, Logs(paths, p), p)
}

// A compressed log reads as the log itself, whatever its name says: the
// format is told by the first bytes. systrace/testdata/sample.log.bz2 was written by
// the bzip2 command (Go has no bzip2 writer).
func TestLogsReadCompressedLogs(t *testing.T) {
	plain, err := os.ReadFile("../systrace/testdata/sample.log")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(plain[:1000])
	w.Close()
	w = gzip.NewWriter(&gz) // a second member, as cat a.gz b.gz makes
	w.Write(plain[1000:])
	w.Close()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	zst := enc.EncodeAll(plain, nil)
	bz2, err := os.ReadFile("../systrace/testdata/sample.log.bz2")
	if err != nil {
		t.Fatal(err)
	}
	want := logJSON(t, write("sample.log", plain))
	for name, data := range map[string][]byte{"sample.log.gz": gz.Bytes(), "sample.log.zst": zst, "sample.log.bz2": bz2, "no-suffix": gz.Bytes()} {
		got := logJSON(t, write(name, data))
		if strings.ReplaceAll(got, name, "sample.log") != want {
			t.Errorf("%s: the events differ from the plain log's:\n%s\nwant\n%s", name, got, want)
		}
	}

	// A damaged one is an error that names the file, not the events
	// read before the damage.
	bad := write("bad.gz", append(gz.Bytes()[:len(gz.Bytes())/2:len(gz.Bytes())/2], 0, 1, 2))
	p := NewParser()
	if err := Logs([]string{bad}, p)(func(*Event) {}); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("a damaged gzip log: error %v, want one naming %s", err, bad)
	}
}

func TestPIDSuffix(t *testing.T) {
	for path, want := range map[string]int{
		"app.log.1234": 1234, "app.log.1234.gz": 1234, "dir/app.log.77.zst": 77, "app.log.5.bz2": 5,
		"app.log": 0, "app.log.gz": 0, "app.log.-3": 0, "app.1x": 0,
	} {
		if got := PIDSuffix(path); got != want {
			t.Errorf("PIDSuffix(%q) = %d, want %d", path, got, want)
		}
	}
}

// writeFileSet writes an strace -s 0 -ff set of n processes, as a build's:
// a parent that clones a child per file, each child a few hundred short
// lines in strace's padded columns, some with long strings (past the
// 64 KiB a string keeps, one past the 1 MiB line buffer), a CRLF line, a
// file without its last newline, a call left unfinished, and one file
// gzip-compressed.
func writeFileSet(t *testing.T, dir string, n int) []string {
	t.Helper()
	pad := func(call, ret string) string { return fmt.Sprintf("%-39s = %s\n", call, ret) }
	var paths []string
	write := func(pid int, body string) {
		path := filepath.Join(dir, fmt.Sprintf("t.%d", pid))
		data := []byte(body)
		if pid%97 == 0 {
			var gz bytes.Buffer
			w := gzip.NewWriter(&gz)
			w.Write(data)
			w.Close()
			data = gz.Bytes()
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	const root = 1000
	var parent strings.Builder
	parent.WriteString(pad(`execve("/usr/bin/go", [...], 0x7ffc /* 36 vars */)`, "0"))
	parent.WriteString(pad(`pipe2([3, 4], O_CLOEXEC)`, "0"))
	for i := 1; i <= n; i++ {
		pid := root + i
		parent.WriteString(pad(`clone(child_stack=NULL, flags=CLONE_VM|CLONE_VFORK|SIGCHLD)`, strconv.Itoa(pid)))
		parent.WriteString(pad(`read(3, ""..., 512)`, strconv.Itoa(i%50)))
		var b strings.Builder
		b.WriteString(pad(fmt.Sprintf(`execve("/usr/lib/go/pkg/tool/compile", ["compile", "-p", "pkg%d"], 0x7ffd /* 36 vars */)`, i), "0"))
		for j := 0; j < 40+i%60; j++ {
			file := fmt.Sprintf("/src/pkg%d/f%d.go", i, j%7)
			b.WriteString(pad(fmt.Sprintf(`openat(AT_FDCWD, "%s", O_RDONLY|O_CLOEXEC)`, file), "5"))
			b.WriteString(pad(`fstat(5, {st_mode=S_IFREG|0644, st_size=4096, ...})`, "0"))
			b.WriteString(pad(`read(5, ""..., 4096)`, strconv.Itoa(100+j)))
			b.WriteString(pad(`close(5)`, "0"))
			b.WriteString(pad(fmt.Sprintf(`newfstatat(AT_FDCWD, "/src/pkg%d/missing%d", 0xc0001, 0)`, i, j%3), "-1 ENOENT (No such file or directory)"))
			b.WriteString(pad(`nanosleep({tv_sec=0, tv_nsec=20000}, NULL)`, "0"))
			b.WriteString(pad(`fcntl(1, F_GETFL)`, "0x8001 (flags O_WRONLY|O_LARGEFILE)"))
		}
		switch {
		case i%50 == 1:
			b.WriteString(pad(fmt.Sprintf(`write(1, "%s", 200000)`, strings.Repeat(`\x61`, 50000)), "200000"))
		case i == 77:
			b.WriteString(pad(fmt.Sprintf(`write(4, "%s", 1500000)`, strings.Repeat("b", 1500000)), "1500000"))
		case i%41 == 0:
			b.WriteString("write(4, \"\"..., 8)                      = 8\r\n")
		case i%43 == 0:
			b.WriteString(`futex(0xc000100148, FUTEX_WAIT_PRIVATE, 0, NULL <unfinished ...>` + "\n")
		}
		b.WriteString(pad(`write(4, ""..., 64)`, "64"))
		b.WriteString("exit_group(0)                           = ?\n")
		if i%13 != 0 {
			b.WriteString("+++ exited with 0 +++\n")
		} else {
			b.WriteString("+++ exited with 0 +++") // no newline at the end
		}
		write(pid, b.String())
		parent.WriteString(pad(fmt.Sprintf(`wait4(%d, [{WIFEXITED(s) && WEXITSTATUS(s) == 0}], 0, NULL)`, pid), strconv.Itoa(pid)))
		parent.WriteString(fmt.Sprintf("--- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=%d, si_uid=0, si_status=0, si_utime=0, si_stime=0} ---\n", pid))
	}
	parent.WriteString("exit_group(0)                           = ?\n+++ exited with 0 +++\n")
	write(root, parent.String())
	return paths
}

// An -ff set's files share one line buffer and one reader: the set
// allocates about what one file does, not a megabyte per file (a Go
// build's 2,779 files zeroed 2.9 GB of buffers, a third of the time).
func TestFileSetBuffersReused(t *testing.T) {
	paths := writeFileSet(t, t.TempDir(), 300)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	p := NewParser()
	pids := map[int]bool{}
	err := Logs(paths, p)(func(e *Event) { pids[e.PID] = true })
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) != 301 {
		t.Fatalf("%d processes, want 301", len(pids))
	}
	// What the parse needs besides: the lines as strings and the 1.5 MB
	// line once. Buffers per file would be 300 MiB.
	got := after.TotalAlloc - before.TotalAlloc
	if got > 64<<20 {
		t.Errorf("the set of 301 files allocated %d MiB", got>>20)
	}
	t.Logf("the set of 301 files allocated %.1f MiB", float64(got)/(1<<20))
}

// The buffers kept from file to file change nothing: the events of a set
// of many files are the ones fresh buffers for each file gave.
func TestFileSetSameEventsAsFreshBuffers(t *testing.T) {
	paths := writeFileSet(t, t.TempDir(), 300)
	p := NewParser()
	reused := eventsJSON(t, Logs(paths, p), p)
	// The old path: every file with a reader and a line buffer of its own.
	q := NewParser()
	fresh := eventsJSON(t, Named(func(emit func(*Event)) error {
		ordered := append([]string(nil), paths...)
		sort.SliceStable(ordered, func(i, j int) bool { return PIDSuffix(ordered[i]) < PIDSuffix(ordered[j]) })
		for _, path := range ordered {
			var head *bufio.Reader
			f, err := openLog(path, &head)
			if err != nil {
				return err
			}
			q.File, q.DefaultPID, q.relClock, q.lines = path, PIDSuffix(path), 0, nil
			err = q.Parse(f, emit)
			f.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}, q), q)
	if reused != fresh {
		t.Errorf("the events with buffers reused differ from those with fresh buffers:\n%.2000s\n%.2000s", reused, fresh)
	}
	if !strings.Contains(reused, `"/src/pkg77/f6.go"`) || !strings.Contains(reused, "unfinished 6,") {
		t.Errorf("the set was not read whole: %.400s", reused)
	}
}
