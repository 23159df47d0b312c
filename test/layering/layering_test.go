// Package layering holds the package graph to the layout
// docs/architecture.md describes, as an allow-list: each layer says what
// it may import, so an import no rule names fails.
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

// layers are the module's packages from the bottom up (docs/architecture.md,
// "Packages"), each with what it may import: the layers below it that it
// names, and the packages of its own layer in within. An import that no
// rule allows fails, and so does a package in no layer: a new package is
// placed before it is built on.
var layers = []struct {
	name   string
	pkgs   []string
	may    []string          // layers whose packages it may import
	within map[string]string // a package of this layer -> one of this layer it may import
}{
	{name: "data", pkgs: []string{"internal/hist", "internal/fuseproto", "internal/kernel", "internal/sysevent",
		"internal/stats", "internal/bpf", "internal/bpf/vmlinuxgen", "internal/golden", "internal/option",
		"internal/thirdparty/bubbletea"}},
	{name: "model", pkgs: []string{"internal/profile"}, may: []string{"data"}},
	// strace's log format: the parser and the events both system-call sources hand the analyzers.
	{name: "formats", pkgs: []string{"internal/strace"}, may: []string{"data", "model"}},
	// FUSE connections and the run loop know the model, no source.
	{name: "connections", pkgs: []string{"internal/fuseconn"}, may: []string{"data", "model"}},
	{name: "run", pkgs: []string{"internal/session"}, may: []string{"data", "model"}},
	// Sources fill records; the kernel side (ktrace) hands typed events
	// to the interpretations built on it, never the other way.
	{name: "sources", pkgs: []string{"internal/ktrace", "internal/kfunc", "internal/ufunc", "internal/labfs", "internal/systrace", "internal/sysserve"},
		may:    []string{"data", "model", "formats", "connections", "run"},
		within: map[string]string{"internal/kfunc": "internal/ktrace", "internal/ufunc": "internal/ktrace", "internal/sysserve": "internal/ktrace"}},
	// The live system-call source: ktrace's programs (or sysserve's) and systrace's analyzers.
	{name: "live", pkgs: []string{"internal/syslive"}, may: []string{"data", "model", "formats", "connections", "run", "sources"}},
	// Views read records and nothing else.
	{name: "views", pkgs: []string{"internal/report", "internal/exporter", "internal/top"}, may: []string{"data", "model"},
		within: map[string]string{"internal/top": "internal/report"}},
	// A driver of runs uses sources and records, never a view or cmd/.
	{name: "drivers", pkgs: []string{"internal/bench", "internal/doctor"}, may: []string{"data", "model", "connections", "run", "sources"}},
	{name: "cmd", pkgs: []string{"cmd/fusescope"}, may: []string{"data", "model", "connections", "run", "sources", "live", "views", "drivers"}},
}

func TestPackageLayering(t *testing.T) {
	m := imports(t)
	if len(m) < 10 {
		t.Fatalf("go list found %d packages: %v", len(m), m)
	}
	layerOf := map[string]int{}
	index := map[string]int{}
	for i, l := range layers {
		index[l.name] = i
		for _, p := range l.pkgs {
			layerOf[p] = i
		}
	}
	for pkg, imps := range m {
		li, ok := layerOf[pkg]
		if !ok {
			t.Errorf("%s is in no layer: place it in test/layering's layers and docs/architecture.md's table", pkg)
			continue
		}
		l := layers[li]
	next:
		for _, imp := range imps {
			ii, ok := layerOf[imp]
			if !ok {
				continue // reported as a package of its own
			}
			if ii == li && l.within[pkg] == imp {
				continue
			}
			for _, may := range l.may {
				if index[may] == ii {
					continue next
				}
			}
			t.Errorf("%s (%s) imports %s (%s), which docs/architecture.md's layout rules out", pkg, l.name, imp, layers[ii].name)
		}
	}
}
