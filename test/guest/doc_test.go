package guest

import (
	"os"
	"strings"
	"testing"
)

// docs/kernels.md's table says what Kernels says, row for row.
func TestTableDoc(t *testing.T) {
	b, err := os.ReadFile("../../docs/kernels.md")
	if inGuest && os.IsNotExist(err) {
		t.Skip("the docs are not in the guest")
	}
	if err != nil {
		t.Fatal(err)
	}
	header, rows := docTable(t, string(b))
	want := append([]string{"kernel", "tracepoints", "sent"}, featureNames()...)
	if strings.Join(header, "|") != strings.Join(want, "|") {
		t.Fatalf("docs/kernels.md's table has columns %q, want %q", header, want)
	}
	seen := map[string]bool{}
	for _, cells := range rows {
		key := cells[0]
		k, ok := Kernels[key]
		if !ok {
			t.Errorf("docs/kernels.md has a row %s that test/guest/kernels.go has not", key)
			continue
		}
		seen[key] = true
		if got := docRow(key, k); strings.Join(cells, " | ") != strings.Join(got, " | ") {
			t.Errorf("docs/kernels.md's row\n  | %s |\nwant, from test/guest/kernels.go,\n  | %s |", strings.Join(cells, " | "), strings.Join(got, " | "))
		}
	}
	for _, key := range RowKeys() {
		if !seen[key] {
			t.Errorf("docs/kernels.md has no row for %s; kernels.go's:\n  | %s |", key, strings.Join(docRow(key, Kernels[key]), " | "))
		}
	}
}

func featureNames() []string {
	var out []string
	for _, f := range Features {
		out = append(out, string(f))
	}
	return out
}

// docRow is a row of the table as docs/kernels.md writes it.
func docRow(key string, k Kernel) []string {
	sent := "no"
	if k.Sent {
		sent = "yes"
	}
	cells := []string{key, string(k.Tracepoints), sent}
	for _, f := range Features {
		cells = append(cells, string(k.Support[f]))
	}
	return cells
}

// docTable reads the Markdown table whose first column is "kernel".
func docTable(t *testing.T, text string) (header []string, rows [][]string) {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "|") {
			if header != nil {
				break
			}
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		switch {
		case header == nil && cells[0] == "kernel":
			header = cells
		case header != nil && strings.HasPrefix(cells[0], "--"):
		case header != nil:
			rows = append(rows, cells)
		}
	}
	if header == nil {
		t.Fatal("docs/kernels.md has no table whose first column is kernel")
	}
	return header, rows
}

// A kernel finds its own row, or the nearest earlier one's; one older than
// every row has none.
func TestTableRow(t *testing.T) {
	for release, want := range map[string]string{
		"7.3.4+deb13-amd64":   "7.3",
		"6.18.44-fc-v669":     "6.18",
		"5.10.0-32-amd64":     "5.10",
		"6.12.95+deb12-amd64": "6.12",
		"6.19.2":              "6.18", // no row of its own: 6.18's
		"7.4.1-amd64":         "7.3",
		"10.1.0":              "7.3",
		"6.9.0":               "6.1",
		"6.10":                "6.1",
	} {
		key, k, err := Row(release)
		if err != nil || key != want || k.Support == nil {
			t.Errorf("Row(%q) = %q, %v; want row %s", release, key, err, want)
		}
	}
	for _, release := range []string{"4.19.0-27-amd64", "", "six.1", "6"} {
		if key, _, err := Row(release); err == nil {
			t.Errorf("Row(%q) = %q, want an error", release, key)
		}
	}
	for _, key := range RowKeys() {
		for _, f := range Features {
			switch Kernels[key].Support[f] {
			case Works, Noisy, Refused, Fails, Wrong:
			default:
				t.Errorf("row %s: %s has no support value", key, f)
			}
		}
	}
}
