package kfunc

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cilium/ebpf/asm"
	"github.com/fusescope/fusescope/internal/bpf"
)

func TestMatch(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"fuse_*", "fuse_lookup", true},
		{"fuse_*", "fuse_send_open.isra.0", true}, // a compiler's copy is a fuse_* function too
		{"fuse_*", "cuse_open", false},
		{"fuse_*", "fuse", false},
		{"fuse_lookup", "fuse_lookup", true},
		{"fuse_lookup", "fuse_lookup_name", false}, // no wildcard: the name itself, as in funccount
		{"fuse_lookup*", "fuse_lookup_name", true},
		{"*lookup*", "fuse_lookup_name", true},
		{"fuse_?ev_*", "fuse_dev_read", true},
		{"fuse_[lr]*", "fuse_readdir", true},
		{"fuse_[lr]*", "fuse_open", false},
		{"fuse_[!l]*", "fuse_lookup", false},
		{"*", "vfs_read", true},
	}
	for _, c := range cases {
		if err := CheckPattern(c.pattern); err != nil {
			t.Fatalf("CheckPattern(%q): %v", c.pattern, err)
		}
		if got := Match(c.pattern, c.name); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}

func TestCheckPatternRefuses(t *testing.T) {
	for pattern, want := range map[string]string{
		"":            "the function pattern is empty",
		"fuse_[":      "is not a glob",
		`fuse_\`:      "is not a glob",
		"fuse lookup": "no spaces or slashes",
		"fs/fuse_*":   "no spaces or slashes",
	} {
		err := CheckPattern(pattern)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckPattern(%q) = %v, want %q", pattern, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("CheckPattern(%q): more than one line: %q", pattern, err)
		}
	}
}

func TestParseAvailableFilterFunctions(t *testing.T) {
	in := `vfs_read
fuse_lookup [fuse]
fuse_lookup [fuse]
fuse_send_open.isra.0 [fuse]
__ftrace_invalid_address___64

dup_static
dup_static
`
	got, err := ParseAvailableFilterFunctions(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Symbol{{"vfs_read", ""}, {"fuse_lookup", "fuse"}, {"fuse_send_open.isra.0", "fuse"}, {"dup_static", ""}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"fuse_lookup fuse\n", "a b c\n", "fuse_lookup []\n"} {
		if _, err := ParseAvailableFilterFunctions(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseKallsyms(t *testing.T) {
	in := `ffffffffc0a7e200 t fuse_lookup	[fuse]
ffffffffc0a7e2f0 t fuse_lookup_name	[fuse]
ffffffff81000000 T _text
ffffffff8121a73f t dup_static
ffffffff8131a740 t dup_static
ffffffff81aaaaaa d fuse_data	[fuse]
ffffffff81bbbbbb T vfs_read
garbage line that is no symbol at all
`
	want := map[Symbol]bool{{"fuse_lookup", "fuse"}: true, {"dup_static", ""}: true, {"vfs_read", ""}: true, {"fuse_data", "fuse"}: true}
	got, err := ParseKallsyms(strings.NewReader(in), want)
	if err != nil {
		t.Fatal(err)
	}
	expect := Addresses{
		{"fuse_lookup", "fuse"}: {0xffffffffc0a7e200},
		{"dup_static", ""}:      {0xffffffff8121a73f, 0xffffffff8131a740}, // two static functions of one name
		{"vfs_read", ""}:        {0xffffffff81bbbbbb},
		// fuse_data is data, not a function.
	}
	if !reflect.DeepEqual(got, expect) {
		t.Errorf("got %v, want %v", got, expect)
	}
	hidden := "0000000000000000 t fuse_lookup\t[fuse]\n0000000000000000 T vfs_read\n"
	if _, err := ParseKallsyms(strings.NewReader(hidden), want); err == nil || !strings.Contains(err.Error(), "kptr_restrict") {
		t.Errorf("addresses hidden: %v, want kptr_restrict named", err)
	}
}

// A kprobe reports an address a few bytes into its function: the
// function that starts at most entryWindow before it.
func TestAddrIndex(t *testing.T) {
	addrs := Addresses{
		{"a", ""}:  {0x1000},
		{"b", ""}:  {0x1040, 0x3000}, // two static copies
		{"c", "m"}: {0x2000},
		{"z", ""}:  {0x9000}, // not a function of the run
	}
	x := newAddrIndex(addrs, map[Symbol]int{{"a", ""}: 0, {"b", ""}: 1, {"c", "m"}: 2})
	for ip, want := range map[uint64]int{0x1000: 0, 0x1001: 0, 0x1009: 0, 0x1041: 1, 0x2005: 2, 0x3001: 1} {
		if got, ok := x.lookup(ip); !ok || got != want {
			t.Errorf("lookup(%#x) = %d, %v; want %d", ip, got, ok, want)
		}
	}
	for _, ip := range []uint64{0xfff, 0x1000 + entryWindow + 1, 0x9001, 0} {
		if i, ok := x.lookup(ip); ok {
			t.Errorf("lookup(%#x) = %d: no function starts within %d bytes before it", ip, i, entryWindow)
		}
	}
}

// Every program loaded per function carries the marker its index
// replaces, and the patch leaves the original as it was; the kprobe
// counter, one program for every function, has none.
func TestWithIndex(t *testing.T) {
	spec, err := bpf.LoadKfunc()
	if err != nil {
		t.Fatal(err)
	}
	marked := func(insns asm.Instructions, v int64) int {
		n := 0
		for _, ins := range insns {
			if ins.OpCode.IsDWordLoad() && ins.Constant == v {
				n++
			}
		}
		return n
	}
	for _, name := range []string{"kfunc_count_fentry", "kfunc_enter_fentry", "kfunc_exit_fexit", "kfunc_enter_kprobe", "kfunc_exit_kretprobe"} {
		p := spec.Programs[name]
		c, err := withIndex(p, 77)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if marked(c.Instructions, indexMarker) != 0 || marked(c.Instructions, 77) == 0 {
			t.Errorf("%s: the marker was not replaced by the index", name)
		}
		if marked(p.Instructions, indexMarker) == 0 {
			t.Errorf("%s: patching changed the original", name)
		}
	}
	if _, err := withIndex(spec.Programs["kfunc_count_kprobe"], 1); err == nil {
		t.Errorf("kfunc_count_kprobe has a marker: it counts by address")
	}
}
