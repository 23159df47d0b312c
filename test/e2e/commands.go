package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Run runs name with args and returns its output, failing t if it fails.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// MustRead runs name with args and returns its standard output.
func MustRead(t testing.TB, name string, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return out
}

// Must is v, or a panic for err.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Need fails t if one of the commands is not installed.
func Need(t testing.TB, cmds ...string) {
	t.Helper()
	for _, c := range cmds {
		if _, err := exec.LookPath(c); err != nil {
			t.Fatalf("%s is not installed: run make test, which installs it", c)
		}
	}
}

// BinaryForNobody copies fusescope where user nobody can run it, in a new
// directory it may enter (the daemon of a --background mount is the binary
// run again by its path).
func BinaryForNobody(t testing.TB) string {
	t.Helper()
	Need(t, "setpriv")
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	bin := filepath.Join(dir, "fusescope")
	data, err := os.ReadFile(Fusescope)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// LineDiff lists the lines where two outputs differ, line by line: "-" for
// want's, "+" for got's, so a failure shows the changed rows, not two
// whole tables.
func LineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n-%s\n+%s\n", i+1, wl, gl)
		}
	}
	return b.String()
}
