// Package ufunc counts and times the calls of a program's or a shared
// library's own functions with uprobes, with no change to it: bcc's
// funccount and funclatency for user space (fusescope ufunc). Functions
// are found in the ELF file's symbol tables by a glob, C++ names matched
// demangled.
package ufunc

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/ianlancetaylor/demangle"
)

// Symbol is a function of the binary: its ELF name, the name people read
// (demangled for C++), and where it is.
type Symbol struct {
	ELFName string
	Name    string
	Address uint64 // the symbol's value (its virtual address in the file)
	Size    uint64
}

// Binary is an ELF executable or shared library.
type Binary struct {
	Path    string
	IsGo    bool
	Symbols []Symbol
}

// OpenBinary reads a binary's function symbols (.symtab, else .dynsym).
func OpenBinary(p string) (*Binary, error) {
	notELF := fmt.Errorf("%s is not an ELF executable or library: give the daemon's binary, or the library (libfuse3.so.3) its functions are in", p)
	raw, err := os.Open(p)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("%s: no such file: give the path of the binary (which, or /proc/PID/exe)", p)
		}
		return nil, fmt.Errorf("%s: %v", p, errors.Unwrap(err))
	}
	magic := make([]byte, 4)
	_, err = raw.ReadAt(magic, 0)
	raw.Close()
	if err != nil || string(magic) != elf.ELFMAG {
		return nil, notELF
	}
	f, err := elf.Open(p)
	if err != nil {
		return nil, notELF
	}
	defer f.Close()
	b := &Binary{Path: p, IsGo: f.Section(".gopclntab") != nil || f.Section(".go.buildinfo") != nil}
	seen := map[string]bool{}
	for _, read := range []func() ([]elf.Symbol, error){f.Symbols, f.DynamicSymbols} {
		syms, err := read()
		if err != nil {
			continue
		}
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 || s.Section == elf.SHN_UNDEF || seen[s.Name] {
				continue
			}
			seen[s.Name] = true
			name := s.Name
			if i := strings.IndexByte(name, '@'); i > 0 {
				name = name[:i] // versioned dynamic symbols: statx@@GLIBC_2.28
			}
			if d, err := demangle.ToString(name, demangle.NoParams); err == nil {
				name = d
			}
			b.Symbols = append(b.Symbols, Symbol{ELFName: s.Name, Name: name, Address: s.Value, Size: s.Size})
		}
	}
	if len(b.Symbols) == 0 {
		return nil, fmt.Errorf("%s has no function symbols (stripped): give a binary with its symbol table, or its debug file", p)
	}
	sort.Slice(b.Symbols, func(i, j int) bool { return b.Symbols[i].Name < b.Symbols[j].Name })
	return b, nil
}

// Match lists the functions whose name (demangled) or ELF name matches the
// glob, each once: aliases at one address are one function (glibc's
// statx and __statx).
func (b *Binary) Match(glob string) ([]Symbol, error) {
	if _, err := path.Match(glob, ""); err != nil {
		return nil, fmt.Errorf("pattern %q: %v: give a glob such as 'fuse_*'", glob, err)
	}
	var out []Symbol
	at := map[uint64]bool{}
	for _, s := range b.Symbols {
		ok, _ := path.Match(glob, s.Name)
		if !ok {
			ok, _ = path.Match(glob, s.ELFName)
		}
		if ok && !at[s.Address] {
			at[s.Address] = true
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no function of %s matches %q: list them with nm -D --defined-only %s", b.Path, glob, b.Path)
	}
	return out, nil
}
