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
	"golang.org/x/arch/x86/x86asm"
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
	machine elf.Machine
}

// code reads a function's machine code (amd64 only).
func (b *Binary) code(s Symbol) ([]byte, error) {
	if b.machine != elf.EM_X86_64 {
		return nil, fmt.Errorf("%s: Go functions are probed past their prologue and at their RET instructions on amd64 only", path.Base(b.Path))
	}
	f, err := elf.Open(b.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var text *elf.Section
	for _, sec := range f.Sections {
		if sec.Type == elf.SHT_PROGBITS && sec.Flags&elf.SHF_EXECINSTR != 0 && s.Address >= sec.Addr && s.Address+s.Size <= sec.Addr+sec.Size {
			text = sec
		}
	}
	if text == nil || s.Size == 0 {
		return nil, fmt.Errorf("%s: its code is in no section of %s", s.Name, path.Base(b.Path))
	}
	code := make([]byte, s.Size)
	if _, err := text.ReadAt(code, int64(s.Address-text.Addr)); err != nil {
		return nil, fmt.Errorf("%s: reading its code: %v", s.Name, err)
	}
	return code, nil
}

// GoEntry is where a Go function's entry is probed: past its prologue's
// stack check (CMP against the goroutine's stack guard, 16(R14), then
// JBE to morestack), since a call that grows its stack runs the function
// again from its first instruction, which a probe there would count
// twice; 0 for a function with no check (NOSPLIT).
func (b *Binary) GoEntry(s Symbol) (uint64, error) {
	code, err := b.code(s)
	if err != nil {
		return 0, err
	}
	sawCheck := false
	for pc, n := 0, 0; pc < len(code) && n < 4; n++ {
		inst, err := x86asm.Decode(code[pc:], 64)
		if err != nil {
			return 0, nil
		}
		pc += inst.Len
		if inst.Op == x86asm.CMP {
			for _, a := range inst.Args {
				if m, ok := a.(x86asm.Mem); ok && m.Base == x86asm.R14 {
					sawCheck = true
				}
			}
			continue
		}
		if sawCheck && inst.Op == x86asm.JBE {
			return uint64(pc), nil
		}
	}
	return 0, nil
}

// Returns lists the offsets, from the function's start, of its RET
// instructions, found by disassembling it (amd64): where a Go function is
// timed, since a return probe would rewrite the return address on a
// goroutine's stack, which the Go runtime moves and reads.
func (b *Binary) Returns(s Symbol) ([]uint64, error) {
	code, err := b.code(s)
	if err != nil {
		return nil, err
	}
	var rets []uint64
	for pc := 0; pc < len(code); {
		inst, err := x86asm.Decode(code[pc:], 64)
		if err != nil {
			// Go pads functions with INT3 (0xcc); anything else undecoded
			// leaves the RETs unknown.
			if code[pc] == 0xcc {
				pc++
				continue
			}
			return nil, fmt.Errorf("%s: undecodable instruction at +%#x: its returns are not known", s.Name, pc)
		}
		if inst.Op == x86asm.RET {
			rets = append(rets, uint64(pc))
		}
		pc += inst.Len
	}
	if len(rets) == 0 {
		return nil, fmt.Errorf("%s has no RET instruction (it never returns, or ends in a tail call): it cannot be timed", s.Name)
	}
	return rets, nil
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
	b := &Binary{Path: p, IsGo: f.Section(".gopclntab") != nil || f.Section(".go.buildinfo") != nil, machine: f.Machine}
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
		ok := globMatch(glob, s.Name) || globMatch(glob, s.ELFName)
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

// globMatch is path.Match with * matching a slash too: Go's function
// names hold their package's path (github.com/x/y.F).
func globMatch(glob, name string) bool {
	const slash = "\u2215" // DIVISION SLASH: no glob syntax, in no symbol
	ok, _ := path.Match(strings.ReplaceAll(glob, "/", slash), strings.ReplaceAll(name, "/", slash))
	return ok
}
