package session

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Output is a file named by -o. It is written as a temporary file in
// the same directory, created before any tracing starts, and renamed into
// place at the end: a path that cannot be written is refused at once, not
// after a long run (or after the traced command has run) whose results
// would then be lost, and a run that fails leaves an older file of that
// name as it was. A path that is not a regular file (/dev/null,
// /dev/stdout, a FIFO) is opened and written in place, as a shell's
// redirection would: renaming over it would replace the device with a file.
// A symbolic link is followed, and its target replaced.
type Output struct {
	path   string
	tmp    *os.File // the temporary file renamed to path; nil when direct
	direct *os.File // path itself, when it is not a regular file
}

// WithoutPath is err without the operation and path a *fs.PathError adds,
// for messages that name the path themselves.
func WithoutPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// CreateOutput prepares path; "" gives a nil Output, whose Finish does
// nothing.
func CreateOutput(path string) (*Output, error) {
	if path == "" {
		return nil, nil
	}
	fail := func(err error) (*Output, error) {
		return nil, fmt.Errorf("-o %s: %v: give a path in a writable directory", path, WithoutPath(err))
	}
	target := path
	if fi, err := os.Stat(path); err == nil {
		if !fi.Mode().IsRegular() {
			if fi.IsDir() {
				return nil, fmt.Errorf("-o %s: is a directory: give a file name", path)
			}
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				return fail(err)
			}
			return &Output{path: path, direct: f}, nil
		}
		if target, err = filepath.EvalSymlinks(path); err != nil {
			return fail(err)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".*")
	if err != nil {
		return fail(err)
	}
	return &Output{path: target, tmp: tmp}, nil
}

// finish writes with write and puts the file in place; write nil drops it
// (the run ended before it had anything to save).
func (o *Output) Finish(write func(io.Writer) error) error {
	if o == nil {
		return nil
	}
	if o.direct != nil {
		var err error
		if write != nil {
			err = write(o.direct)
		}
		if cerr := o.direct.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("writing %s: %v", o.path, err)
		}
		return nil
	}
	if write == nil {
		o.tmp.Close()
		return os.Remove(o.tmp.Name())
	}
	err := write(o.tmp)
	if err == nil {
		err = o.tmp.Chmod(0o644)
	}
	if cerr := o.tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(o.tmp.Name(), o.path)
	}
	if err != nil {
		os.Remove(o.tmp.Name())
		return fmt.Errorf("writing %s: %v", o.path, err)
	}
	return nil
}
