package labfs

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// killSgid clears set-group-ID after an access ACL was set by a caller
// outside the file's group and without CAP_FSETID, as the kernel's
// posix_acl_update_mode does: the daemon, as root, keeps it otherwise.
func (w *labRaw) killSgid(c <-chan struct{}, h *fuse.InHeader) {
	var a fuse.AttrOut
	if w.RawFileSystem.GetAttr(c, &fuse.GetAttrIn{InHeader: *h}, &a) != fuse.OK || a.Mode&syscall.S_ISGID == 0 {
		return
	}
	in := &fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{InHeader: *h, Valid: fuse.FATTR_MODE, Mode: a.Mode &^ (syscall.S_IFMT | syscall.S_ISGID)}}
	w.RawFileSystem.SetAttr(c, in, &a)
}

// killSuidgid clears set-user-ID, set-group-ID (when group-executable) and
// file capabilities after a write, truncate or chown by a caller without
// CAP_FSETID: what the kernel's file_remove_privs would have done had we not
// negotiated FUSE_HANDLE_KILLPRIV_V2. The daemon runs as root, so writing the
// backing file does not clear them by itself.
func (w *labRaw) killSuidgid(c <-chan struct{}, h *fuse.InHeader, fh uint64, out *fuse.AttrOut) {
	var a fuse.AttrOut
	if w.RawFileSystem.GetAttr(c, &fuse.GetAttrIn{InHeader: *h}, &a) != fuse.OK {
		return
	}
	w.clearPrivs(c, h, a.Mode&^syscall.S_IFMT, out)
}

// clearPrivs clears what killSuidgid clears from a file of the given mode.
func (w *labRaw) clearPrivs(c <-chan struct{}, h *fuse.InHeader, mode uint32, out *fuse.AttrOut) {
	kill := uint32(syscall.S_ISUID)
	if mode&syscall.S_IXGRP != 0 {
		kill |= syscall.S_ISGID
	}
	if mode&kill != 0 {
		in := &fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{InHeader: *h, Valid: fuse.FATTR_MODE, Mode: mode &^ kill}}
		w.RawFileSystem.SetAttr(c, in, out)
	}
	w.RawFileSystem.RemoveXAttr(c, h, "security.capability")
}

// killPrivsForWriter clears set-user-ID, set-group-ID and file
// capabilities when a caller without CAP_FSETID opens a passthrough file for
// writing. Its writes go straight to the backing file, never to the daemon,
// and with FUSE_HANDLE_KILLPRIV_V2 the kernel leaves the clearing to the
// daemon: nothing would clear them. A native file system clears them at the
// first write; this clears them at the open, a little earlier.
func (w *labRaw) killPrivsForWriter(c <-chan struct{}, h *fuse.InHeader) {
	var a fuse.AttrOut
	if w.RawFileSystem.GetAttr(c, &fuse.GetAttrIn{InHeader: *h}, &a) != fuse.OK {
		return
	}
	mode := a.Mode &^ syscall.S_IFMT
	// Only an executable file's set-ID bits and capabilities mean anything,
	// and only those are checked: a data file costs one stat per open.
	if mode&(syscall.S_ISUID|syscall.S_ISGID|0o111) == 0 || mayKeepPrivs(h.Caller) {
		return
	}
	w.clearPrivs(c, h, mode, &a)
	if w.invalidateAttr != nil {
		w.invalidateAttr(h.NodeId) // the kernel caches the old mode
	}
}

// mayKeepPrivs says whether a caller keeps set-ID bits when it writes: root
// with CAP_FSETID in its effective set. An unreadable /proc entry (the
// caller is gone) counts as not.
func mayKeepPrivs(caller fuse.Caller) bool {
	if caller.Uid != 0 {
		return false
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", caller.Pid))
	if err != nil {
		return false
	}
	_, rest, ok := bytes.Cut(status, []byte("\nCapEff:\t"))
	if !ok {
		return false
	}
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	caps, err := strconv.ParseUint(string(line), 16, 64)
	return err == nil && caps&(1<<unix.CAP_FSETID) != 0
}
