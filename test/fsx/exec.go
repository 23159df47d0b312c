package fsx

import (
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/debug"
	"syscall"

	"golang.org/x/sys/unix"
)

// Result is what a process saw doing an operation.
type Result struct {
	Data []byte // what a read returned
	Size int64  // fstat's size afterwards
	Err  string // the operation's error, "" if none
}

// executor does operations on the file through a descriptor of its own.
type executor interface {
	do(op Op) Result
	close() error
}

// local does operations in this process.
type local struct {
	path string
	fd   int
	buf  []byte
}

func openLocal(path string) (*local, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("fsx: open %s: %w", path, err)
	}
	return &local{path: path, fd: fd}, nil
}

func (l *local) close() error { return unix.Close(l.fd) }

func errName(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
	}
	return err.Error()
}

// scratch is a buffer of n bytes, reused between operations.
func (l *local) scratch(n int64) []byte {
	if int64(cap(l.buf)) < n {
		l.buf = make([]byte, n)
	}
	return l.buf[:n]
}

func (l *local) do(op Op) (r Result) {
	if err := l.run(op, &r); err != nil {
		r.Err = fmt.Sprintf("%s: %s", op.Kind, errName(err))
		r.Data = nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(l.fd, &st); err != nil {
		r.Err += " fstat: " + errName(err)
	}
	r.Size = st.Size
	return r
}

func (l *local) run(op Op, r *Result) error {
	switch op.Kind {
	case Read:
		if _, err := unix.Seek(l.fd, op.Off, io.SeekStart); err != nil {
			return err
		}
		// One call, as an application makes it: a regular file's read
		// returns everything up to the end of the file, and a short one
		// is a failure.
		b := l.scratch(op.Len)
		n, err := unix.Read(l.fd, b)
		if err != nil {
			return err
		}
		r.Data = b[:n]
	case Pread:
		b := l.scratch(op.Len)
		n, err := unix.Pread(l.fd, b, op.Off)
		if err != nil {
			return err
		}
		r.Data = b[:n]
	case Write, Pwrite:
		b := l.scratch(op.Len)
		fill(b, op.Index, op.Off)
		var n int
		var err error
		if op.Kind == Write {
			if _, err = unix.Seek(l.fd, op.Off, io.SeekStart); err == nil {
				n, err = unix.Write(l.fd, b)
			}
		} else {
			n, err = unix.Pwrite(l.fd, b, op.Off)
		}
		if err != nil {
			return err
		}
		if int64(n) != op.Len {
			return fmt.Errorf("short write: %d of %d bytes", n, op.Len)
		}
	case MapRead, MapWrite:
		return l.mapped(op, r)
	case Truncate:
		return unix.Ftruncate(l.fd, op.Off)
	case Falloc, FallocKeep, PunchHole, ZeroRange:
		mode := map[Kind]uint32{Falloc: 0, FallocKeep: unix.FALLOC_FL_KEEP_SIZE,
			PunchHole: unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, ZeroRange: unix.FALLOC_FL_ZERO_RANGE}[op.Kind]
		return unix.Fallocate(l.fd, mode, op.Off, op.Len)
	case CopyRange:
		src, dst, left := op.Off, op.Dst, int(op.Len)
		for left > 0 {
			n, err := unix.CopyFileRange(l.fd, &src, l.fd, &dst, left, 0)
			if err != nil {
				return err
			}
			if n == 0 {
				break // the end of the source
			}
			left -= n
		}
	case Fsync:
		return unix.Fsync(l.fd)
	case Reopen:
		if err := unix.Close(l.fd); err != nil {
			return err
		}
		fd, err := unix.Open(l.path, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		l.fd = fd
	default:
		return fmt.Errorf("unknown operation %d", op.Kind)
	}
	return nil
}

// mapped reads or writes through a shared mapping of the pages that hold
// [op.Off, op.Off+op.Len), as fsx does; a write extends the file first if
// it ends past the end, and is synced before the mapping goes. A fault (the
// file shorter than the model says) is an error, not a crash.
func (l *local) mapped(op Op, r *Result) (err error) {
	page := int64(os.Getpagesize())
	start := op.Off - op.Off%page
	end := op.Off + op.Len
	if op.Kind == MapWrite {
		var st unix.Stat_t
		if err := unix.Fstat(l.fd, &st); err != nil {
			return err
		}
		if end > st.Size {
			if err := unix.Ftruncate(l.fd, end); err != nil {
				return fmt.Errorf("extending before the mapping: %w", err)
			}
		}
	}
	prot := unix.PROT_READ
	if op.Kind == MapWrite {
		prot |= unix.PROT_WRITE
	}
	m, err := unix.Mmap(l.fd, start, int(end-start), prot, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	defer unix.Munmap(m)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("fault in the mapping (SIGBUS: the file is shorter than the mapping?): %v", p)
		}
	}()
	at := m[op.Off-start:]
	if op.Kind == MapRead {
		b := l.scratch(op.Len)
		copy(b, at)
		r.Data = b
		return nil
	}
	fill(at[:op.Len], op.Index, op.Off)
	return unix.Msync(m, unix.MS_SYNC)
}

// remote does operations in another process (ServeWorker), which has its
// own descriptor and mappings of the file.
type remote struct {
	cmd *exec.Cmd
	enc *gob.Encoder
	dec *gob.Decoder
	in  io.Closer
}

func startRemote(cmd *exec.Cmd, path string) (*remote, error) {
	cmd.Stderr = os.Stderr
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	rd, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("fsx: starting the second process: %w", err)
	}
	r := &remote{cmd: cmd, enc: gob.NewEncoder(w), dec: gob.NewDecoder(rd), in: w}
	if err := r.enc.Encode(path); err != nil {
		r.close()
		return nil, err
	}
	var res Result
	if err := r.dec.Decode(&res); err != nil || res.Err != "" {
		r.close()
		return nil, fmt.Errorf("fsx: the second process could not open %s: %v %s", path, err, res.Err)
	}
	return r, nil
}

func (r *remote) do(op Op) Result {
	if err := r.enc.Encode(op); err != nil {
		return Result{Err: "sending to the second process: " + err.Error()}
	}
	var res Result
	if err := r.dec.Decode(&res); err != nil {
		return Result{Err: "the second process: " + err.Error()}
	}
	return res
}

func (r *remote) close() error {
	r.in.Close()
	return r.cmd.Wait()
}

// ServeWorker is the second process: it reads the file's path and then
// operations from in, does each, and writes each result to out, until in
// ends.
func ServeWorker(in io.Reader, out io.Writer) error {
	dec, enc := gob.NewDecoder(in), gob.NewEncoder(out)
	var path string
	if err := dec.Decode(&path); err != nil {
		return err
	}
	l, err := openLocal(path)
	if err != nil {
		enc.Encode(Result{Err: err.Error()})
		return err
	}
	defer l.close()
	if err := enc.Encode(Result{}); err != nil {
		return err
	}
	for {
		var op Op
		if err := dec.Decode(&op); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		if err := enc.Encode(l.do(op)); err != nil {
			return err
		}
	}
}
