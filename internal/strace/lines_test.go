package strace

import (
	"fmt"
	"strings"
	"testing"
)

// A 16 MiB line (strace -s 5000000 of dd bs=4M, with escapes) parses in
// bounded memory: its call, fd target, result and duration are read, and
// the lines around it too.
func TestParseLongLines(t *testing.T) {
	data := strings.Repeat(`\0\1\"x\\`, (16<<20)/9) // escapes, an escaped quote and backslash across every cut
	log := "100 12:00:00.000001 openat(AT_FDCWD</tmp>, \"/dev/zero\", O_RDONLY) = 3</dev/zero> <0.000010>\n" +
		fmt.Sprintf("100 12:00:00.000002 write(1</tmp/out>, \"%s\"..., 16777216) = 16777216 <0.012000>\r\n", data) +
		fmt.Sprintf("100 12:00:00.100000 read(3</dev/zero>, \"%s\", 4194304) = 4194304 <0.003000>\n", data[:4<<20]) +
		"100 12:00:00.200000 close(3</dev/zero>) = 0 <0.000004>" // no newline at the end
	p := NewParser()
	var got []string
	err := p.Parse(strings.NewReader(log), func(e *Event) {
		got = append(got, fmt.Sprintf("%s %s %s %.6f %d", e.Name, e.FileTarget(), e.Ret, e.Dur, e.Moved()))
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"openat /dev/zero 3</dev/zero> 0.000010 3",
		"write /tmp/out 16777216 0.012000 16777216",
		"read /dev/zero 4194304 0.003000 4194304",
		"close /dev/zero 0 0.000004 0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || p.Bad != 0 {
		t.Fatalf("parsed\n%s\nwant\n%s\n(%d malformed: %v)", strings.Join(got, "\n"), strings.Join(want, "\n"), p.Bad, p.Malformed)
	}
}

// A line past maxKept bytes outside quoted strings is one malformed line,
// not the end of the analysis.
func TestParseLineTooLongOutsideStrings(t *testing.T) {
	long := "100 12:00:00.000002 poll([" + strings.Repeat("{fd=3, events=POLLIN}, ", (maxKept/22)+1000) + "], 1, 0) = 0 <0.000001>\n"
	log := long + "100 12:00:00.000003 close(3</dev/zero>) = 0 <0.000004>\n"
	p := NewParser()
	n := 0
	if err := p.Parse(strings.NewReader(log), func(e *Event) { n++ }); err != nil {
		t.Fatal(err)
	}
	if n != 1 || p.Bad != 1 || !strings.Contains(p.Malformed[0].Why, "outside quoted strings") || p.Malformed[0].Line != 1 {
		t.Fatalf("%d events, %d malformed: %+v", n, p.Bad, p.Malformed)
	}
}
