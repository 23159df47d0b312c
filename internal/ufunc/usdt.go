package ufunc

import (
	"bytes"
	"debug/elf"
	"fmt"
	"path"
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
