package main

import (
	"testing"

	"github.com/cilium/ebpf/btf"
)

// A root is defined whole with what it holds by value; a struct it only
// points to is declared, unless it is a root itself; a typedef held by
// value in one place and pointed to in another is defined whole.
func TestTrimmer(t *testing.T) {
	u32 := &btf.Int{Name: "unsigned int", Size: 4}
	inner := &btf.Struct{Name: "inner", Size: 4, Members: []btf.Member{{Name: "x", Type: u32}}}
	innerT := &btf.Typedef{Name: "inner_t", Type: inner}
	far := &btf.Struct{Name: "far", Size: 4, Members: []btf.Member{{Name: "y", Type: u32}}}
	other := &btf.Struct{Name: "other", Size: 4, Members: []btf.Member{{Name: "z", Type: u32}}}
	root := &btf.Struct{Name: "root", Size: 40, Members: []btf.Member{
		{Name: "byPtr", Type: &btf.Pointer{Target: innerT}},
		{Name: "held", Type: innerT, Offset: 64},
		{Name: "far", Type: &btf.Pointer{Target: far}, Offset: 128},
		{Name: "other", Type: &btf.Pointer{Target: other}, Offset: 192},
		{Name: "self", Type: &btf.Pointer{Target: nil}, Offset: 256},
	}}
	root.Members[4].Type = &btf.Pointer{Target: root}
	tr := trimmer{roots: map[string]bool{"root": true, "other": true}, done: map[btf.Type]btf.Type{},
		fwd: map[string]*btf.Fwd{}, declared: map[*btf.Typedef]*btf.Typedef{}}
	got := tr.copy(root).(*btf.Struct)
	target := func(i int) btf.Type { return got.Members[i].Type.(*btf.Pointer).Target }
	if td, ok := target(0).(*btf.Typedef); !ok || td.Name != "inner_t" {
		t.Fatalf("byPtr: %v", target(0))
	} else if _, ok := td.Type.(*btf.Fwd); !ok {
		t.Errorf("a typedef only pointed to should name a declaration, got %v", td.Type)
	}
	if td := got.Members[1].Type.(*btf.Typedef); td.Type.(*btf.Struct).Members[0].Name != "x" {
		t.Errorf("held by value: %v", td.Type)
	}
	if f, ok := target(2).(*btf.Fwd); !ok || f.Name != "far" {
		t.Errorf("far should be declared, got %v", target(2))
	}
	if s, ok := target(3).(*btf.Struct); !ok || len(s.Members) != 1 {
		t.Errorf("a root pointed to should be whole, got %v", target(3))
	}
	if target(4) != got {
		t.Errorf("a root's pointer to itself should point to its copy")
	}
	if _, err := btf.NewBuilder([]btf.Type{got}, nil); err != nil {
		t.Errorf("the copy does not marshal: %v", err)
	}
}
