package labfs

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// notifyInval is --invalidation notify: the daemon watches, with inotify,
// the source's directories whose entries the kernel holds, and when a file
// there changes behind the mount it tells the kernel at once
// (FUSE_NOTIFY_INVAL_INODE: the file's cached attributes and pages;
// FUSE_NOTIFY_INVAL_ENTRY for a name created, removed or renamed), as
// network file systems with callbacks do: the timeouts can then be long
// and the cache still coherent. The price: every change in the source,
// the mount's own writes included, drops what the kernel cached of the
// file.
type notifyInval struct {
	noHooks
	src     string
	fd      int           // for inotify_add_watch
	events  *os.File      // the same fd, read through the runtime's poller: Close wakes the reader safely
	sent    atomic.Uint64 // invalidations sent
	server  atomic.Pointer[fuse.Server]
	mu      sync.Mutex
	paths   map[uint64]string            // node -> its path under src ("" for the root)
	entries map[uint64]map[string]uint64 // directory node -> name -> node
	watches map[int32]uint64             // watch descriptor -> directory node
	watched map[uint64]bool              // directory nodes watched
	closed  bool                         // serving stopped: fd may be another file's now
	once    sync.Once
}

const notifyMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_DELETE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

func newNotifyInval(w *labRaw) feature {
	if w.cfg.Invalidation != "notify" {
		return nil
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil
	}
	n := &notifyInval{src: w.src, fd: fd, events: os.NewFile(uintptr(fd), "inotify"), paths: map[uint64]string{1: ""},
		entries: map[uint64]map[string]uint64{}, watches: map[int32]uint64{}, watched: map[uint64]bool{}}
	return n
}

func (n *notifyInval) observe(e event) fuse.Status {
	switch e.kind {
	case referenced:
		n.learn(e.parent, e.name, e.node)
	case listed:
		names, ids, _ := e.list.lookedUp()
		for i := range names {
			n.learn(e.node, names[i], ids[i])
		}
	case forgotten:
		n.mu.Lock()
		delete(n.paths, e.node)
		n.mu.Unlock()
	case mounted:
		n.server.Store(e.server)
		go n.read()
	case stopped:
		n.once.Do(func() {
			n.mu.Lock()
			n.closed = true
			n.mu.Unlock()
			n.events.Close()
		})
	}
	return fuse.OK
}

func (n *notifyInval) count(m map[string]uint64) { m["notify_invalidations"] = n.sent.Load() }

// learn notes that the kernel holds node as name in parent, and watches
// parent's directory in the source.
func (n *notifyInval) learn(parent uint64, name string, node uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	dir, ok := n.paths[parent]
	if !ok {
		return
	}
	n.paths[node] = filepath.Join(dir, name)
	if n.entries[parent] == nil {
		n.entries[parent] = map[string]uint64{}
	}
	n.entries[parent][name] = node
	if n.watched[parent] || n.closed {
		return
	}
	wd, err := unix.InotifyAddWatch(n.fd, filepath.Join(n.src, dir), notifyMask)
	if err != nil {
		return
	}
	n.watched[parent] = true
	n.watches[int32(wd)] = parent
}

// read turns the source's changes into invalidations until the watch is
// closed.
func (n *notifyInval) read() {
	buf := make([]byte, 64<<10)
	for {
		k, err := n.events.Read(buf)
		if err != nil || k <= 0 {
			return // closed: serving has stopped
		}
		for off := 0; off+unix.SizeofInotifyEvent <= k; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			end := off + unix.SizeofInotifyEvent + int(ev.Len)
			if end > k {
				break
			}
			n.changed(ev.Wd, ev.Mask, unix.ByteSliceToString(buf[off+unix.SizeofInotifyEvent:end]))
			off = end
		}
	}
}

func (n *notifyInval) changed(wd int32, mask uint32, name string) {
	server := n.server.Load()
	if server == nil || name == "" {
		return
	}
	n.mu.Lock()
	parent, ok := n.watches[wd]
	node := n.entries[parent][name]
	if mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0 {
		delete(n.entries[parent], name)
	}
	n.mu.Unlock()
	if !ok {
		return
	}
	n.sent.Add(1)
	if mask&(unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_MOVED_TO) != 0 {
		server.EntryNotify(parent, name)
		return
	}
	if node != 0 {
		server.InodeNotify(node, 0, -1) // its attributes and every cached page
	}
}
