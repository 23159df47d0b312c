package systrace

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// Logs is the event source of strace log files, through Named. The files
// of an strace -ff set (LOG.PID) are read by PID, so that a parent's file,
// with the fork that hands its fds to a child, comes before the child's
// (PIDs wrap around only on long-running systems); files of other names
// come first, in the order given.
func Logs(paths []string, p *Parser) func(emit func(*Event)) error {
	return Named(func(emit func(*Event)) error {
		ordered := append([]string(nil), paths...)
		sort.SliceStable(ordered, func(i, j int) bool { return PIDSuffix(ordered[i]) < PIDSuffix(ordered[j]) })
		for _, path := range ordered {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			p.File, p.DefaultPID, p.relClock = path, PIDSuffix(path), 0
			err = p.Parse(f, emit)
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %v", path, err)
			}
		}
		return nil
	}, p)
}

// Named is the preprocessing stage between p's parsed events and the
// analyzers: where the log has no -y targets, it follows fds to name them;
// where it has, it names sockets by their addresses; and it names the fd a
// poll waited on.
func Named(parsed func(emit func(*Event)) error, p *Parser) func(emit func(*Event)) error {
	namer := newFDNamer()
	named := nameFDs(parsed, namer)
	return func(emit func(*Event)) error {
		err := named(emit)
		p.FollowedFDs = !namer.annotated
		return err
	}
}

// PIDSuffix is the PID of an strace -ff file (LOG.1234), or 0.
func PIDSuffix(path string) int {
	ext := filepath.Ext(path)
	if ext == "" {
		return 0
	}
	pid, err := strconv.Atoi(ext[1:])
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
