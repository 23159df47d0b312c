package kfunc

import (
	"strings"
	"testing"
)

// The parsers of the kernel's function lists never panic, and what they
// return is well formed: a name without spaces, a module without brackets.
func FuzzParseAvailableFilterFunctions(f *testing.F) {
	for _, s := range []string{"fuse_lookup [fuse]\nvfs_read\n", "a [\n", "[x]\n", "a [b] c\n", "__ftrace_invalid_address___1\n", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		syms, err := ParseAvailableFilterFunctions(strings.NewReader(in))
		if err != nil {
			return
		}
		seen := map[Symbol]bool{}
		for _, s := range syms {
			if s.Name == "" || strings.ContainsAny(s.Name, " \t\n") || strings.ContainsAny(s.Module, "[] \t\n") || seen[s] {
				t.Fatalf("%q: symbol %#v", in, s)
			}
			seen[s] = true
		}
	})
}

func FuzzParseKallsyms(f *testing.F) {
	for _, s := range []string{"ffffffffc0a7e200 t fuse_lookup\t[fuse]\n", "0 T a\n", "zz t a\n", "1 t a [\n", "1 t fuse_lookup [fuse] x\n"} {
		f.Add(s)
	}
	want := map[Symbol]bool{{"fuse_lookup", "fuse"}: true, {"a", ""}: true}
	f.Fuzz(func(t *testing.T, in string) {
		addrs, err := ParseKallsyms(strings.NewReader(in), want)
		if err != nil {
			return
		}
		for s := range addrs {
			if !want[s] {
				t.Fatalf("%q: %v was not asked for", in, s)
			}
		}
	})
}
