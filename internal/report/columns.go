package report

import (
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Columns prints rows as aligned columns, two spaces apart. Column i is
// flush right where align[i] is 'r' (numbers, as strace -c and bcc print
// them) and flush left otherwise (names); columns past the end of align
// take its last letter. Widths count characters, not bytes, so names in
// UTF-8 stay aligned. No line ends in spaces.
func Columns(w io.Writer, rows [][]string, align string) {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], visibleWidth(cell))
		}
	}
	right := func(i int) bool {
		if align == "" {
			return false
		}
		return align[min(i, len(align)-1)] == 'r'
	}
	var b, line strings.Builder
	for _, row := range rows {
		line.Reset()
		for i, cell := range row {
			if i > 0 {
				line.WriteString("  ")
			}
			pad := strings.Repeat(" ", widths[i]-visibleWidth(cell))
			if right(i) {
				line.WriteString(pad + cell)
			} else {
				line.WriteString(cell + pad)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteString("\n")
	}
	io.WriteString(w, b.String())
}

// visibleWidth counts a cell's characters less the colours' escape
// sequences (ESC [ ... m), which take no room on a terminal. Names from a
// trace never hold an ESC: Name quotes them.
func visibleWidth(s string) int {
	if !strings.Contains(s, "\x1b[") {
		return utf8.RuneCountInString(s)
	}
	n := 0
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "\x1b[") {
			if j := strings.IndexByte(s[i:], 'm'); j >= 0 {
				i += j + 1
				continue
			}
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		n++
	}
	return n
}

// Name returns a name that came from a trace (a path, a socket, a program)
// as a table cell shows it: unchanged when every character is printable
// and none is a space, a quote or a backslash; quoted with Go's escapes
// otherwise, as ls quotes odd file names; "" stays empty (no name). So a name can neither split a
// column nor send control sequences to the terminal.
func Name(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' || r == '\\' || r == '\'' {
			return strconv.Quote(s)
		}
	}
	return s
}
