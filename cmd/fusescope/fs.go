package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/labfs"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/report"
	"github.com/fusescope/fusescope/internal/session"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

func newFSCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "fs",
		Short: "The lab file system: every FUSE caching and transport mode as a switch",
	}
	c.AddCommand(newFSMountCmd(), newFSUmountCmd(), newFSStatsCmd())
	return c
}

// readyFD is the pipe on which a --background child says it is mounted.
const readyEnv = "FUSESCOPE_FS_READY_FD"

func newFSMountCmd() *cobra.Command {
	var (
		preset     string
		background bool
		latency    string
		bandwidth  string
		cfg        labfs.Config
	)
	var presetHelp []string
	for _, n := range labfs.PresetNames() {
		presetHelp = append(presetHelp, fmt.Sprintf("  %-12s %s", n, labfs.PresetDoc(n)))
	}
	c := &cobra.Command{
		Use:   "mount SRC MNT [flags]",
		Short: "Mount a passthrough of SRC at MNT with the chosen FUSE modes",
		Long: `Mount a passthrough of the directory SRC at MNT, served by fusescope's own
daemon (go-fuse), which keeps per-operation histograms that "fusescope fs
stats MNT" prints. Start from a preset and change what you study; flags
override the preset.

Presets:
` + strings.Join(presetHelp, "\n") + `

--latency and --bandwidth emulate a remote backend: each request waits its
operation's delay in its own goroutine (like an RPC client with one request
in flight per daemon thread), and READ and WRITE data cross one shared link
of the given rate, one transfer after another.

In the foreground, Ctrl-C unmounts; if the mount is busy (a file open in it,
a shell inside it) it says which processes use it and goes on serving, and a
second Ctrl-C unmounts it cleanly if they are done by then, else forces it
(umount -l: what is still open there fails with ENOTCONN). SIGTERM ends it at
once, forced if busy, after the write-behind queues are written.
--background detaches the daemon; fusescope fs umount MNT ends it.`,
		Example: `  fusescope fs mount /data /mnt/lab --background
  fusescope fs mount /data /mnt/lab --preset nocache --latency 'lookup=1ms,read=2ms+-0.5ms,*=100us'
  fusescope fs mount /data /mnt/lab --preset writeback --bandwidth 100MiB/s --background
  fusescope fs stats /mnt/lab
  fusescope fs umount /mnt/lab`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			base, err := labfs.Preset(preset)
			if err != nil {
				return fmt.Errorf("--preset: %v", err)
			}
			base.Override(&cfg, cmd.Flags().Changed)
			if base.Latency, err = labfs.ParseLatency(latency); err != nil {
				return err
			}
			if base.Bandwidth, err = labfs.ParseBandwidth(bandwidth); err != nil {
				return err
			}
			if err := base.Validate(); err != nil {
				return err
			}
			return mountConfigured(args[0], args[1], base, background)
		},
	}
	f := c.Flags()
	// The defaults --help shows are the default preset's, written once in
	// labfs; a flag given overrides the chosen preset (Override).
	def, _ := labfs.Preset("default")
	f.StringVar(&preset, "preset", "default", "start from this preset: "+strings.Join(labfs.PresetNames(), ", "))
	f.BoolVar(&background, "background", false, "detach, and return once the file system is mounted")
	f.DurationVar(&cfg.EntryTimeout, "entry-timeout", def.EntryTimeout, "how long the kernel may cache name lookups")
	f.DurationVar(&cfg.AttrTimeout, "attr-timeout", def.AttrTimeout, "how long the kernel may cache attributes")
	f.DurationVar(&cfg.NegativeTimeout, "negative-timeout", def.NegativeTimeout, "how long the kernel may cache failed lookups")
	f.BoolVar(&cfg.KeepCache, "keep-cache", def.KeepCache, "keep cached pages across opens (FOPEN_KEEP_CACHE)")
	f.BoolVar(&cfg.DirectIO, "direct-io", def.DirectIO, "bypass the page cache (FOPEN_DIRECT_IO)")
	f.BoolVar(&cfg.WritebackCache, "writeback-cache", def.WritebackCache, "write-back caching in the kernel instead of write-through")
	f.BoolVar(&cfg.AutoInvalData, "auto-inval-data", def.AutoInvalData, "drop cached pages when mtime or size change (FUSE_AUTO_INVAL_DATA)")
	f.BoolVar(&cfg.Passthrough, "passthrough", def.Passthrough, "FUSE passthrough of reads and writes to the backing file (root, Linux 6.9+)")
	f.StringVar(&cfg.Readdirplus, "readdirplus", def.Readdirplus, "READDIRPLUS: auto, on or off")
	f.BoolVar(&cfg.ParallelDirops, "parallel-dirops", def.ParallelDirops, "allow parallel lookups and readdirs in one directory")
	f.Var(&sizeFlag{&cfg.MaxRead}, "max-read", "largest READ, e.g. 128KiB (mount option max_read; 0: the kernel's)")
	f.Var(&sizeFlag{&cfg.MaxWrite}, "max-write", "largest WRITE, e.g. 128KiB (0: 1MiB)")
	f.Var(&sizeFlag{&cfg.MaxReadahead}, "max-readahead", "largest read-ahead, e.g. 512KiB (0: the kernel's)")
	f.IntVar(&cfg.MaxBackground, "max-background", 0, "most background requests in flight (default 12)")
	f.IntVar(&cfg.Congestion, "congestion-threshold", 0, "background requests at which the kernel sees congestion (default 3/4 of max-background)")
	f.IntVar(&cfg.Threads, "threads", 0, "most requests the daemon serves at once (0: no limit)")
	f.BoolVar(&cfg.KillprivV2, "killpriv-v2", def.KillprivV2, "negotiate HANDLE_KILLPRIV_V2 (false restores a GETXATTR security.capability round trip per write)")
	f.BoolVar(&cfg.DefaultPermissions, "default-permissions", def.DefaultPermissions, "the kernel checks file modes and POSIX ACLs (mount option default_permissions, FUSE_POSIX_ACL); false: no checks, and only the mounting user may use the mount")
	f.DurationVar(&cfg.MDCacheTTL, "md-cache", 0, "answer GETATTR from the daemon's own attribute cache for this long (0: off)")
	f.IntVar(&cfg.ReadPipeline, "read-pipeline", 0, "reads to keep in flight ahead of each open file's reader (0: off; GFFS used 4)")
	cfg.ReadChunk = labfs.DefaultReadChunk
	f.Var(&sizeFlag{&cfg.ReadChunk}, "read-chunk", "size of each pipelined read (GFFS used 32MiB)")
	f.IntVar(&cfg.WriteBehind, "write-behind", 0, "writes to acknowledge before they reach the backend, per file (0: off); written out by close and fsync, which report their errors")
	f.BoolVar(&cfg.ReaddirAhead, "readdir-ahead", false, "fetch each opened directory's listing in the background at OPENDIR, in one backend request, and answer its READDIRs from it")
	f.StringVar(&cfg.Invalidation, "invalidation", "none", "invalidation policy: none, or cto (keep pages across opens unless the file changed since its last close)")
	f.IntVar(&cfg.MaxInodes, "max-inodes", 0, "inodes the kernel may keep; past it the least recently used names are invalidated (0: no limit)")
	f.StringVar(&latency, "latency", "", "emulated backend latency per operation, e.g. 'lookup=1ms,getattr=500us,read=2ms+-0.5ms,*=100us'")
	f.StringVar(&bandwidth, "bandwidth", "", "emulated backend bandwidth for READ and WRITE data, e.g. 100MiB/s")
	return c
}

// mountConfigured mounts SRC at MNT once the flags are resolved; the tests
// replace it to see the configuration the flags gave.
var mountConfigured = func(src, mnt string, cfg labfs.Config, background bool) error {
	if background {
		return mountInBackground(mnt)
	}
	return mountForeground(src, mnt, cfg)
}

func mountForeground(src, mnt string, cfg labfs.Config) error {
	ready := os.Getenv(readyEnv)
	// Caught from before the mount: a signal that came as soon as the
	// mount showed up killed the daemon and left the mount behind.
	sigs := make(chan os.Signal, 1)
	if ready != "" {
		signal.Ignore(syscall.SIGHUP) // a detached daemon outlives its terminal
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	} else {
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	}
	defer signal.Stop(sigs)
	fsys, err := labfs.Mount(src, mnt, cfg)
	if ready != "" {
		fd, _ := strconv.Atoi(ready)
		pipe := os.NewFile(uintptr(fd), "ready")
		if err != nil {
			fmt.Fprintf(pipe, "error %s\n", err)
		} else {
			fmt.Fprintf(pipe, "ok %s\n", fsys.Stale())
		}
		pipe.Close()
	}
	if err != nil {
		return err
	}
	if s := fsys.Stale(); s != "" && ready == "" {
		fmt.Fprintln(os.Stderr, "fusescope: "+s)
	}
	if ready == "" {
		fmt.Fprintf(os.Stderr, "fusescope fs: %s mounted at %s (conn %d); Ctrl-C or fusescope fs umount %s ends it\n", fsys.Source, fsys.MountPoint, fsys.Conn, fsys.MountPoint)
	}
	done := make(chan struct{})
	go func() { fsys.Wait(); close(done) }()
	busy := false
wait:
	for {
		select {
		case sig := <-sigs:
			if sig != os.Interrupt {
				// SIGTERM (a service manager, kill): end now, lazily if busy,
				// after the write-behind queues are written.
				err = fsys.Unmount()
				break wait
			}
			if err = fsys.TryUnmount(); !errors.Is(err, labfs.ErrBusy) {
				break wait
			}
			if busy { // the second Ctrl-C, still busy: forced
				err = fsys.Unmount()
				break wait
			}
			busy, err = true, nil
			fmt.Fprintln(os.Stderr, busyMessage(fsys.MountPoint))
		case <-done:
			break wait
		}
	}
	if ready != "" && err == nil {
		labfs.RemoveEmptyLog(mnt) // kept only when the daemon said something
	}
	return err
}

// busyMessage says what a busy mount waits for and how to force it.
func busyMessage(mnt string) string {
	return fmt.Sprintf("fusescope fs: %s is busy, still serving: %s. Ctrl-C again to unmount it: cleanly if they are done by then, else forced (umount -l: what is still open there fails with ENOTCONN).", mnt, usersOf(mnt))
}

// usersOf names the processes that keep mnt busy, up to five.
func usersOf(mnt string) string {
	users, _ := fuseconn.Users(mnt)
	var who []string
	for i, u := range users {
		if i == 5 {
			who = append(who, fmt.Sprintf("and %d more", len(users)-i))
			break
		}
		what := u.What
		if what == "cwd" || what == "root" {
			what = "its " + map[string]string{"cwd": "working", "root": "root"}[what] + " directory"
		}
		who = append(who, fmt.Sprintf("%d %s (%s)", u.PID, u.Comm, what))
	}
	if len(who) == 0 {
		return "files are open in it, or a shell is inside it (fuser -vm " + mnt + " lists the processes)"
	}
	return "in use by " + strings.Join(who, ", ")
}

// mountInBackground runs this command again, detached, without
// --background, and returns once the child says it has mounted.
func mountInBackground(mnt string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var args []string
	for _, a := range os.Args[1:] {
		if a != "--background" && a != "--background=true" {
			args = append(args, a)
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	if _, err := labfs.PrivateControlDir(); err != nil {
		return err
	}
	logPath := labfs.LogPath(mnt)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	child := exec.Command(self, args...)
	child.Env = append(os.Environ(), readyEnv+"=3")
	child.ExtraFiles = []*os.File{w}
	child.Stdout, child.Stderr = logf, logf
	// A process group of its own, not a session: with the scheduler's
	// autogroups (kernel.sched_autogroup_enabled), a new session is a new
	// scheduling group, which delays the daemon's wakeups behind the caller's
	// (measured: 4 KiB random reads 15-25% slower). SIGHUP is ignored below,
	// so closing the terminal does not unmount.
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := child.Start(); err != nil {
		return err
	}
	w.Close()
	logf.Close()
	line, _ := bufio.NewReader(r).ReadString('\n')
	r.Close()
	status, msg, _ := strings.Cut(strings.TrimSpace(line), " ")
	if status != "ok" {
		child.Wait()
		if msg == "" {
			msg = "the file system daemon exited before mounting (see " + logPath + ")"
		} else {
			os.Remove(logPath) // it holds only the message passed on here
		}
		return fmt.Errorf("%s", msg)
	}
	if msg != "" {
		fmt.Fprintln(os.Stderr, "fusescope: "+msg)
	}
	abs, _ := filepath.Abs(mnt)
	fmt.Fprintf(os.Stderr, "fusescope fs: mounted at %s (daemon pid %d, log %s)\n", abs, child.Process.Pid, logPath)
	child.Process.Release()
	return nil
}

func newFSUmountCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "umount MNT",
		Short: "Unmount a lab file system; its daemon exits",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mnt, _ := filepath.Abs(args[0])
			// Only a lab file system: this command must not take down
			// whatever else a mistyped path names.
			m, err := fuseconn.TopMount(mnt)
			if err != nil {
				return err
			}
			if m == nil {
				return fmt.Errorf("%s is not a mount point: nothing to unmount (findmnt -t %s lists lab file systems)", mnt, labfs.FSType)
			}
			if m.FSType != labfs.FSType {
				return fmt.Errorf("%s is a %s mount, not a fusescope lab file system: unmount it with umount", mnt, m.FSType)
			}
			// A dead mount is detached lazily, as fs mount does: nothing
			// can be written to it, and a shell may still be inside.
			if dead, err := labfs.DetachDead(mnt); err != nil || dead {
				if dead {
					fmt.Fprintln(os.Stderr, "fusescope: "+labfs.DeadMessage(mnt))
				}
				return err
			}
			if err := unix.Unmount(mnt, 0); err != nil {
				if err == unix.EBUSY {
					return fmt.Errorf("%s is busy (%s): close them, or umount -l %s", mnt, usersOf(mnt), mnt)
				}
				if out, ferr := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); ferr != nil {
					return fmt.Errorf("unmounting %s: %v (%s)", mnt, err, strings.TrimSpace(string(out)))
				}
			}
			// The daemon removes its socket as it exits; wait for it briefly.
			for i := 0; i < 50; i++ {
				if _, err := os.Stat(labfs.SocketPath(mnt)); err != nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			return nil
		},
	}
}

func newFSStatsCmd() *cobra.Command {
	var (
		out   outputFlags
		stamp bool
	)
	c := &cobra.Command{
		Use:   "stats MNT [interval [count]]",
		Short: "The lab file system daemon's own per-operation statistics",
		Long: `Print the daemon's own view of a mounted lab file system: per-operation
latency from request receipt to reply (histograms and table, as trace
prints them), the negotiated FUSE INIT flags and limits, and the cost of the
daemon's timers. --json prints it as a record that "fusescope show" renders.

With an interval, it reports every interval seconds (count times, or until
Ctrl-C) what the daemon served in that interval alone, as gluster's "volume
profile info incremental" does: requests, histograms and the user-space
features' counters of the interval; inodes, the write-behind's deepest
queue and the heap as they stand at its end. The configuration is printed
with the first report.`,
		Example: `  fusescope fs stats /mnt/lab
  fusescope fs stats --no-hist -m /mnt/lab 5      # what the daemon served, every 5 s
  fusescope fs stats --json /mnt/lab 1 60 > lab.jsonl`,
		Args: cobra.RangeArgs(1, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			mnt, _ := filepath.Abs(args[0])
			interval, count, err := parseIntervalCount(args[1:], "fusescope fs stats "+args[0])
			if err != nil {
				return err
			}
			if m, err := fuseconn.TopMount(mnt); err == nil && m != nil && m.FSType != labfs.FSType {
				hint := "fusescope trace --mount " + mnt + " measures any file system's requests from the kernel"
				if !strings.HasPrefix(m.FSType, "fuse") {
					hint = "mount a lab file system with fusescope fs mount SRC MNT"
				}
				return fmt.Errorf("%s is a %s mount, not a fusescope lab file system, whose daemon keeps these statistics: %s", mnt, m.FSType, hint)
			}
			r := &report.Renderer{Format: out.format(), W: os.Stdout, Stamp: stamp, Lines: interval > 0}
			run := session.Config{Interval: interval, Count: count, Immediate: interval == 0,
				Ready: func() {
					if interval > 0 {
						fmt.Fprintf(os.Stderr, "Reporting what the daemon of %s serves every %s... Hit Ctrl-C to end.\n", mnt, interval)
					}
				},
				Emit: func(rec *profile.Record, _ bool) error { return r.Render(rec) },
			}
			_, err = session.Run(context.Background(), run, func(session.Target) (session.Source, error) {
				src, err := labfs.OpenStats(mnt)
				if err != nil {
					if m, merr := fuseconn.TopMount(mnt); merr == nil && m != nil {
						if owner := m.Owner(); owner >= 0 && owner != os.Geteuid() {
							return nil, fmt.Errorf("%s was mounted by uid %d, whose daemon answers its own user only (its control socket is 0600, in that user's directory): run fusescope fs stats %s as uid %d (sudo, if root)", mnt, owner, mnt, owner)
						}
					}
					return nil, err
				}
				return src, nil
			})
			return err
		},
	}
	out.register(c)
	c.Flags().BoolVarP(&stamp, "timestamp", "T", false, "print a timestamp before each report")
	return c
}

// sizeFlag is a byte count given as a size: 128KiB, 1MiB, 4096.
type sizeFlag struct{ p *int }

func (f *sizeFlag) String() string {
	if f.p == nil || *f.p == 0 {
		return "0"
	}
	return labfs.FormatSize(uint64(*f.p))
}

func (f *sizeFlag) Set(s string) error {
	v, err := labfs.ParseSize(s)
	if err != nil || v > 1<<30 {
		return fmt.Errorf("give a size up to 1GiB, like 128KiB")
	}
	*f.p = int(v)
	return nil
}

func (f *sizeFlag) Type() string { return "size" }
