package ktrace

import (
	"os"
	"testing"
)

func FuzzParseFormat(f *testing.F) {
	if b, err := os.ReadFile("testdata/fuse_request_send.format"); err == nil {
		f.Add(string(b))
	}
	f.Add("field:int x;\toffset:a;\tsize:;")
	f.Fuzz(func(t *testing.T, s string) {
		fields, err := ParseFormat(s)
		if err != nil {
			return
		}
		for _, fl := range fields {
			if fl.Name == "" {
				t.Fatal("field without a name")
			}
		}
	})
}

// A release either parses to a version that prints back as its prefix, or
// is refused; never a panic.
func FuzzParseRelease(f *testing.F) {
	for _, s := range []string{"6.18.44-fc-v669", "6.12.0", "5.15", "6", "", "x.y", "6.-1", "99999999999999999999.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		major, minor, ok := ParseRelease(s)
		if ok && (major < 0 || minor < 0) {
			t.Fatalf("%q: version %d.%d", s, major, minor)
		}
	})
}
