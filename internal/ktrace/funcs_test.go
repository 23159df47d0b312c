package ktrace

import (
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// kernel builds an inventory: the functions traceable, those in BTF.
func testKernel(release string, traceable, inBTF []string) kernelFuncs {
	k := kernelFuncs{release: release, traceable: map[string]bool{}, inBTF: map[string]bool{}}
	for _, f := range traceable {
		k.traceable[f] = true
	}
	for _, f := range inBTF {
		k.inBTF[f] = true
	}
	return k
}

var (
	all510  = []string{"queue_request_and_unlock", "fuse_request_end", "fuse_copy_args", "fuse_dev_do_write"}
	all612  = []string{"fuse_dev_queue_req", "fuse_request_end", "fuse_copy_args", "fuse_dev_do_write"}
	noFuncs []string
)

// The mechanism and functions each kernel gets, as the guests showed them
// (test/guest): Debian's 6.1 fentry, its 5.10 (fuse without BTF) kprobes;
// the send function by version.
func TestFuncsPlan(t *testing.T) {
	noKprobes := func(k kernelFuncs) kernelFuncs {
		k.kprobes = errors.New("no kprobes: built without CONFIG_KPROBES")
		return k
	}
	noBTF := func(k kernelFuncs) kernelFuncs { k.fentry = errors.New("no kernel BTF"); return k }
	for _, c := range []struct {
		name       string
		k          kernelFuncs
		attach     string
		mech, send string
		stage      bool
	}{
		{"6.1 auto", testKernel("6.1.0-50-amd64", all510, all510), AttachAuto, AttachFentry, "queue_request_and_unlock", true},
		{"6.1 kprobe", testKernel("6.1.0-50-amd64", all510, all510), AttachKprobe, AttachKprobe, "queue_request_and_unlock", true},
		{"5.10 fuse without BTF", testKernel("5.10.0-32-amd64", all510, noFuncs), AttachAuto, AttachKprobe, "queue_request_and_unlock", true},
		{"5.10 no vmlinux BTF", noBTF(testKernel("5.10.0-32-amd64", all510, noFuncs)), "", AttachKprobe, "queue_request_and_unlock", true},
		{"6.12 fentry", testKernel("6.12.117+deb13-amd64", all612, all612), AttachFentry, AttachFentry, "fuse_dev_queue_req", true},
		{"7.3 fentry", testKernel("7.3.4+deb13-amd64", all612, all612), AttachFentry, AttachFentry, "fuse_dev_queue_req", true},
		{"6.1 fentry no kprobes", noKprobes(testKernel("6.1.0-50-amd64", all510, all510)), AttachAuto, AttachFentry, "queue_request_and_unlock", true},
		{"no stage functions", testKernel("6.1.0-50-amd64", all510[:2], all510), AttachAuto, AttachFentry, "queue_request_and_unlock", false},
		{"both send functions: the older first", testKernel("6.9.0", append(all510, "fuse_dev_queue_req"), all510), AttachAuto, AttachFentry, "queue_request_and_unlock", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := c.k.plan(c.attach)
			if err != nil {
				t.Fatal(err)
			}
			if m.attach != c.mech || m.send != c.send || (m.stages == nil) != c.stage {
				t.Errorf("got %s on %s (stages %v), want %s on %s (stages %v)", m.attach, m.send, m.stages, c.mech, c.send, c.stage)
			}
			if m.why == "" || strings.Contains(m.note(), "\n") {
				t.Errorf("note %q: want one line saying why", m.note())
			}
		})
	}
}

// A kernel that cannot do what was asked is refused in one line naming the
// release, what it lacks and what to do.
func TestFuncsPlanRefusals(t *testing.T) {
	noKprobes := testKernel("5.10.0-32-amd64", all510, noFuncs)
	noKprobes.kprobes = errors.New("no kprobes: built without CONFIG_KPROBES")
	host := testKernel("6.18.44", noFuncs, noFuncs)
	host.ftrace = errors.New("reading available_filter_functions: operation not permitted")
	host.kprobes = errors.New("no kprobes: built without CONFIG_KPROBES")
	for _, c := range []struct {
		name   string
		k      kernelFuncs
		attach string
		want   []string
	}{
		{"fentry on this project's machines", host, AttachFentry, []string{"6.18.44", "cannot trace its functions", "leave out --attach fentry"}},
		{"kprobe on this project's machines", host, AttachKprobe, []string{"6.18.44", "cannot trace its functions", "leave out --attach kprobe"}},
		{"fentry where fuse has no BTF", testKernel("5.10.0-32-amd64", all510, noFuncs), AttachFentry, []string{"5.10.0-32-amd64", "no fentry", "not in its BTF", "leave out --attach fentry"}},
		{"neither", noKprobes, AttachAuto, []string{"5.10.0-32-amd64", "no fuse tracepoints", "neither fentry", "nor kprobes", "boot Linux 6.12"}},
		{"kprobe without kprobes", noKprobes, AttachKprobe, []string{"has no kprobes", "leave out --attach kprobe"}},
		{"send inlined", testKernel("6.1.0", all510[1:], all510), AttachAuto, []string{"none of the functions that queue a request", "queue_request_and_unlock, fuse_dev_queue_req"}},
		{"end inlined", testKernel("6.1.0", all510[:1], all510), AttachAuto, []string{"cannot trace fuse_request_end"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.k.plan(c.attach)
			if err == nil {
				t.Fatal("planned, want a refusal")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("%q: more than one line", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q: want %q in it", msg, w)
				}
			}
		})
	}
}

// available_filter_functions lines name a function, and its module.
func TestReadTraceable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "available_filter_functions")
	os.WriteFile(path, []byte("fuse_request_end [fuse]\nqueue_request_and_unlock [fuse]\nfuse_request_endless\nvfs_read\n"), 0o600)
	k := testKernel("6.1.0", nil, nil)
	wanted := map[string]bool{"fuse_request_end": true, "queue_request_and_unlock": true, "fuse_copy_finish": true}
	if err := k.readTraceable(path, wanted); err != nil {
		t.Fatal(err)
	}
	if !k.traceable["fuse_request_end"] || !k.traceable["queue_request_and_unlock"] || k.traceable["fuse_copy_finish"] || len(k.traceable) != 2 {
		t.Errorf("traceable %v", k.traceable)
	}
	os.WriteFile(path, nil, 0o600)
	if err := k.readTraceable(path, wanted); err == nil || !strings.Contains(err.Error(), "lists none") {
		t.Errorf("empty list: %v", err)
	}
	if err := k.readTraceable(filepath.Join(dir, "missing"), wanted); err == nil || strings.Contains(err.Error(), "open ") {
		t.Errorf("missing file: %v (want the path and the errno, not os's words)", err)
	}
}

// The notes of Debian's 5.10 and 6.1 fuse modules, as
// /sys/module/fuse/notes/.note.gnu.build-id shows them in their guests.
const (
	note510 = "040000001400000003000000474e5500670b7f9fbe9a1bf3e8d62f34fb87db628ba73d9e"
	note61  = "040000001400000003000000474e5500db16b7856761b8cf5f62304c9d743529d126a878"
)

func TestParseBuildIDNote(t *testing.T) {
	for _, c := range []struct{ note, want string }{
		{note510, "670b7f9fbe9a1bf3e8d62f34fb87db628ba73d9e"},
		{note61, "db16b7856761b8cf5f62304c9d743529d126a878"},
		// Another note first (a Linux-owned one), then the build id.
		{"0600000004000000010000004c696e757800000001000000" + note510, "670b7f9fbe9a1bf3e8d62f34fb87db628ba73d9e"},
	} {
		raw, err := hex.DecodeString(strings.ReplaceAll(c.note, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseBuildIDNote(raw)
		if err != nil || got != c.want {
			t.Errorf("parseBuildIDNote(%s) = %q, %v; want %q", c.note, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "04000000", "0400000014000000030000004e554700670b7f9f", "04000000ffffff7f03000000474e5500"} {
		raw, _ := hex.DecodeString(bad)
		if id, err := parseBuildIDNote(raw); err == nil {
			t.Errorf("parseBuildIDNote(%s) = %q, want an error", bad, id)
		}
	}
}

func FuzzParseBuildIDNote(f *testing.F) {
	raw, _ := hex.DecodeString(note510)
	f.Add(raw)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := parseBuildIDNote(b)
		if err == nil && (len(id) == 0 || len(id)%2 != 0) {
			t.Errorf("id %q from %x", id, b)
		}
	})
}

// The fuse types carried for Debian's 5.10 describe what the programs
// read, at the offsets its fuse.ko uses (the disassembly of its
// queue_request_and_unlock: args at 0x20, in.h.len at 0x38).
func TestEmbeddedFuseTypes(t *testing.T) {
	spec, err := embeddedFuseTypes("670b7f9fbe9a1bf3e8d62f34fb87db628ba73d9e")
	if err != nil {
		t.Fatal(err)
	}
	var req *btf.Struct
	if err := spec.TypeByName("fuse_req", &req); err != nil {
		t.Fatal(err)
	}
	offsets := map[string]uint32{}
	for _, m := range req.Members {
		offsets[m.Name] = uint32(m.Offset.Bytes())
	}
	if offsets["args"] != 0x20 || offsets["in"] != 0x38 {
		t.Errorf("fuse_req: args at %#x, in at %#x; want 0x20, 0x38", offsets["args"], offsets["in"])
	}
	for _, name := range []string{"fm", "out"} {
		if _, ok := offsets[name]; !ok {
			t.Errorf("fuse_req has no %s", name)
		}
	}
	for _, name := range []string{"fuse_copy_state", "fuse_mount", "fuse_conn", "fuse_args"} {
		var s *btf.Struct
		if err := spec.TypeByName(name, &s); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := embeddedFuseTypes("0000"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an unknown build: %v, want os.ErrNotExist", err)
	}
}
