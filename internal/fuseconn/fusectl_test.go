package fuseconn

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadConnection(t *testing.T) {
	root := t.TempDir()
	write := func(conn, name, value string) {
		dir := filepath.Join(root, conn)
		os.MkdirAll(dir, 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(value+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("39", "waiting", "2")
	write("39", "max_background", "12")
	write("39", "congestion_threshold", "9")
	// After fuse_abort_conn: max_background is UINT_MAX.
	write("40", "waiting", "0")
	write("40", "max_background", "4294967295")
	write("40", "congestion_threshold", "9")

	if c := readIn(root, 39); c == nil || c.Waiting != 2 || c.MaxBackground != 12 || c.CongestionThreshold != 9 || c.Aborted {
		t.Errorf("conn 39: %+v", c)
	}
	if c := readIn(root, 40); c == nil || !c.Aborted {
		t.Errorf("conn 40, aborted: %+v", c)
	}
	if c := readIn(root, 41); c != nil {
		t.Errorf("a connection that is not there: %+v, want nil", c)
	}
}
