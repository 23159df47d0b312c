package labfs

import (
	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// feature is one of the daemon's optional parts (the md-cache, the read
// pipeline, write-behind...). labRaw tells it what happens to nodes and
// files (observe), and lets it answer or wrap the requests it wraps
// (around): labRaw names none of them. A new feature is a file that
// implements feature (embedding noHooks for the hooks it leaves alone), a
// line in registered, a Config field and its flag.
type feature interface {
	// observe is told of e when it happens. A drain blocks until the
	// node's pending work is done and returns its first error (the one
	// status observe returns); other events return fuse.OK.
	observe(e event) fuse.Status
	// wraps says whether around wants requests of op; asked once, at
	// mount, so that an operation no feature wraps costs nothing.
	wraps(op fuseproto.Opcode) bool
	// around serves r: on to the features registered after it and the
	// backend (r.next, at most once), or by answering r itself.
	around(r *request) fuse.Status
	// count adds the feature's counters to m (fs stats, meta.fs.counters).
	count(m map[string]uint64)
}

// registered builds the optional features a configuration turns on, in the
// order labRaw calls them: the first is told of an event first and is the
// outermost around a request (write-behind acknowledges a WRITE before the
// others see it; the md-cache answers a GETATTR without the backend). Each
// returns nil where the configuration leaves it off.
var registered = []func(w *labRaw) feature{
	newWriteOrder,     // writeorder.go: a READ waits for the WRITEs the kernel queued before it
	newWriteBehind,    // writebehind.go: --write-behind
	newPipeline,       // pipeline.go: --read-pipeline
	newMDCache,        // mdcache.go: --md-cache
	newCloseToOpen,    // cto.go: --invalidation cto
	newNotifyInval,    // notify.go: --invalidation notify
	newInodeLRU,       // lru.go: --max-inodes
	newReaddirAhead,   // readdirahead.go: --readdir-ahead
	newDefaultACLKeep, // acl.go: which directories have a default ACL, kept an attribute timeout
}

// noHooks is a feature that does nothing: a feature embeds it and
// implements the hooks it needs.
type noHooks struct{}

func (noHooks) observe(event) fuse.Status     { return fuse.OK }
func (noHooks) wraps(fuseproto.Opcode) bool   { return false }
func (noHooks) around(r *request) fuse.Status { return r.next() }
func (noHooks) count(map[string]uint64)       {}

// eventKind is what happened.
type eventKind int

const (
	// A READ arrived (before it waits for a slot under --threads).
	readReceived eventKind = iota
	// A WRITE arrived (before its slot), and was answered.
	writeReceived
	writeAnswered
	// drain comes before a request that must see every write acknowledged
	// before it: reads, attributes, seeks, close (report set: flush and
	// fsync, which return the first error), release, copies, fallocate.
	drain
	// A request used node (GETATTR, OPEN).
	used
	// A reply handed the kernel a reference to node, named name in parent
	// (LOOKUP, and the requests that create a name).
	referenced
	// A READDIRPLUS reply handed the kernel a reference to each of its
	// entries (listing).
	listed
	// The kernel forgot n references to node; its id may be given again.
	forgotten
	// node's data is about to change in the backend (write, truncate,
	// fallocate, a copy into it), and has: between the two, a client may
	// already see the change. dataChanged implies its attributes changed.
	dataChanging
	dataChanged
	// node's attributes changed without its data (an extended attribute
	// named name: an ACL changes the mode with it).
	attrsChanged
	// Names were made, removed or moved: link counts and directory times of
	// other nodes changed too.
	namespaceChanged
	// node was opened (flags: the backing file's open flags).
	opened
	// A file of node is closed: FLUSH, after the backend's; RELEASE of fh,
	// before the backend's (releasing), and after it (released).
	flushed
	releasing
	released
	// The directory handle fh was released.
	dirReleased
	// The mount is up, and serving stops: unmounting (write out what was
	// acknowledged), stopped (serving has ended: end every goroutine).
	mounted
	unmounting
	stopped
)

// event is something that happened to a node or a file, for the features
// to follow.
type event struct {
	kind   eventKind
	c      <-chan struct{} // the request's cancellation; nil outside one
	node   uint64
	fh     uint64
	n      uint64 // forgotten: references
	unique uint64 // readReceived, writeReceived, writeAnswered: the request's id
	off    uint64 // readReceived, writeReceived, writeAnswered: bytes [off, off+size)
	size   int
	flags  uint32 // opened, released: the open flags
	report bool   // drain: return the first error of the writes waited for
	parent uint64 // referenced
	name   string // referenced: the entry; attrsChanged: the extended attribute
	list   *dirListing
	server *fuse.Server // mounted
}

// request is one request on its way through the features that wrap its
// operation to the backend; each field says which operations carry it.
type request struct {
	op   fuseproto.Opcode
	c    <-chan struct{}
	node uint64
	fh   uint64

	lookup  *lookupRequest
	getattr *fuse.GetAttrIn
	attr    *fuse.AttrOut // GETATTR's reply
	entry   *fuse.EntryOut
	openIn  *fuse.OpenIn // OPEN, OPENDIR
	open    *fuse.OpenOut
	dirs    *fuse.DirEntryList // READDIR's and READDIRPLUS's reply
	list    *dirListing        // READDIRPLUS's entries, once the backend answered
	read    *fuse.ReadIn
	buf     []byte          // READ's buffer
	result  fuse.ReadResult // READ's reply from the backend
	reply   []byte          // READ's reply from a feature
	write   *fuse.WriteIn
	data    [][]byte // WRITE's payload
	direct  bool     // WRITE: the caller's O_DIRECT
	written uint32   // WRITE's reply
	// local: a feature holds what a READDIR would fetch; no round trip.
	local bool

	remote backend
	chain  []feature // still to wrap it
}

type lookupRequest struct {
	h    *fuse.InHeader
	name string
}

// next passes r on to the next feature that wraps its operation, or, after
// the last, to the backend.
func (r *request) next() fuse.Status {
	if len(r.chain) > 0 {
		f := r.chain[0]
		r.chain = r.chain[1:]
		return f.around(r)
	}
	return r.remote.w.backendCall(r)
}

// featureSet is the features registered and turned on, and for each
// operation those that wrap it.
type featureSet struct {
	all   []feature
	wraps map[fuseproto.Opcode][]feature
}

func newFeatureSet(w *labRaw, builders []func(*labRaw) feature) featureSet {
	s := featureSet{wraps: map[fuseproto.Opcode][]feature{}}
	for _, build := range builders {
		if f := build(w); f != nil {
			s.all = append(s.all, f)
		}
	}
	for _, op := range []fuseproto.Opcode{fuseproto.Lookup, fuseproto.Getattr, fuseproto.Open, fuseproto.Opendir,
		fuseproto.Read, fuseproto.Write, fuseproto.Readdir, fuseproto.Readdirplus} {
		for _, f := range s.all {
			if f.wraps(op) {
				s.wraps[op] = append(s.wraps[op], f)
			}
		}
	}
	return s
}

// tell tells every feature of e, in order, and returns the first error a
// drain reported.
func (w *labRaw) tell(e event) fuse.Status {
	st := fuse.OK
	for _, f := range w.features.all {
		if s := f.observe(e); s != fuse.OK && st == fuse.OK {
			st = s
		}
	}
	return st
}

// run serves r through the features that wrap its operation, then the
// backend. Only a wrapped request is copied to the heap: the others go
// straight to the backend and allocate nothing.
func (w *labRaw) run(r *request) fuse.Status {
	chain := w.features.wraps[r.op]
	if len(chain) == 0 {
		return w.backendCall(r)
	}
	h := new(request)
	*h = *r
	h.chain = chain
	st := h.next()
	*r = *h
	return st
}

// count is the features' counters.
func (w *labRaw) count() map[string]uint64 {
	m := map[string]uint64{}
	for _, f := range w.features.all {
		f.count(m)
	}
	return m
}
