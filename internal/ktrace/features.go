// Package ktrace measures FUSE requests in the kernel: it checks what the
// running kernel offers, attaches the BPF programs of internal/bpf to the fuse
// tracepoints, and turns their maps into a profile.
package ktrace

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// TracefsDirs are where tracefs is looked for, in order.
var TracefsDirs = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

// ParseRelease extracts major and minor from a release such as 6.18.44-fc.
func ParseRelease(rel string) (major, minor int, ok bool) {
	parts := strings.SplitN(rel, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	digits := strings.IndexFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' })
	if digits >= 0 {
		parts[1] = parts[1][:digits]
	}
	// Unsigned: a release never has a sign ("-1.0" is no version).
	ma, err1 := strconv.ParseUint(parts[0], 10, 16)
	mi, err2 := strconv.ParseUint(parts[1], 10, 16)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return int(ma), int(mi), true
}

// capability bits of /proc/self/status CapEff.
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// CheckPrivileges says, in one line, why this process cannot load and attach
// BPF tracing programs, or returns nil.
func CheckPrivileges() error {
	eff, err := effectiveCaps()
	if err != nil {
		return fmt.Errorf("cannot read capabilities: %w", err)
	}
	has := func(c uint) bool { return eff&(1<<c) != 0 }
	if has(capSysAdmin) || (has(capBPF) && has(capPerfmon)) {
		return nil
	}
	return errors.New("eBPF tracing needs root, or CAP_BPF and CAP_PERFMON: run with sudo")
}

func effectiveCaps() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("no CapEff in /proc/self/status")
}

// EnsureTracefs returns the tracefs directory, mounting tracefs at
// /sys/kernel/tracing when no tracefs is mounted.
func EnsureTracefs() (string, error) {
	for _, d := range TracefsDirs {
		if _, err := os.Stat(filepath.Join(d, "events")); err == nil {
			return d, nil
		}
	}
	d := TracefsDirs[0]
	if err := unix.Mount("nodev", d, "tracefs", 0, ""); err != nil {
		return "", fmt.Errorf("tracefs is not mounted and mounting it failed (%v): run mount -t tracefs nodev %s", err, d)
	}
	return d, nil
}

// TracepointField is one field of a tracepoint's format file.
type TracepointField struct {
	Decl   string // e.g. "uint64_t unique"
	Name   string
	Offset int
	Size   int
}

// ReadFormat parses tracefs events/SYSTEM/EVENT/format.
func ReadFormat(tracefs, system, event string) ([]TracepointField, error) {
	b, err := os.ReadFile(filepath.Join(tracefs, "events", system, event, "format"))
	if err != nil {
		return nil, err
	}
	return ParseFormat(string(b))
}

// ParseFormat parses the text of a tracepoint format file.
func ParseFormat(text string) ([]TracepointField, error) {
	var fields []TracepointField
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "field:") {
			continue
		}
		var f TracepointField
		for _, part := range strings.Split(line, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(part), ":")
			if !ok {
				continue
			}
			switch k {
			case "field":
				f.Decl = v
				words := strings.Fields(v)
				if len(words) > 0 {
					f.Name = strings.TrimLeft(words[len(words)-1], "*")
					if i := strings.IndexByte(f.Name, '['); i >= 0 {
						f.Name = f.Name[:i]
					}
				}
			case "offset":
				f.Offset, _ = strconv.Atoi(v)
			case "size":
				f.Size, _ = strconv.Atoi(v)
			}
		}
		if f.Name == "" {
			return nil, fmt.Errorf("malformed format line %q", line)
		}
		fields = append(fields, f)
	}
	return fields, nil
}

// Tracepoints is what the running kernel's fuse request tracepoints offer.
type Tracepoints struct {
	// SendHasID: fuse_request_send fires once the request has its id
	// (Linux 6.18 on). On 6.12 to 6.17 it reports id 0: the programs find
	// a request by its address (tp_btf), and the classic tracepoints, whose
	// records hold no address, cannot match a reply to its request.
	SendHasID bool
	// Sent: fuse:fuse_request_sent (Linux 7.3), which fires when a daemon
	// takes a request, from /dev/fuse or its io_uring ring: the queue
	// stage's end with no program on the daemons' system calls.
	Sent bool
	// Ring: FUSE over io_uring (Linux 6.14 on, fuse's BTF with its ring
	// entry) and io_uring's completion and submission tracepoints, from
	// which the ring's requests get their stages.
	Ring bool
}

// CheckTracepoints verifies that the kernel has the fuse request tracepoints
// with the fields the BPF programs read, and says what they offer.
func CheckTracepoints(tracefs, release string) (Tracepoints, error) {
	major, minor, _ := ParseRelease(release)
	want := map[string][]string{
		"fuse_request_send": {"connection", "unique", "opcode", "len"},
		"fuse_request_end":  {"connection", "unique", "len", "error"},
	}
	for _, ev := range []string{"fuse_request_send", "fuse_request_end"} {
		fields, err := ReadFormat(tracefs, "fuse", ev)
		if errors.Is(err, os.ErrNotExist) {
			return Tracepoints{}, fmt.Errorf("kernel %s has no fuse:%s tracepoint (added in Linux 6.12): boot Linux 6.12 or later", release, ev)
		}
		if err != nil {
			return Tracepoints{}, fmt.Errorf("reading fuse:%s format: %w", ev, err)
		}
		have := map[string]bool{}
		for _, f := range fields {
			have[f.Name] = true
		}
		for _, name := range want[ev] {
			if !have[name] {
				return Tracepoints{}, fmt.Errorf("kernel %s: fuse:%s has no %q field, which fusescope reads: boot Linux 6.18 or later", release, ev, name)
			}
		}
	}
	return Tracepoints{
		SendHasID: major > 6 || (major == 6 && minor >= 18),
		Sent:      hasEvent(tracefs, "fuse", "fuse_request_sent"),
		Ring: (major > 6 || (major == 6 && minor >= 14)) && haveFuseBTFType("fuse_ring_ent") &&
			hasEvent(tracefs, "io_uring", "io_uring_complete") && hasEvent(tracefs, "io_uring", "io_uring_submit_req"),
	}, nil
}

// hasEvent says whether tracefs has the tracepoint system:event.
func hasEvent(tracefs, system, event string) bool {
	_, err := os.Stat(filepath.Join(tracefs, "events", system, event))
	return err == nil
}
