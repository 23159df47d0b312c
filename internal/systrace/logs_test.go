package systrace

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// reportJSON analyses the logs at paths and returns the report as JSON.
func reportJSON(t *testing.T, paths ...string) string {
	t.Helper()
	p := NewParser()
	r, err := Analyze(Logs(paths, p), p, Options{MaxWaits: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range r.FirstBad {
		r.FirstBad[i].File = filepath.Base(r.FirstBad[i].File)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A compressed log reads as the log itself, whatever its name says: the
// format is told by the first bytes. testdata/sample.log.bz2 was written by
// the bzip2 command (Go has no bzip2 writer).
func TestLogsReadCompressedLogs(t *testing.T) {
	plain, err := os.ReadFile("testdata/sample.log")
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
	bz2, err := os.ReadFile("testdata/sample.log.bz2")
	if err != nil {
		t.Fatal(err)
	}
	want := reportJSON(t, write("sample.log", plain))
	for name, data := range map[string][]byte{"sample.log.gz": gz.Bytes(), "sample.log.zst": zst, "sample.log.bz2": bz2, "no-suffix": gz.Bytes()} {
		got := reportJSON(t, write(name, data))
		if strings.ReplaceAll(got, name, "sample.log") != want {
			t.Errorf("%s: the report differs from the plain log's:\n%s\nwant\n%s", name, got, want)
		}
	}

	// A damaged one is an error that names the file, not a report of
	// whatever was read before the damage.
	bad := write("bad.gz", append(gz.Bytes()[:len(gz.Bytes())/2:len(gz.Bytes())/2], 0, 1, 2))
	p := NewParser()
	if _, err := Analyze(Logs([]string{bad}, p), p, Options{}); err == nil || !strings.Contains(err.Error(), bad) {
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
