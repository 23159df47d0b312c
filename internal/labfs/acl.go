package labfs

import (
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// creationMode is the mode to make a file or directory with in parent, as a
// native file system makes it. The kernel sends the caller's mode and umask
// apart (FUSE_DONT_MASK) and the daemon runs with umask 0, so the umask is
// applied here, unless the parent has a default ACL: then the backing file
// system applies that instead, and ignores the umask (POSIX.1e). Had the
// kernel applied the umask itself, a default ACL that grants the group
// write access would be cut back by a umask of 022.
func (w *labRaw) creationMode(c <-chan struct{}, parent uint64, mode, umask uint32) uint32 {
	if mode&^umask == mode {
		return mode
	}
	now := monotonic()
	has, known := w.acls.get(parent, now)
	if !known {
		sz, st := w.RawFileSystem.GetXAttr(c, &fuse.InHeader{NodeId: parent}, aclDefault, nil)
		has = st == fuse.OK && sz > 0
		w.acls.put(parent, has, now)
	}
	if has {
		return mode
	}
	return mode &^ umask
}

// defaultACLs remembers which directories have a default ACL for as long as
// the kernel trusts attributes (--attr-timeout): asking the backing file
// system at every create cost 4-5 us here, a sixth of the daemon's CREATE.
// A default ACL set through the mount counts at once; one set on the
// source directly, after the timeout, as a mode changed there does. nil
// (an attribute timeout of 0) remembers nothing.
type defaultACLs struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[uint64]aclSeen
}

type aclSeen struct {
	has   bool
	until time.Duration // monotonic()
}

func newDefaultACLs(ttl time.Duration) *defaultACLs {
	if ttl <= 0 {
		return nil
	}
	return &defaultACLs{ttl: ttl, m: map[uint64]aclSeen{}}
}

// defaultACLKeep is the upkeep of labRaw's defaultACLs as a feature: a
// directory is forgotten when its default ACL changes through the mount or
// the kernel forgets it.
type defaultACLKeep struct {
	noHooks
	*defaultACLs
}

func newDefaultACLKeep(w *labRaw) feature {
	acls := newDefaultACLs(w.cfg.attrTimeout())
	if acls == nil {
		return nil
	}
	w.acls = acls // for creationMode
	return &defaultACLKeep{defaultACLs: acls}
}

func (d *defaultACLKeep) observe(e event) fuse.Status {
	if e.kind == forgotten || e.kind == attrsChanged && e.name == aclDefault {
		d.drop(e.node)
	}
	return fuse.OK
}

func (d *defaultACLs) get(dir uint64, now time.Duration) (has, known bool) {
	if d == nil {
		return false, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.m[dir]
	return e.has, ok && now < e.until
}

func (d *defaultACLs) put(dir uint64, has bool, now time.Duration) {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.m[dir] = aclSeen{has: has, until: now + d.ttl}
	d.mu.Unlock()
}

// drop forgets a directory: its default ACL changed, or the kernel forgot
// the node, whose id go-fuse may give to another.
func (d *defaultACLs) drop(dir uint64) {
	if d == nil {
		return
	}
	d.mu.Lock()
	delete(d.m, dir)
	d.mu.Unlock()
}
