package labfs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// FSType is the type the lab file system shows in /proc/mounts.
const FSType = "fuse.fusescope"

// FS is a mounted lab file system.
type FS struct {
	Source, MountPoint string
	Config             Config
	Conn               uint32

	server   *fuse.Server
	raw      *labRaw
	root     *fs.Inode
	stats    *daemonStats
	control  *controlServer
	started  time.Time
	timerNs  float64
	killed   string // what CleanStale found, for the caller to say
	unmounts chan struct{}
	ownMount bool // mounted by mountDevFuse, not by go-fuse: unmounted by us

	controlOnce sync.Once
}

// goFuseRequests are the INIT flags go-fuse v2.12 asks for by itself
// (fuse/opcode.go doInit), before ExtraCapabilities and DisabledCapabilities.
const goFuseRequests = fuse.CAP_ASYNC_READ | fuse.CAP_BIG_WRITES | fuse.CAP_FILE_OPS |
	fuse.CAP_READDIRPLUS | fuse.CAP_NO_OPEN_SUPPORT | fuse.CAP_PARALLEL_DIROPS | fuse.CAP_MAX_PAGES |
	fuse.CAP_RENAME_SWAP | fuse.CAP_PASSTHROUGH | fuse.CAP_ALLOW_IDMAP | fuse.CAP_AUTO_INVAL_DATA

// capabilities returns the INIT flags to add to and remove from go-fuse's.
func (c *Config) capabilities() (extra, disabled uint64) {
	if c.WritebackCache {
		extra |= fuse.CAP_WRITEBACK_CACHE
	}
	if !c.NoKillprivV2 {
		extra |= fuse.CAP_HANDLE_KILLPRIV_V2
	}
	// The caller's umask comes apart from the mode, for the daemon to
	// apply or not (labRaw.creationMode).
	extra |= fuse.CAP_DONT_MASK
	if !c.NoDefaultPermissions {
		// Where the kernel checks modes it checks POSIX ACLs too (the
		// daemon, as root, would pass any). An ACL set by a caller
		// outside the file's group clears set-group-ID, which the kernel
		// says in SETXATTR's extended header.
		extra |= fuse.CAP_POSIX_ACL | fuse.CAP_SETXATTR_EXT
	}
	if c.DirectIO {
		// Without it the kernel refuses a shared mmap of a direct-I/O file
		// (ENODEV), which a native directory allows; libfuse asks for it by
		// default.
		extra |= fuse.CAP_DIRECT_IO_ALLOW_MMAP
	}
	switch c.Readdirplus {
	case "auto", "":
		extra |= fuse.CAP_READDIRPLUS_AUTO
	case "off":
		disabled |= fuse.CAP_READDIRPLUS | fuse.CAP_READDIRPLUS_AUTO
	}
	if !c.Passthrough {
		disabled |= fuse.CAP_PASSTHROUGH
	}
	if c.SerialDirops {
		disabled |= fuse.CAP_PARALLEL_DIROPS
	}
	if c.NoAutoInvalData {
		disabled |= fuse.CAP_AUTO_INVAL_DATA
	}
	return extra, disabled
}

// The limits an INIT reply sets when the configuration leaves them at 0:
// the kernel's (fs/fuse/inode.c: FUSE_DEFAULT_MAX_BACKGROUND, and a
// congestion threshold of 3/4 of the background limit) and go-fuse's
// largest write.
const (
	defaultMaxWrite        = 1 << 20
	kernelMaxBackground    = 12
	congestionOfBackground = 0.75
)

// initLimits are the largest write and the background limits this
// configuration's INIT reply asks for, defaults filled in.
func (c *Config) initLimits() (maxWrite uint32, maxBg, cong uint16) {
	maxWrite, maxBg = defaultMaxWrite, kernelMaxBackground
	if c.MaxWrite > 0 {
		maxWrite = uint32(c.MaxWrite)
	}
	if c.MaxBackground > 0 {
		maxBg = uint16(c.MaxBackground)
	}
	cong = uint16(float64(maxBg) * congestionOfBackground)
	if c.Congestion > 0 {
		cong = uint16(c.Congestion)
	}
	return maxWrite, maxBg, cong
}

// CleanStale checks a mount point before mounting. A FUSE mount whose
// daemon died is unmounted and reported; any other mount there is an error.
func CleanStale(mnt string) (string, error) {
	dead, err := DetachDead(mnt)
	if err != nil {
		return "", err
	}
	if dead {
		return DeadMessage(mnt), nil
	}
	var sfs unix.Statfs_t
	err = unix.Statfs(mnt, &sfs)
	var st unix.Stat_t
	if err == nil {
		err = unix.Stat(mnt, &st)
	}
	if err != nil {
		return "", fmt.Errorf("mount point %s: %v: create it with mkdir -p %s", mnt, err, mnt)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return "", fmt.Errorf("mount point %s is not a directory", mnt)
	}
	var parent unix.Stat_t
	if unix.Stat(filepath.Dir(mnt), &parent) == nil && parent.Dev != st.Dev && mnt != "/" {
		how := "umount " + mnt
		if _, err := os.Stat(SocketPath(mnt)); err == nil {
			how = "fusescope fs umount " + mnt // a lab file system's
		}
		return "", fmt.Errorf("%s is already a mount point: unmount it first (%s)", mnt, how)
	}
	return "", nil
}

// canMountAsUser says in one line why a user who is not root cannot mount:
// go-fuse would report only fusermount's exit code.
func canMountAsUser() error {
	if err := unix.Access("/dev/fuse", unix.R_OK|unix.W_OK); err != nil {
		return fmt.Errorf("/dev/fuse: %w: mount as root, or give this user read and write access to /dev/fuse (Debian makes it 0666)", err)
	}
	for _, name := range []string{"fusermount3", "fusermount"} {
		if _, err := exec.LookPath(name); err == nil {
			return nil
		}
	}
	return fmt.Errorf("fusermount3 not found: install fuse3 (apt-get install fuse3), or mount as root")
}

// Mount mounts a lab file system of src at mnt and serves it in the
// background; Wait blocks until it is unmounted.
func Mount(src, mnt string, cfg Config) (*FS, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var err error
	if src, err = filepath.Abs(src); err != nil {
		return nil, err
	}
	if mnt, err = filepath.Abs(mnt); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(src); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("source %s is not a directory: give the directory to pass through to", src)
	}
	if strings.HasPrefix(mnt+"/", src+"/") {
		return nil, fmt.Errorf("mount point %s is inside the source %s: the file system would contain itself", mnt, src)
	}
	root := os.Geteuid() == 0
	if cfg.Passthrough && !root {
		return nil, optionErr("passthrough", "needs root (the kernel requires CAP_SYS_ADMIN to register backing files)")
	}
	if !root {
		if err := canMountAsUser(); err != nil {
			return nil, err
		}
	}
	// The daemon makes files with the mode the caller asked for, the
	// caller's umask applied by creationMode: its own would apply on top.
	unix.Umask(0)
	killed, err := CleanStale(mnt)
	if err != nil {
		return nil, err
	}
	loop, err := newConfinedRoot(src)
	if err != nil {
		return nil, err
	}
	extra, disabled := cfg.capabilities()
	mopts := fuse.MountOptions{
		// Other users may use the mount only where the kernel checks their
		// permissions: the daemon, as root, would let them do anything.
		FsName: src, Name: "fusescope", AllowOther: root && !cfg.NoDefaultPermissions,
		MaxWrite: cfg.MaxWrite, MaxReadAhead: cfg.MaxReadahead, MaxBackground: cfg.MaxBackground,
		CongestionThreshold: cfg.Congestion, DisableReadDirPlus: cfg.Readdirplus == "off",
		ExtraCapabilities: extra, DisabledCapabilities: disabled,
		// go-fuse logs its splice fallbacks; they are not errors.
		Logger: log.New(io.Discard, "", 0),
	}
	if !cfg.NoDefaultPermissions {
		mopts.Options = append(mopts.Options, "default_permissions")
	}
	if cfg.MaxRead > 0 {
		mopts.Options = append(mopts.Options, fmt.Sprintf("max_read=%d", cfg.MaxRead))
	}
	maxWrite, maxBg, _ := cfg.initLimits()
	mopts.MaxWrite, mopts.MaxBackground = int(maxWrite), int(maxBg)
	// With no negative timeout, a missing name is answered ENOENT, as
	// libfuse and go-fuse's loopback do, not with a 144-byte negative entry
	// that expires at once.
	var negTimeout *time.Duration
	if cfg.NegativeTimeout > 0 {
		negTimeout = &cfg.NegativeTimeout
	}
	entry, attr := cfg.entryTimeout(), cfg.attrTimeout()
	raw := fs.NewNodeFS(loop, &fs.Options{
		EntryTimeout: &entry, AttrTimeout: &attr, NegativeTimeout: negTimeout,
		// Modes as SRC has them: without it go-fuse shows a mode of 0000
		// as 0644 (0755 for a directory), and the kernel's permission
		// checks let every user read a file nobody may read.
		NullPermissions: true,
	})
	f := &FS{Source: src, MountPoint: mnt, Config: cfg, stats: &daemonStats{}, started: time.Now(), killed: killed, unmounts: make(chan struct{})}
	// The precise sleeper lowers its threads' timer slack; only a mount
	// that emulates a backend needs it.
	var sl *sleeper
	if len(cfg.Latency) > 0 || cfg.Bandwidth > 0 {
		sl = newSleeper()
	}
	w := &labRaw{
		RawFileSystem: raw, src: src, cfg: &f.Config, stats: f.stats, sleep: sl, link: &link{rate: cfg.Bandwidth, sleep: sl},
		shrinks: loop.shrinks,
	}
	w.features = newFeatureSet(w, registered)
	f.raw = w
	f.root = loop.EmbeddedInode()
	if cfg.Threads > 0 {
		w.slots = make(chan struct{}, cfg.Threads)
	}
	f.timerNs = float64(TimerOverhead().Nanoseconds())
	// Set before serving starts: requests read them. f.server is set by
	// the time they are called.
	w.invalidateAttr = func(node uint64) { f.server.InodeNotify(node, -1, 0) }
	// As root, mounted here with /dev/fuse close-on-exec (devfuse.go);
	// otherwise, or where that fails, by go-fuse through fusermount.
	serveAt := mnt
	if root {
		if at, err := mountDevFuse(mnt, &mopts); err == nil {
			serveAt, f.ownMount = at, true
		}
	}
	f.server, err = fuse.NewServer(w, serveAt, &mopts)
	if err != nil {
		if f.ownMount {
			unix.Unmount(mnt, unix.MNT_DETACH)
		}
		unix.Close(loop.src)
		return nil, fmt.Errorf("mounting %s at %s: %w", src, mnt, err)
	}
	go func() {
		f.server.Serve()
		// Serving has stopped, from Unmount or from outside: finish what
		// was acknowledged, then close what the kernel never released.
		w.tell(event{kind: stopped})
		loop.held.closeAll()
		unix.Close(loop.src)
		close(f.unmounts)
	}()
	if err := f.server.WaitMount(); err != nil {
		f.unmountOnce()
		return nil, fmt.Errorf("mounting %s at %s: %w", src, mnt, err)
	}
	if f.ownMount {
		pollHack(mnt)
	}
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); err == nil {
		f.Conn = unix.Minor(st.Dev)
	}
	w.tell(event{kind: mounted, server: f.server})
	if cfg.Passthrough && f.server.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH == 0 {
		f.Unmount()
		return nil, optionErr("passthrough", ": kernel %s does not offer FUSE passthrough (Linux 6.9+, CONFIG_FUSE_PASSTHROUGH)", kernel.Release())
	}
	if f.control, err = serveControl(f); err != nil {
		f.Unmount()
		return nil, err
	}
	return f, nil
}

// DetachDead unmounts mnt if it is a FUSE mount whose daemon died, lazily,
// as nothing can be written to it any more and a shell may still be inside
// it, and removes the dead daemon's control socket and empty log. statfs is
// the probe because the kernel never caches it: a stat may still be
// answered from cached attributes after the daemon is gone.
func DetachDead(mnt string) (bool, error) {
	var sfs unix.Statfs_t
	err := unix.Statfs(mnt, &sfs)
	if !errors.Is(err, unix.ENOTCONN) && !errors.Is(err, unix.ECONNABORTED) {
		return false, nil
	}
	if uerr := unix.Unmount(mnt, unix.MNT_DETACH); uerr != nil {
		return false, fmt.Errorf("%s is a dead FUSE mount (its daemon is gone) and unmounting it failed: %v: run umount -l %s", mnt, uerr, mnt)
	}
	removeStaleSocket(SocketPath(mnt))
	return true, nil
}

// DeadMessage says what DetachDead did.
func DeadMessage(mnt string) string {
	return fmt.Sprintf("%s was a dead FUSE mount (its daemon was killed); unmounted it", mnt)
}

// Stale says what CleanStale found before this mount, or "".
func (f *FS) Stale() string { return f.killed }

// Wait blocks until the file system is unmounted (by Unmount, or from
// outside), and removes its control socket.
func (f *FS) Wait() {
	<-f.unmounts
	f.closeControl()
}

func (f *FS) closeControl() {
	f.controlOnce.Do(func() {
		if f.control != nil {
			f.control.close()
		}
	})
}

// Unmount writes out what write-behind holds, unmounts the file system and
// stops serving it.
// ErrBusy reports a mount that files, or processes' working directories,
// keep busy: TryUnmount left it mounted and serving.
var ErrBusy = errors.New("busy")

// TryUnmount unmounts once, without forcing: while anything under the
// mount is in use it returns ErrBusy and the file system goes on serving.
func (f *FS) TryUnmount() error {
	f.raw.tell(event{kind: unmounting})
	var err error
	if os.Geteuid() == 0 {
		err = unix.Unmount(f.MountPoint, 0)
	} else {
		err = f.server.Unmount()
	}
	if errors.Is(err, unix.EBUSY) {
		return ErrBusy
	}
	if err != nil {
		if users, uerr := fuseconn.Users(f.MountPoint); uerr == nil && len(users) > 0 {
			return ErrBusy // fusermount's error says only that it failed
		}
		return err
	}
	f.closeControl()
	select {
	case <-f.unmounts:
	case <-time.After(5 * time.Second):
	}
	return nil
}

// Unmount unmounts, lazily (umount -l) if it stays busy for a second:
// processes still using it then get ENOTCONN.
func (f *FS) Unmount() error {
	f.closeControl()
	f.raw.tell(event{kind: unmounting})
	var err error
	for i := 0; i < 20; i++ {
		if err = f.unmountOnce(); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		if lerr := unix.Unmount(f.MountPoint, unix.MNT_DETACH); lerr == nil {
			err = nil
		}
	}
	select {
	case <-f.unmounts:
	case <-time.After(5 * time.Second):
	}
	return err
}

// Record is the daemon's statistics as a profile record.
func (f *FS) Record() *profile.Record {
	ks := f.server.KernelSettings()
	offered := ks.Flags64()
	extra, disabled := f.Config.capabilities()
	requested := (goFuseRequests | extra) &^ disabled
	cfgJSON, _ := json.Marshal(f.Config)
	p := f.stats.profile(f.Conn)
	var n uint64
	for _, o := range p.Ops {
		n += o.Count
	}
	maxRA := ks.MaxReadAhead
	if f.Config.MaxReadahead > 0 && uint32(f.Config.MaxReadahead) < maxRA {
		maxRA = uint32(f.Config.MaxReadahead)
	}
	// What the kernel applies of the INIT reply (fs/fuse/inode.c,
	// process_init_reply): max_pages capped by fs.fuse.max_pages_limit (32
	// without MAX_PAGES), and the background limits as fusectl shows them,
	// which includes changes made there. (It would raise max_write to 4 KiB;
	// Validate refuses less.)
	maxWrite, maxBg, cong := f.Config.initLimits()
	if ci := fuseconn.Read(f.Conn); ci != nil && !ci.Aborted {
		maxBg, cong = uint16(ci.MaxBackground), uint16(ci.CongestionThreshold)
	}
	maxPages := uint16(32)
	if offered&requested&fuse.CAP_MAX_PAGES != 0 {
		maxPages = uint16(min((maxWrite-1)/uint32(os.Getpagesize())+1, maxPagesLimit()))
	}
	return &profile.Record{
		Schema: profile.Schema,
		Meta: profile.Meta{
			Tool: "fusescope fs", Source: "labfs (daemon: request receipt -> reply)", Kernel: kernel.Release(),
			Host: kernel.Hostname(), Start: f.started, End: time.Now(), Command: os.Args,
			Filters: profile.Filters{Conns: []uint32{f.Conn}},
			Mounts:  []profile.Mount{{Conn: f.Conn, MountPoint: f.MountPoint, FSType: FSType, Source: f.Source}},
			FS: &profile.FSInfo{
				Source: f.Source, Config: cfgJSON, Flags: f.Config.Flags(),
				Offered: fuseproto.InitFlagNames(offered), Requested: fuseproto.InitFlagNames(requested),
				Negotiated: fuseproto.InitFlagNames(offered & requested),
				MaxWrite:   maxWrite, MaxPages: maxPages, MaxReadahead: maxRA, MaxBackground: maxBg, Congestion: cong,
				TimerNs: f.timerNs, HeapBytes: memoryBytes(), Requests: n,
				Counters: f.counters(),
			},
		},
		Profile: p,
	}
}

// maxPagesLimit is the kernel's cap on a request's pages
// (fs.fuse.max_pages_limit, 256 before it could be set).
func maxPagesLimit() uint32 {
	b, err := os.ReadFile("/proc/sys/fs/fuse/max_pages_limit")
	if err != nil {
		return 256
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 16)
	if err != nil || n == 0 {
		return 256
	}
	return uint32(n)
}

// counters are the user-space features' counters and the number of inodes
// the daemon holds.
func (f *FS) counters() map[string]uint64 {
	m := f.raw.count()
	m["inodes"] = countInodes(f.root)
	return m
}

// countInodes walks go-fuse's inode tree: the inodes the kernel holds
// references to, and the directories above them. Counting on demand costs
// the requests nothing. An unlinked file that is still open has no parent
// and is not counted.
func countInodes(root *fs.Inode) uint64 {
	seen := map[*fs.Inode]bool{root: true}
	queue := []*fs.Inode{root}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, ch := range n.Children() {
			if !seen[ch] {
				seen[ch] = true
				queue = append(queue, ch)
			}
		}
	}
	return uint64(len(seen) - 1) // not the root, which the kernel never forgets
}
