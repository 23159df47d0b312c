package sysserve

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/option"
)

// The socket's refusals name the setting by its key (option.Error): the
// command line words it --socket, as it always has, and the file refused
// is left where it was.
func TestSocketErrorsNameTheSetting(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	long := "/" + strings.Repeat("x", 120)
	for _, c := range []struct {
		err   error
		flags string
	}{
		{CheckSocketPath(long), "--socket " + long + ": the path is 121 bytes, and a Unix socket's may have 107 at most: give a shorter one"},
		{removeStaleSocket(file), "--socket " + file + ": the path is a regular file, not a socket: give another path, or remove it yourself"},
		{removeStaleSocket(dir), "--socket " + dir + ": the path is a directory, not a socket: give another path, or remove it yourself"},
	} {
		var oe *option.Error
		if !errors.As(c.err, &oe) {
			t.Errorf("%v is not an option.Error", c.err)
			continue
		}
		if c.err.Error() != c.flags {
			t.Errorf("%q, want %q", c.err, c.flags)
		}
		if words := oe.Words(func(k string) string { return k + ":" }); !strings.HasPrefix(words, "socket: ") {
			t.Errorf("in keys: %q", words)
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "keep" {
		t.Errorf("the file refused: %q %v", b, err)
	}
}
