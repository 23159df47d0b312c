package ktrace

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/kernel"
	"github.com/fusescope/fusescope/internal/option"
	"github.com/fusescope/fusescope/internal/profile"
)

func TestParseFormat(t *testing.T) {
	b, err := os.ReadFile("testdata/fuse_request_send.format")
	if err != nil {
		t.Fatal(err)
	}
	fields, err := ParseFormat(string(b))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]TracepointField{}
	for _, f := range fields {
		byName[f.Name] = f
	}
	if f := byName["unique"]; f.Offset != 16 || f.Size != 8 {
		t.Errorf("unique: %+v", f)
	}
	if f := byName["opcode"]; f.Offset != 24 || f.Size != 4 {
		t.Errorf("opcode: %+v", f)
	}
	if _, ok := byName["connection"]; !ok {
		t.Error("no connection field")
	}
}

func TestParseRelease(t *testing.T) {
	for rel, want := range map[string][2]int{"6.18.44-fc-v669": {6, 18}, "6.1.0-28-amd64": {6, 1}, "5.15.0": {5, 15}, "6.12rc1": {6, 12}} {
		ma, mi, ok := ParseRelease(rel)
		if !ok || ma != want[0] || mi != want[1] {
			t.Errorf("ParseRelease(%q) = %d.%d %v", rel, ma, mi, ok)
		}
	}
	if _, _, ok := ParseRelease("garbage"); ok {
		t.Error("garbage parsed")
	}
}

// fakeTracefs writes format files for the fuse events; drop names fields to
// leave out of fuse_request_send.
func fakeTracefs(t *testing.T, withEvents bool, drop string) string {
	t.Helper()
	dir := t.TempDir()
	if !withEvents {
		return dir
	}
	send, err := os.ReadFile("testdata/fuse_request_send.format")
	if err != nil {
		t.Fatal(err)
	}
	text := string(send)
	if drop != "" {
		text = strings.ReplaceAll(text, " "+drop+";", " other;")
	}
	end := "name: fuse_request_end\nformat:\n\tfield:dev_t connection;\toffset:8;\tsize:4;\tsigned:0;\n\tfield:uint64_t unique;\toffset:16;\tsize:8;\tsigned:0;\n\tfield:uint32_t len;\toffset:24;\tsize:4;\tsigned:0;\n\tfield:int32_t error;\toffset:28;\tsize:4;\tsigned:1;\n"
	for ev, body := range map[string]string{"fuse_request_send": text, "fuse_request_end": end} {
		d := filepath.Join(dir, "events", "fuse", ev)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "format"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCheckTracepoints(t *testing.T) {
	cases := []struct {
		name    string
		events  bool
		drop    string
		release string
		want    string // "" means no error
		offers  Tracepoints
	}{
		{"6.18 with both tracepoints", true, "", "6.18.44-fc", "", Tracepoints{SendHasID: true}},
		{"7.0", true, "", "7.0.1", "", Tracepoints{SendHasID: true}},
		{"no fuse tracepoints (< 6.12)", false, "", "6.1.0-28-amd64", "kernel 6.1.0-28-amd64 has no fuse:fuse_request_send tracepoint", Tracepoints{}},
		{"6.12 to 6.17 report unique 0 at send", true, "", "6.15.2", "", Tracepoints{SendHasID: false}},
		{"a field the program reads is missing", true, "unique", "6.18.1", `has no "unique" field`, Tracepoints{}},
	}
	for _, c := range cases {
		offers, err := CheckTracepoints(fakeTracefs(t, c.events, c.drop), c.release)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		case err != nil && (!strings.Contains(err.Error(), "boot Linux 6.") || strings.Contains(err.Error(), "\n")):
			t.Errorf("%s: the error must be one line that says what fixes it: %v", c.name, err)
		case err == nil && offers != c.offers:
			t.Errorf("%s: offers %+v, want %+v", c.name, offers, c.offers)
		}
	}
	dir := fakeTracefs(t, true, "")
	if err := os.MkdirAll(filepath.Join(dir, "events", "fuse", "fuse_request_sent"), 0o755); err != nil {
		t.Fatal(err)
	}
	if offers, err := CheckTracepoints(dir, "7.3.4+deb13-amd64"); err != nil || !offers.Sent || !offers.SendHasID {
		t.Errorf("7.3 with fuse_request_sent: offers %+v, %v", offers, err)
	}
}

// The live system-call source sizes its maps and decodes its events with
// constants that systrace.h defines for the BPF side.
func TestSysTraceSizesMatchHeader(t *testing.T) {
	b, err := os.ReadFile("../bpf/systrace.h")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"MAX_NR": sysMaxNR, "MAX_TSLOTS": sysMaxTSlots, "MAX_PSLOTS": sysMaxPSlots, "MAX_FDS": sysMaxFDs,
		"IO_KINDS": sysIOKinds, "MAX_BINS": sysMaxBins, "CATEGORIES": sysCats, "ERRNO_SLOTS": sysErrnoSlots, "RARE_IF_DUP": rareIfDup,
		"RARE_IF_COUNTED": rareIfCounted, "RARE_IF_MISSING": rareIfMissing,
		"SEV_SYSCALL": sevSyscall, "SEV_FORK": sevFork, "SEV_EXEC": sevExec, "SEV_EXIT": sevExit, "SEV_ADOPT": sevAdopt,
		"SEV_FD_IO": sevFDIO, "SEV_CALLS": sevCalls, "HANDED_TSLOT": handedTSlot, "HANDED_PSLOT": handedPSlot,
	}
	got := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^#define ([A-Z_]+) (\d+)\b|\b((?:SEV|SDROP)_[A-Z_]+) = (\d+)`).FindAllStringSubmatch(string(b), -1) {
		name, v := m[1]+m[3], m[2]+m[4]
		got[name], _ = strconv.Atoi(v)
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("%s: %d (found %v) in systrace.h, %d in Go", name, g, ok, w)
		}
	}
	if len(ioKinds)+len(peerKinds) != sysIOKinds {
		t.Errorf("%d I/O kinds and %d peer kinds named, IO_KINDS is %d", len(ioKinds), len(peerKinds), sysIOKinds)
	}
	for _, name := range peerKinds {
		if peerArgs[name] == 0 || !slices.Contains(ioKinds, name) {
			t.Errorf("peer kind %s: no peer argument, or not an I/O kind", name)
		}
	}
	if len(sysDropNames) != got["SDROP_REASONS"] {
		t.Errorf("%d drop reasons named, SDROP_REASONS is %d", len(sysDropNames), got["SDROP_REASONS"])
	}
}

// An interval's record holds the slow requests the kernel numbered with its
// interval (or an earlier one), whenever they were read; the later ones go
// to the next, in their order.
func TestSlowListSplitAfter(t *testing.T) {
	var l slowList
	for i, epoch := range []uint32{4, 5, 4, 4, 6} {
		l.add(profile.SlowRequest{Interval: epoch, Op: strconv.Itoa(i)})
	}
	l.lost = 3
	later := l.splitAfter(4)
	ops := func(l slowList) (s []string) {
		for _, r := range l.reqs {
			s = append(s, r.Op)
		}
		return s
	}
	if got := strings.Join(ops(l), " "); got != "0 2 3" || l.lost != 3 {
		t.Errorf("kept %q (lost %d), want 0 2 3 (lost 3)", got, l.lost)
	}
	if got := strings.Join(ops(later), " "); got != "1 4" || later.lost != 0 {
		t.Errorf("later %q (lost %d), want 1 4 (lost 0)", got, later.lost)
	}
	var full slowList
	for range profile.MaxSlow + 2 {
		full.add(profile.SlowRequest{})
	}
	if len(full.reqs) != profile.MaxSlow || full.lost != 2 {
		t.Errorf("a full list holds %d and lost %d, want %d and 2", len(full.reqs), full.lost, profile.MaxSlow)
	}
}

// The errno slots of count_errno (systrace.bpf.c) name the errors strace
// names: the errno itself below 144, the kernel's restart codes from 512.
func TestErrnoSlots(t *testing.T) {
	for slot, want := range map[uint32]string{2: "ENOENT", 61: "ENODATA", 111: "ECONNREFUSED", 133: "EHWPOISON",
		143: "E143", 144: "ERESTARTSYS", 148: "ERESTART_RESTARTBLOCK", 159: "E527"} {
		err, ok := errnoOfSlot(slot)
		if got := kernel.ErrnoName(err); !ok || got != want {
			t.Errorf("slot %d: %s (%v), want %s", slot, got, ok, want)
		}
	}
	for _, slot := range []uint32{0, sysErrnoSlots} {
		if _, ok := errnoOfSlot(slot); ok {
			t.Errorf("slot %d names an errno", slot)
		}
	}
}

// A program the kernel will not load is one line in fusescope's words,
// never the verifier's log, and says what still works.
func TestLoadErrorIsOneLine(t *testing.T) {
	ve := &ebpf.VerifierError{Log: []string{"0: R1=ctx()", "1: (85) call unknown#195896080", "invalid func unknown#195896080", "processed 2 insns"}}
	err := kernelLacks(fmt.Errorf("field Sent: program stage_sent: load program: %w", ve), "{stages} (the program on fuse:fuse_request_sent)")
	msg := err.Error()
	for _, bad := range []string{"\n", "unknown#", "R1=", "processed", "program stage_sent"} {
		if strings.Contains(msg, bad) {
			t.Errorf("%q holds %q", msg, bad)
		}
	}
	for _, want := range []string{"cannot run --stages", "CO-RE relocation failed", "leave out --stages and the rest of the trace works"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	if !errors.As(err, &ve) {
		t.Error("the verifier's error is not kept for FUSESCOPE_DEBUG")
	}
	// A bench file spells the setting as its YAML key.
	yaml := option.Reword(err, func(key string) string { return key + ":" })
	if !strings.Contains(yaml, "cannot run stages: (the program") || !strings.Contains(yaml, "leave out stages: and") || strings.Contains(yaml, "--") {
		t.Errorf("in a bench file's words: %q", yaml)
	}
}
