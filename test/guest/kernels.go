// Package guest holds end-to-end tests of fusescope trace that run inside
// every kernel of the matrix (test/kernels/run.sh boots each under qemu
// with this package's test binary and the release binary in its
// initramfs) and on the host, as part of go test ./... . Each test mounts
// the lab file system (go-fuse), runs a workload whose requests are known,
// and holds what fusescope reports to an oracle that shares no code with
// it: the workload itself, the injected latency, the kernel's own
// tracepoint records, and the lab daemon's counts.
//
// What each kernel should do is the table below, in one place: a test
// asserts both that a supported feature works and that an unsupported one
// is refused in one line with a non-zero exit. When a feature lands on a
// kernel, its entry is the only edit needed; docs/kernels.md shows the same
// table, and TestTableDoc holds the two together.
package guest

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Support is what fusescope does with one feature on one kernel.
type Support string

const (
	// Works: exit 0, the test's oracle holds, and nothing printed carries
	// the verifier's text.
	Works Support = "works"
	// Noisy: works, but a note on standard error carries the verifier's
	// text (a bug: the user should read one line saying what the kernel
	// lacks).
	Noisy Support = "noisy"
	// Refused: a non-zero exit and one line, naming the kernel release or
	// the flag, with no verifier text and no stack trace.
	Refused Support = "refused"
	// Fails: a non-zero exit whose message is not such a line (the
	// verifier's text, or several lines): a bug.
	Fails Support = "fails"
	// Wrong: exit 0, but the test's oracle does not hold: fusescope
	// measured something else than what happened (a bug).
	Wrong Support = "wrong"
)

// Feature is a column of the table: what one test exercises.
type Feature string

const (
	// Trace: fusescope trace as users start it (--attach auto), exact
	// request counts of a known workload (TestTraceCounts).
	Trace Feature = "trace"
	// TpBTF, Tracepoint, Fentry and Kprobe: the same workload with
	// --attach forced; where several work, their counts agree
	// (TestMechanismsAgree).
	TpBTF      Feature = "tp_btf"
	Tracepoint Feature = "tracepoint"
	Fentry     Feature = "fentry"
	Kprobe     Feature = "kprobe"
	// Latency: --latency getattr=5ms on the lab file system gives
	// GETATTR's p50 (TestInjectedLatency).
	Latency Feature = "latency"
	// Stages: --stages, queue + daemon + reply = total, daemon = the
	// injected latency (TestStages).
	Stages Feature = "stages"
	// Files: --files N names the files the workload read (TestFiles).
	Files Feature = "files"
	// Calls: --calls counts the workload's system calls (TestCalls).
	Calls Feature = "calls"
	// PageCache: --page-cache, a file read twice with keep_cache: the
	// second read all hits (TestPageCache).
	PageCache Feature = "page-cache"
	// Hung: --hung D lists a request the daemon holds (TestHung).
	Hung Feature = "hung"
	// Doctor: fusescope doctor names the small writes of a write-through
	// mount, doing without what the kernel cannot record (TestDoctor).
	Doctor Feature = "doctor"
)

// Features in the order docs/kernels.md's table lists them.
var Features = []Feature{Trace, TpBTF, Tracepoint, Fentry, Kprobe, Latency, Stages, Files, Calls, PageCache, Hung, Doctor}

// Mechanisms are the features that are ways of attaching.
var Mechanisms = []Feature{TpBTF, Tracepoint, Fentry, Kprobe}

// Tracepoints is what a kernel's fuse tracepoints give, a fact about the
// kernel itself that TestKernelFacts checks from tracefs, without
// fusescope.
type Tracepoints string

const (
	// NoTracepoints: no fuse:fuse_request_send (before 6.12).
	NoTracepoints Tracepoints = "none"
	// ZeroIDs: fuse_request_send fires before the request has its id and
	// records req 0 (6.12 to 6.17).
	ZeroIDs Tracepoints = "send id 0"
	// IDs: fuse_request_send records the request's id (6.18 on).
	IDs Tracepoints = "ids"
)

// Kernel is one row of the table.
type Kernel struct {
	Tracepoints Tracepoints
	// Sent: the kernel has fuse:fuse_request_sent (the daemon took the
	// request).
	Sent bool
	// Support says what fusescope does with each of Features.
	Support map[Feature]Support
}

// Kernels is the table, by the kernel's major.minor. A kernel without a row
// is held to the row of the nearest earlier one (the newest Debian kernel
// moves on); its tests say so.
var Kernels = map[string]Kernel{
	// Debian bullseye: no fuse tracepoints, and fuse.ko without BTF, so
	// kprobes on the functions that queue and end a request.
	"5.10": {Tracepoints: NoTracepoints, Support: with(Works, map[Feature]Support{
		TpBTF: Refused, Tracepoint: Refused, Fentry: Refused,
		Calls:     Refused, // joins calls to requests at the fuse tracepoints
		PageCache: Refused, // no filemap:mm_filemap_get_pages tracepoint
	})},
	// Debian bookworm: no fuse tracepoints; fentry, fuse.ko has BTF.
	"6.1": {Tracepoints: NoTracepoints, Support: with(Works, map[Feature]Support{
		TpBTF: Refused, Tracepoint: Refused,
		Calls:     Refused, // joins calls to requests at the fuse tracepoints
		PageCache: Refused, // no filemap:mm_filemap_get_pages tracepoint
	})},
	// Debian trixie (fuse built in) and bookworm-backports (fuse.ko):
	// tp_btf keys each request by its address, which the classic
	// tracepoints, with only its id (0 at send), cannot.
	"6.12": {Tracepoints: ZeroIDs, Support: with(Works, map[Feature]Support{Tracepoint: Refused})},
	// Debian trixie-backports.
	"6.17": {Tracepoints: ZeroIDs, Support: with(Works, map[Feature]Support{Tracepoint: Refused})},
	// This project's machines: neither fentry nor kprobes.
	"6.18": {Tracepoints: IDs, Support: with(Works, map[Feature]Support{Fentry: Refused, Kprobe: Refused})},
	// Debian trixie-backports' newest (fuse built in): req->chan where
	// earlier kernels have req->fm, a CO-RE flavour.
	"7.3": {Tracepoints: IDs, Sent: true, Support: all(Works)},
}

// all gives every feature the same support.
func all(s Support) map[Feature]Support {
	m := map[Feature]Support{}
	for _, f := range Features {
		m[f] = s
	}
	return m
}

// with gives every feature base but those in differ.
func with(base Support, differ map[Feature]Support) map[Feature]Support {
	m := all(base)
	for f, s := range differ {
		m[f] = s
	}
	return m
}

// Row finds the row for a kernel release ("7.3.4+deb13-amd64"): its own, or
// the nearest earlier one's. key is the row's major.minor.
func Row(release string) (key string, k Kernel, err error) {
	mm, err := majorMinor(release)
	if err != nil {
		return "", Kernel{}, err
	}
	if k, ok := Kernels[mm]; ok {
		return mm, k, nil
	}
	keys := RowKeys()
	for i := len(keys) - 1; i >= 0; i-- {
		if versionLess(keys[i], mm) {
			return keys[i], Kernels[keys[i]], nil
		}
	}
	return "", Kernel{}, fmt.Errorf("kernel %s is older than every row of test/guest/kernels.go (%s first): add a row for it", release, keys[0])
}

// RowKeys lists the table's kernels, oldest first.
func RowKeys() []string {
	keys := make([]string, 0, len(Kernels))
	for k := range Kernels {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return versionLess(keys[i], keys[j]) })
	return keys
}

// majorMinor is "7.3" of "7.3.4+deb13-amd64".
func majorMinor(release string) (string, error) {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return "", fmt.Errorf("kernel release %q does not start with MAJOR.MINOR", release)
	}
	minor := parts[1]
	if i := strings.IndexFunc(minor, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minor = minor[:i]
	}
	if _, err := strconv.Atoi(parts[0]); err != nil || minor == "" {
		return "", fmt.Errorf("kernel release %q does not start with MAJOR.MINOR", release)
	}
	return parts[0] + "." + minor, nil
}

// versionLess compares two major.minor strings numerically.
func versionLess(a, b string) bool {
	am, an := split(a)
	bm, bn := split(b)
	return am < bm || am == bm && an < bn
}

func split(mm string) (major, minor int) {
	x, y, _ := strings.Cut(mm, ".")
	major, _ = strconv.Atoi(x)
	minor, _ = strconv.Atoi(y)
	return major, minor
}
