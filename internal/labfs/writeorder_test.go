package labfs

import (
	"testing"
	"time"
)

// A READ waits for an earlier WRITE of the same bytes until it is
// applied, and for nothing else: not a later WRITE (which may be waiting
// for the page the READ keeps locked), another file, or other bytes.
func TestWriteOrder(t *testing.T) {
	o := newWriteOrdering()
	applied := o.begin(7, 10, 4096, 4096)
	later := o.begin(7, 30, 0, 1<<20)
	defer later()
	for _, r := range []struct {
		name              string
		node, unique, off uint64
		size              int
	}{
		{"earlier than the WRITE", 7, 8, 4096, 4096},
		{"another file", 8, 20, 4096, 4096},
		{"the bytes before", 7, 20, 0, 4096},
		{"the bytes after", 7, 20, 8192, 4096},
	} {
		done := make(chan struct{})
		go func() { o.wait(r.node, r.unique, r.off, r.size); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("a READ of %s waited", r.name)
		}
	}
	done := make(chan struct{})
	go func() { o.wait(7, 20, 0, 3*4096); close(done) }()
	select {
	case <-done:
		t.Fatal("a READ overlapping an earlier WRITE did not wait for it")
	case <-time.After(50 * time.Millisecond):
	}
	applied()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the READ still waits once the WRITE is applied")
	}
	for _, cfg := range []Config{{DirectIO: true}, {WritebackCache: true}} {
		if newWriteOrder(&labRaw{cfg: &cfg}) != nil {
			t.Errorf("%+v needs no ordering", cfg)
		}
	}
}
