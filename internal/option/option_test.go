package option

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestWords(t *testing.T) {
	e := Errorf("{files} needs the raw tracepoints: leave out {attach} %s", "tracepoint")
	if got, want := e.Error(), "--files needs the raw tracepoints: leave out --attach tracepoint"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	yaml := func(k string) string { return k + ":" }
	if got, want := e.Words(yaml), "files: needs the raw tracepoints: leave out attach: tracepoint"; got != want {
		t.Errorf("Words(yaml) = %q, want %q", got, want)
	}
	if got := Errorf("{pid} %d: no such process", 7).Error(); got != "-p 7: no such process" {
		t.Errorf("pid: %q", got)
	}
	// Braces that are not keys stay: a path, a value, an unclosed one.
	for _, s := range []string{"/mnt/{a b}/x", "{Files}", "a { b", "{}", "x}{y"} {
		if got := Errorf("%s", s).Error(); got != s {
			t.Errorf("%q became %q", s, got)
		}
	}
}

func TestRewordWrapped(t *testing.T) {
	inner := Errorf("{calls} cannot count here: %w", fs.ErrNotExist)
	if !errors.Is(inner, fs.ErrNotExist) {
		t.Error("the wrapped error is lost")
	}
	outer := fmt.Errorf("configuration lab: %w", inner)
	if got, want := Reword(outer, func(k string) string { return "`" + k + "`" }), "configuration lab: `calls` cannot count here: file does not exist"; got != want {
		t.Errorf("Reword = %q, want %q", got, want)
	}
	plain := errors.New("--files is a flag here")
	if got := Reword(plain, func(string) string { return "x" }); got != plain.Error() {
		t.Errorf("an error without settings changed: %q", got)
	}
}

func FuzzWords(f *testing.F) {
	f.Add("{files} and {attach} tracepoint {")
	f.Fuzz(func(t *testing.T, s string) {
		e := &Error{text: s}
		_ = e.Words(Flag)
		if got := e.Words(func(k string) string { return "{" + k + "}" }); got != s {
			t.Errorf("naming keys as themselves changed %q into %q", s, got)
		}
	})
}

// Setting is the first {key} a sentence names: the setting it refuses.
func TestSetting(t *testing.T) {
	for text, want := range map[string]string{
		"{calls} needs the raw tracepoints with BTF: leave out {attach} tracepoint":              "calls",
		"kernel 5.10 has no tracepoint {x.y}, which {page-cache} counts: leave out {page-cache}": "page-cache",
		"no setting named here": "",
		"a path {/tmp/x} only":  "",
	} {
		if got := Errorf("%s", text).Setting(); got != want {
			t.Errorf("Setting(%q) = %q, want %q", text, got, want)
		}
	}
}
