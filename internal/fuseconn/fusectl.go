package fuseconn

// The FUSE control file system: one directory per connection under
// /sys/fs/fuse/connections, with the counters and limits the kernel
// applies to it.

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fusescope/fusescope/internal/profile"
	"golang.org/x/sys/unix"
)

// Dir is where fusectl shows each FUSE connection.
const Dir = "/sys/fs/fuse/connections"

// Ensure mounts fusectl on Dir if it is not mounted.
func Ensure() error {
	var st unix.Statfs_t
	if err := unix.Statfs(Dir, &st); err != nil {
		return fmt.Errorf("%s: %w (is the fuse module loaded? modprobe fuse)", Dir, err)
	}
	const fusectlMagic = 0x65735543
	if st.Type == fusectlMagic {
		return nil
	}
	if err := unix.Mount("fusectl", Dir, "fusectl", 0, ""); err != nil {
		return fmt.Errorf("fusectl is not mounted and mounting it failed (%v): run mount -t fusectl none %s", err, Dir)
	}
	return nil
}

// Read reads /sys/fs/fuse/connections/N; nil if the connection is gone.
func Read(conn uint32) *profile.ConnInfo { return readIn(Dir, conn) }

func readIn(root string, conn uint32) *profile.ConnInfo {
	dir := filepath.Join(root, strconv.FormatUint(uint64(conn), 10))
	read := func(name string) (uint64, bool) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return 0, false
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		return v, err == nil
	}
	w, ok := read("waiting")
	if !ok {
		return nil
	}
	mb, _ := read("max_background")
	ct, _ := read("congestion_threshold")
	// fuse_abort_conn sets max_background to UINT_MAX to release every
	// queued background request; fusectl shows no other sign of an abort.
	return &profile.ConnInfo{Waiting: w, MaxBackground: mb, CongestionThreshold: ct, Aborted: mb == math.MaxUint32}
}

// Live lists the connections fusectl shows now.
func Live() (map[uint32]bool, error) {
	ents, err := os.ReadDir(Dir)
	if err != nil {
		return nil, err
	}
	out := make(map[uint32]bool, len(ents))
	for _, e := range ents {
		if n, err := strconv.ParseUint(e.Name(), 10, 32); err == nil {
			out[uint32(n)] = true
		}
	}
	return out, nil
}
