package labfs

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// --write-behind M: at most M writes acknowledged and not yet written. The
// (M+1)th waits for the backend; its max-depth counter says M; drain
// reports the first error once.
func TestWriteBehindBoundsUnwrittenWrites(t *testing.T) {
	c := &counters{}
	wb := newWriteQueues(3, c)
	release := make(chan struct{})
	first := true
	job := func() fuse.Status {
		<-release
		if first {
			first = false // the jobs of one inode run one at a time, in order
			return fuse.EIO
		}
		return fuse.OK
	}
	for range 3 {
		wb.submit(1, job) // acknowledged at once
	}
	done := make(chan struct{})
	go func() {
		wb.submit(1, job)
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("a 4th write was acknowledged while 3 were unwritten")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-done
	if st := wb.drain(1, true); st != fuse.EIO {
		t.Errorf("drain: %v, want the first write's EIO", st)
	}
	if st := wb.drain(1, true); st != fuse.OK {
		t.Errorf("second drain: %v, want OK: an error is reported once", st)
	}
	if d, q, e := c.wbMaxDepth.Load(), c.wbQueued.Load(), c.wbErrors.Load(); d != 3 || q != 4 || e != 1 {
		t.Errorf("max depth %d, queued %d, errors %d; want 3, 4, 1", d, q, e)
	}
}

// A queue's goroutine ends when the kernel forgets its inode and when
// serving stops; a write to a node id given again takes a new queue.
func TestWriteBehindQueuesEnd(t *testing.T) {
	wb := newWriteQueues(2, &counters{})
	var written atomic.Int32
	job := func() fuse.Status { written.Add(1); return fuse.OK }
	wb.submit(1, job)
	wb.submit(2, job)
	wb.forget(1)
	if _, ok := wb.nodes[1]; ok || written.Load() < 1 {
		t.Fatalf("after forget: queue kept %v, writes done %d", ok, written.Load())
	}
	wb.submit(1, job) // the id again
	done := make(chan struct{})
	go func() { wb.stopAll(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("stopAll: a queue's goroutine did not end")
	}
	if written.Load() != 3 || len(wb.nodes) != 0 {
		t.Errorf("%d writes done, %d queues left; want 3 and 0", written.Load(), len(wb.nodes))
	}
}
