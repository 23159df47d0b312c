// Command loopback is go-fuse's example/loopback (v2.12) with the options
// that example sets (entry and attr timeouts 1 s, NullPermissions, direct
// mount, allow_other and, with it, default_permissions), plus FUSE
// passthrough disabled, which the example has no flag for: the baseline the
// lab file system's default mode is compared with in make bench.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: loopback MOUNTPOINT ORIGINAL")
		os.Exit(2)
	}
	root, err := fs.NewLoopbackRoot(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sec := time.Second
	server, err := fs.Mount(os.Args[1], root, &fs.Options{
		AttrTimeout: &sec, EntryTimeout: &sec, NullPermissions: true,
		MountOptions: fuse.MountOptions{
			AllowOther: true, DirectMount: true, FsName: os.Args[2], Name: "loopback",
			DisabledCapabilities: fuse.CAP_PASSTHROUGH,
			// What the example adds with -allow-other.
			Options: []string{"default_permissions"},
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("Mounted!")
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM)
	go func() { <-c; server.Unmount() }()
	server.Wait()
}
