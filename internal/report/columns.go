package report

import (
	"fmt"
	"io"
	"strings"
)

// Columns prints rows as aligned columns, two spaces apart. Column i is
// flush right where align[i] is 'r' (numbers, as strace -c and bcc print
// them) and flush left otherwise (names); columns past the end of align
// take its last letter. No line ends in spaces.
func Columns(w io.Writer, rows [][]string, align string) {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len(cell))
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
			if right(i) {
				fmt.Fprintf(&line, "%*s", widths[i], cell)
			} else {
				fmt.Fprintf(&line, "%-*s", widths[i], cell)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteString("\n")
	}
	io.WriteString(w, b.String())
}
