package fuseproto

import (
	"reflect"
	"testing"
)

func TestOpcodeNames(t *testing.T) {
	for _, name := range Names() {
		op, err := ParseOpcode(name)
		if err != nil || op.String() != name {
			t.Errorf("%s: %v %v", name, op, err)
		}
	}
	for in, want := range map[string]Opcode{"lookup": Lookup, "FUSE_GETATTR": Getattr, "15": Read, "OP_99": 99} {
		if got, err := ParseOpcode(in); err != nil || got != want {
			t.Errorf("ParseOpcode(%q) = %v, %v", in, got, err)
		}
	}
	if Opcode(999).String() != "OP_999" {
		t.Error(Opcode(999).String())
	}
	if _, err := ParseOpcode("nosuch"); err == nil {
		t.Error("nosuch parsed")
	}
}

func TestInitFlagNames(t *testing.T) {
	got := InitFlagNames(1<<0 | 1<<16 | 1<<28 | 1<<37 | 1<<60)
	want := []string{"ASYNC_READ", "WRITEBACK_CACHE", "HANDLE_KILLPRIV_V2", "PASSTHROUGH", "BIT_60"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%v", got)
	}
}

// What ParseOpcode accepts names an opcode whose name parses back to it.
func FuzzParseOpcode(f *testing.F) {
	for _, s := range []string{"LOOKUP", "fuse_getattr", " read ", "OP_4096", "17", "", "FUSE_", "op_x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		op, err := ParseOpcode(s)
		if err != nil {
			return
		}
		if back, err := ParseOpcode(op.String()); err != nil || back != op {
			t.Fatalf("%q: opcode %d, named %q, which parses to %d, %v", s, op, op.String(), back, err)
		}
	})
}
