package strace

import (
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// Logs is the event source of strace log files, through Named. The files
// of an strace -ff set (LOG.PID) are read by PID, so that a parent's file,
// with the fork that hands its fds to a child, comes before the child's
// (PIDs wrap around only on long-running systems); files of other names
// come first, in the order given.
func Logs(paths []string, p *Parser) func(emit func(*Event)) error {
	return Named(func(emit func(*Event)) error {
		ordered := append([]string(nil), paths...)
		sort.SliceStable(ordered, func(i, j int) bool { return PIDSuffix(ordered[i]) < PIDSuffix(ordered[j]) })
		var head *bufio.Reader // kept from file to file, as the parser's line buffer is
		for _, path := range ordered {
			f, err := openLog(path, &head)
			if err != nil {
				return err
			}
			p.File, p.DefaultPID, p.relClock = path, PIDSuffix(path), 0
			err = p.Parse(f, emit)
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
		return nil
	}, p)
}

// Named is the preprocessing stage between p's parsed events and the
// analyzers: where the log has no -y targets, it follows fds to name them;
// where it has, it names sockets by their addresses; and it names the fd a
// poll waited on.
func Named(parsed func(emit func(*Event)) error, p *Parser) func(emit func(*Event)) error {
	namer := newFDNamer()
	named := nameFDs(parsed, namer)
	return func(emit func(*Event)) error {
		err := named(emit)
		p.FollowedFDs = !namer.annotated
		return err
	}
}

// Stdin is the log name that reads standard input.
const Stdin = "-"

// compressedSuffixes are left out of a name before PIDSuffix reads it:
// LOG.1234.gz is process 1234's file of a compressed -ff set.
var compressedSuffixes = []string{".gz", ".bz2", ".zst"}

// openLog opens an strace log for reading: "-" is standard input, and a
// gzip, bzip2 or zstd log (logrotate's, or one kept compressed) is
// decompressed as it is read, recognised by its first bytes, not its name.
// The reader that reads those bytes is *head, made on the first call and
// reset on the next: the previous file must be done with.
func openLog(path string, head **bufio.Reader) (io.ReadCloser, error) {
	var f io.ReadCloser = os.Stdin
	if path != Stdin {
		var err error
		if f, err = openFile(path); err != nil {
			return nil, err
		}
	}
	if *head == nil {
		*head = bufio.NewReaderSize(f, 1<<16)
	} else {
		(*head).Reset(f)
	}
	r := *head
	magic, _ := r.Peek(4)
	var dec io.Reader
	var closeDec func()
	var err error
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		dec, err = gzip.NewReader(r)
	case bytes.HasPrefix(magic, []byte("BZh")):
		dec = bzip2.NewReader(r)
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		var z *zstd.Decoder
		if z, err = zstd.NewReader(r, zstd.WithDecoderConcurrency(1)); err == nil {
			dec, closeDec = z, z.Close
		}
	default:
		dec = r
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &logFile{Reader: dec, f: f, closeDec: closeDec}, nil
}

type logFile struct {
	io.Reader
	f        io.ReadCloser
	closeDec func()
}

func (l *logFile) Close() error {
	if l.closeDec != nil {
		l.closeDec()
	}
	if l.f == os.Stdin {
		return nil
	}
	return l.f.Close()
}

// rawFile reads a file through its descriptor alone. An -ff set is
// thousands of small files, and os.Open's work besides the open (four
// fcntl calls and an epoll registration that a regular file refuses) was
// a fifth of the set's system time.
type rawFile int

func openFile(path string) (rawFile, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: path, Err: err}
		}
		return rawFile(fd), nil
	}
}

func (f rawFile) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(int(f), b)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(b) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f rawFile) Close() error { return unix.Close(int(f)) }

// PIDSuffix is the PID of an strace -ff file (LOG.1234, or LOG.1234.gz
// compressed), or 0.
func PIDSuffix(path string) int {
	for _, c := range compressedSuffixes {
		if trimmed, ok := strings.CutSuffix(path, c); ok {
			path = trimmed
			break
		}
	}
	ext := filepath.Ext(path)
	if ext == "" {
		return 0
	}
	pid, err := strconv.Atoi(ext[1:])
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
