package report

import (
	"strings"
	"testing"
)

func TestName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"/tmp/a.txt", "/tmp/a.txt"},
		{"pipe:[1693933]", "pipe:[1693933]"},
		{"TCP:[127.0.0.1:80]", "TCP:[127.0.0.1:80]"},
		{"/tmp/café", "/tmp/café"},
		{"/tmp/a b", `"/tmp/a b"`},
		{"/tmp/a\nb", `"/tmp/a\nb"`},
		{"/tmp/\x1b[31mred", `"/tmp/\x1b[31mred"`},
		{"/tmp/bad\xff", `"/tmp/bad\xff"`},
		{`/tmp/q"uote`, `"/tmp/q\"uote"`},
		{`/tmp/back\slash`, `"/tmp/back\\slash"`},
		{"/tmp/tab\t", `"/tmp/tab\t"`},
	} {
		if got := Name(c.in); got != c.want {
			t.Errorf("Name(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestColumnsAlignsByCharacters(t *testing.T) {
	var b strings.Builder
	Columns(&b, [][]string{{"NAME", "N"}, {"café", "1"}, {"cafe", "22"}}, "lr")
	want := "NAME   N\ncafé   1\ncafe  22\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
