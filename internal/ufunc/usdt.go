package ufunc

import (
	"bytes"
	"debug/elf"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Probe is a USDT probe (a SystemTap SDT note): a marked point in a
// program, with the arguments its author exposed there.
type Probe struct {
	Provider, Name string
	// Args are the arguments' specifiers, as the note spells them
	// ("-4@%edi 8@8(%rbp)": size, signed if negative, and where).
	Args string
	// Offset is the probe's place in the file, and SemaphoreOffset its
	// semaphore's (0: none), as uprobes take them.
	Offset, SemaphoreOffset uint64
}

// FullName is provider:name.
func (p Probe) FullName() string { return p.Provider + ":" + p.Name }

// USDT reads the binary's USDT probes (.note.stapsdt).
func (b *Binary) USDT() ([]Probe, error) {
	f, err := elf.Open(b.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sec := f.Section(".note.stapsdt")
	if sec == nil {
		return nil, fmt.Errorf("%s has no USDT probes (no .note.stapsdt section): libfuse has them when built with -Denable-usdt", b.Path)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("%s: reading its USDT notes: %v", b.Path, err)
	}
	// Prelinking moves .stapsdt.base; the notes say where it was.
	var baseNow uint64
	if s := f.Section(".stapsdt.base"); s != nil {
		baseNow = s.Addr
	}
	var probes []Probe
	order := f.ByteOrder
	for len(data) >= 12 {
		nameSize, descSize, typ := order.Uint32(data), order.Uint32(data[4:]), order.Uint32(data[8:])
		nameEnd := 12 + align4(nameSize)
		descEnd := nameEnd + align4(descSize)
		if uint64(len(data)) < uint64(descEnd) {
			return nil, fmt.Errorf("%s: a USDT note runs past its section", b.Path)
		}
		name := string(bytes.TrimRight(data[12:12+nameSize], "\x00"))
		desc := data[nameEnd : nameEnd+descSize]
		data = data[descEnd:]
		if name != "stapsdt" || typ != 3 || len(desc) < 24 {
			continue
		}
		pc, base, sem := order.Uint64(desc), order.Uint64(desc[8:]), order.Uint64(desc[16:])
		strs := bytes.SplitN(desc[24:], []byte{0}, 4)
		if len(strs) < 3 {
			continue
		}
		if baseNow != 0 && base != 0 {
			pc += baseNow - base
			if sem != 0 {
				sem += baseNow - base
			}
		}
		p := Probe{Provider: string(strs[0]), Name: string(strs[1]), Args: string(strs[2])}
		if p.Offset, err = fileOffset(f, pc); err != nil {
			return nil, fmt.Errorf("%s: probe %s: %v", b.Path, p.FullName(), err)
		}
		if sem != 0 {
			if p.SemaphoreOffset, err = fileOffset(f, sem); err != nil {
				return nil, fmt.Errorf("%s: probe %s's semaphore: %v", b.Path, p.FullName(), err)
			}
		}
		probes = append(probes, p)
	}
	if len(probes) == 0 {
		return nil, fmt.Errorf("%s has no USDT probes in its .note.stapsdt section", b.Path)
	}
	return probes, nil
}

func align4(n uint32) uint32 { return (n + 3) &^ 3 }

// fileOffset is where a virtual address is in the file: uprobes are
// placed by file offset.
func fileOffset(f *elf.File, addr uint64) (uint64, error) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && addr >= p.Vaddr && addr < p.Vaddr+p.Memsz {
			return addr - p.Vaddr + p.Off, nil
		}
	}
	return 0, fmt.Errorf("address %#x is in no loaded segment", addr)
}

// MatchUSDT lists the probes whose provider:name matches the glob.
func (b *Binary) MatchUSDT(glob string) ([]Probe, error) {
	all, err := b.USDT()
	if err != nil {
		return nil, err
	}
	if _, err := path.Match(glob, ""); err != nil {
		return nil, fmt.Errorf("pattern %q: %v: give a glob such as 'libfuse:*'", glob, err)
	}
	var out []Probe
	for _, p := range all {
		if globMatch(glob, p.FullName()) || globMatch(glob, p.Name) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		var names []string
		for _, p := range all {
			names = append(names, p.FullName())
		}
		return nil, fmt.Errorf("no USDT probe of %s matches %q: it has %v", b.Path, glob, names)
	}
	return out, nil
}

// ArgKind is where a USDT argument is at its probe.
type ArgKind int

// The places an argument specifier names.
const (
	ArgRegister ArgKind = iota + 1 // %reg
	ArgMemory                      // offset(%reg)
	ArgConstant                    // $value
)

// ArgSpec is one argument of a USDT probe, as its note specifies it:
// "-4@%edi" is a signed 4-byte value in edi, "8@8(%rbp)" an unsigned
// 8-byte one in memory at rbp+8, "4@$5" the constant 5.
type ArgSpec struct {
	Size   int // bytes: 1, 2, 4 or 8
	Signed bool
	Kind   ArgKind
	Reg    string // the 64-bit register ("rdi"); Register and Memory
	Offset int64  // Memory: the offset; Constant: the value
}

// x86-64's registers by every name of their parts, as struct pt_regs
// orders them (its index times 8 is the field's offset).
var ptRegs = func() map[string]int {
	m := map[string]int{}
	add := func(i int, names ...string) {
		for _, n := range names {
			m[n] = i
		}
	}
	add(0, "r15", "r15d", "r15w", "r15b")
	add(1, "r14", "r14d", "r14w", "r14b")
	add(2, "r13", "r13d", "r13w", "r13b")
	add(3, "r12", "r12d", "r12w", "r12b")
	add(4, "rbp", "ebp", "bp", "bpl")
	add(5, "rbx", "ebx", "bx", "bl", "bh")
	add(6, "r11", "r11d", "r11w", "r11b")
	add(7, "r10", "r10d", "r10w", "r10b")
	add(8, "r9", "r9d", "r9w", "r9b")
	add(9, "r8", "r8d", "r8w", "r8b")
	add(10, "rax", "eax", "ax", "al", "ah")
	add(11, "rcx", "ecx", "cx", "cl", "ch")
	add(12, "rdx", "edx", "dx", "dl", "dh")
	add(13, "rsi", "esi", "si", "sil")
	add(14, "rdi", "edi", "di", "dil")
	add(19, "rsp", "esp", "sp", "spl")
	return m
}()

// ParseArgSpec reads one argument specifier of a USDT note.
func ParseArgSpec(s string) (ArgSpec, error) {
	at := strings.IndexByte(s, '@')
	if at < 0 {
		return ArgSpec{}, fmt.Errorf("argument %q has no size (want SIZE@PLACE, as -4@%%edi)", s)
	}
	size, err := strconv.Atoi(s[:at])
	if err != nil {
		return ArgSpec{}, fmt.Errorf("argument %q: its size is not a number", s)
	}
	a := ArgSpec{Size: size, Signed: size < 0}
	if a.Signed {
		a.Size = -size
	}
	if a.Size != 1 && a.Size != 2 && a.Size != 4 && a.Size != 8 {
		return ArgSpec{}, fmt.Errorf("argument %q: a size of %d bytes (want 1, 2, 4 or 8)", s, a.Size)
	}
	place := s[at+1:]
	switch {
	case strings.HasPrefix(place, "$"):
		a.Kind = ArgConstant
		if a.Offset, err = strconv.ParseInt(place[1:], 0, 64); err != nil {
			return ArgSpec{}, fmt.Errorf("argument %q: its constant is not a number", s)
		}
	case strings.HasPrefix(place, "%"):
		a.Kind, a.Reg = ArgRegister, place[1:]
	case strings.HasSuffix(place, ")") && strings.Contains(place, "(%"):
		open := strings.Index(place, "(%")
		a.Kind, a.Reg = ArgMemory, place[open+2:len(place)-1]
		if open > 0 {
			if a.Offset, err = strconv.ParseInt(place[:open], 0, 64); err != nil {
				return ArgSpec{}, fmt.Errorf("argument %q: its offset is not a number", s)
			}
		}
	default:
		return ArgSpec{}, fmt.Errorf("argument %q: a place fusescope does not read (want %%reg, OFFSET(%%reg) or $CONSTANT)", s)
	}
	if a.Kind != ArgConstant {
		if _, ok := ptRegs[a.Reg]; !ok {
			return ArgSpec{}, fmt.Errorf("argument %q: register %q is not one fusescope reads (x86-64's general registers)", s, "%"+a.Reg)
		}
	}
	return a, nil
}

// Arg is the probe's nth argument (from 1).
func (p Probe) Arg(n int) (ArgSpec, error) {
	args := strings.Fields(p.Args)
	if n < 1 || n > len(args) {
		return ArgSpec{}, fmt.Errorf("--arg %d: %s has %d argument%s (%s)", n, p.FullName(), len(args), map[bool]string{true: "", false: "s"}[len(args) == 1], p.Args)
	}
	return ParseArgSpec(args[n-1])
}

// The cookie's upper half for an argument (ufunc.bpf.c's ufunc_count_arg):
// bits 0-1 the kind, 2-5 the size, 6 signed, 7-11 the register's index
// in struct pt_regs, 12-31 the offset or constant (20 bits, signed).
const (
	argOffsetBits = 20
	argOffsetMax  = 1<<(argOffsetBits-1) - 1
)

func (a ArgSpec) cookie() (uint32, error) {
	if a.Offset > argOffsetMax || a.Offset < -argOffsetMax-1 {
		return 0, fmt.Errorf("an offset or constant of %d, beyond the ±%d fusescope passes to its program", a.Offset, argOffsetMax)
	}
	c := uint32(a.Kind) | uint32(a.Size)<<2 | uint32(ptRegs[a.Reg])<<7 | uint32(a.Offset)<<12
	if a.Signed {
		c |= 1 << 6
	}
	return c, nil
}
