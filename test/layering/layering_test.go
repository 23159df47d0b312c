// Package layering holds the package graph to the layout
// docs/architecture.md describes: sources do not import one another's
// interpretation, the model and the views import no source, and nothing
// below cmd/ imports it.
package layering

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/fusescope/fusescope/"

// imports maps each of the module's packages (cmd/ and internal/) to the
// module's packages it imports, from go list.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, mod+"cmd/...", mod+"internal/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], mod)
		m[pkg] = nil
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, mod) {
				m[pkg] = append(m[pkg], strings.TrimPrefix(imp, mod))
			}
		}
	}
	return m
}

func TestPackageLayering(t *testing.T) {
	m := imports(t)
	if len(m) < 10 {
		t.Fatalf("go list found %d packages: %v", len(m), m)
	}
	forbidden := map[string][]string{
		// The kernel side hands typed events to the interpretation.
		"internal/ktrace": {"internal/systrace", "internal/report", "internal/exporter", "internal/labfs"},
		"internal/kfunc":  {"internal/systrace", "internal/report", "internal/exporter", "internal/labfs"},
		// Data only.
		"internal/sysevent": {"*"},
		"internal/kernel":   {"*"},
		"internal/hist":     {"*"},
		// The model and the views know no source.
		"internal/profile":  {"internal/ktrace", "internal/kfunc", "internal/systrace", "internal/labfs", "internal/session", "internal/report", "internal/fuseconn"},
		"internal/report":   {"internal/ktrace", "internal/kfunc", "internal/systrace", "internal/labfs", "internal/session", "internal/fuseconn"},
		"internal/exporter": {"internal/ktrace", "internal/kfunc", "internal/systrace", "internal/labfs", "internal/session", "internal/fuseconn"},
		"internal/top":      {"internal/ktrace", "internal/kfunc", "internal/systrace", "internal/labfs", "internal/session", "internal/fuseconn"},
		// The run loop knows no source.
		"internal/session": {"internal/ktrace", "internal/kfunc", "internal/systrace", "internal/labfs", "internal/report", "internal/exporter"},
	}
	for pkg, imps := range m {
		for _, imp := range imps {
			if strings.HasPrefix(imp, "cmd/") && !strings.HasPrefix(pkg, "cmd/") {
				t.Errorf("%s imports %s: nothing below cmd/ imports it", pkg, imp)
			}
			for _, f := range forbidden[pkg] {
				if f == "*" || f == imp {
					t.Errorf("%s imports %s, which docs/architecture.md's layout rules out", pkg, imp)
				}
			}
		}
	}
}
