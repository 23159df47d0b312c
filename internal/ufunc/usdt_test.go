package ufunc

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/bpf"
	"github.com/fusescope/fusescope/internal/hist"
)

func TestParseArgSpec(t *testing.T) {
	for spec, want := range map[string]ArgSpec{
		"-4@%edi":      {Size: 4, Signed: true, Kind: ArgRegister, Reg: "edi"},
		"4@%r8d":       {Size: 4, Kind: ArgRegister, Reg: "r8d"},
		"8@8(%rbp)":    {Size: 8, Kind: ArgMemory, Reg: "rbp", Offset: 8},
		"-4@4(%rbp)":   {Size: 4, Signed: true, Kind: ArgMemory, Reg: "rbp", Offset: 4},
		"8@(%rsp)":     {Size: 8, Kind: ArgMemory, Reg: "rsp"},
		"-2@-16(%r12)": {Size: 2, Signed: true, Kind: ArgMemory, Reg: "r12", Offset: -16},
		"4@$5":         {Size: 4, Kind: ArgConstant, Offset: 5},
		"1@%al":        {Size: 1, Kind: ArgRegister, Reg: "al"},
	} {
		got, err := ParseArgSpec(spec)
		if err != nil || got != want {
			t.Errorf("%q: %+v, %v; want %+v", spec, got, err, want)
		}
	}
	for spec, why := range map[string]string{
		"%edi":        "has no size",
		"3@%edi":      "a size of 3 bytes",
		"x@%edi":      "size is not a number",
		"4@%xmm0":     `register "%xmm0"`,
		"8@foo(%rip)": "offset is not a number",
		"8@16(%rip)":  `register "%rip"`,
		"4@$x":        "constant is not a number",
		"4@edi":       "a place fusescope does not read",
	} {
		if _, err := ParseArgSpec(spec); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want %q", spec, err, why)
		}
	}
}

// The cookie's bits, as ufunc_count_arg takes them apart.
func TestArgCookie(t *testing.T) {
	decode := func(c uint32) (kind, size, signed, reg uint32, off int64) {
		return c & 3, (c >> 2) & 15, (c >> 6) & 1, (c >> 7) & 31, int64(int32(c) >> 12)
	}
	for _, spec := range []string{"-4@%edi", "8@8(%rbp)", "-2@-16(%r12)", "4@$-5", "8@(%rsp)", "4@$524287", "4@$-524288"} {
		a, err := ParseArgSpec(spec)
		if err != nil {
			t.Fatal(err)
		}
		c, err := a.cookie()
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		kind, size, signed, reg, off := decode(c)
		if kind != uint32(a.Kind) || size != uint32(a.Size) || (signed == 1) != a.Signed || off != a.Offset || (a.Kind != ArgConstant && reg != uint32(ptRegs[a.Reg])) {
			t.Errorf("%s: cookie %#x decodes to kind %d size %d signed %d reg %d offset %d", spec, c, kind, size, signed, reg, off)
		}
	}
	a, _ := ParseArgSpec("8@$1048576")
	if _, err := a.cookie(); err == nil {
		t.Errorf("a constant beyond 20 bits was encoded")
	}
}

func FuzzParseArgSpec(f *testing.F) {
	for _, s := range []string{"-4@%edi", "8@8(%rbp)", "4@$5", "@", "8@(%", "-@%", "8@-0x10(%rbp)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseArgSpec(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("%q: an error of more than one line: %v", s, err)
			}
			return
		}
		if a.Size != 1 && a.Size != 2 && a.Size != 4 && a.Size != 8 {
			t.Errorf("%q: size %d accepted", s, a.Size)
		}
		if a.Kind != ArgConstant {
			if _, ok := ptRegs[a.Reg]; !ok {
				t.Errorf("%q: register %q accepted", s, a.Reg)
			}
		}
		a.cookie() // never panics
	})
}

// The histograms are read from the maps into hist.CPUHist: it must have
// the layout of the programs' struct func_hist.
func TestCPUHistLayout(t *testing.T) {
	if a, b, c := binary.Size(hist.CPUHist{}), binary.Size(bpf.UfuncFuncHist{}), binary.Size(bpf.KfuncFuncHist{}); a != b || a != c {
		t.Errorf("hist.CPUHist is %d bytes, func_hist %d (ufunc) and %d (kfunc)", a, b, c)
	}
}
