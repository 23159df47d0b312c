package ufunc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A Go program built with its symbol table: its functions are found by
// glob, and it is known for Go. (go test strips its test binaries.)
func TestOpenBinaryGo(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\n//go:noinline\nfunc OpenBinary() int { return 1 }\n\nfunc main() { println(OpenBinary()) }\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module prog\n"), 0o644)
	exe := filepath.Join(dir, "prog")
	build := exec.Command("go", "build", "-o", exe, ".")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	b, err := OpenBinary(exe)
	if err != nil {
		t.Fatal(err)
	}
	if !b.IsGo {
		t.Error("a Go test binary not known for Go")
	}
	syms, err := b.Match("main.OpenBinary")
	if err != nil || len(syms) != 1 || syms[0].Size == 0 {
		t.Errorf("Match: %+v, %v; want OpenBinary, once, with its size", syms, err)
	}
	rets, err := b.Returns(syms[0])
	if err != nil || len(rets) == 0 || rets[len(rets)-1] >= syms[0].Size {
		t.Errorf("Returns(main.OpenBinary): %v, %v; want its RET offsets, inside it", rets, err)
	}
	if _, err := b.Match("[bad"); err == nil || !strings.Contains(err.Error(), "give a glob") {
		t.Errorf("a bad glob: %v", err)
	}
}

// glibc's statx has aliases at its address (statx, __statx...): one
// function; a name nothing matches says how to list them.
func TestMatchLibc(t *testing.T) {
	const libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		t.Skip("no glibc here")
	}
	b, err := OpenBinary(libc)
	if err != nil {
		t.Fatal(err)
	}
	syms, err := b.Match("statx")
	if err != nil || len(syms) != 1 {
		t.Errorf("statx: %+v, %v; want one function", syms, err)
	}
	if _, err := b.Match("zzz_*"); err == nil || !strings.Contains(err.Error(), "nm -D --defined-only") {
		t.Errorf("no match: %v", err)
	}
}

// Any bytes given as a binary: refused in a sentence, never a panic.
func FuzzOpenBinary(f *testing.F) {
	exe, _ := os.Executable()
	if b, err := os.ReadFile(exe); err == nil && len(b) > 4096 {
		f.Add(b[:4096])
	}
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Add([]byte("#!/bin/sh\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "bin")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if b, err := OpenBinary(p); err == nil {
			b.Match("*")
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("more than one line: %v", err)
		}
	})
}
