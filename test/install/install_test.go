// Package install checks that the module installs as README.md says,
// with go install github.com/fusescope/fusescope/cmd/fusescope@latest,
// which refuses a module whose go.mod has a replace or exclude directive.
package install

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

const modPath = "github.com/fusescope/fusescope"

// The module at the checkout's HEAD, zipped from git as a module proxy
// zips a tag, is served at version v0.0.1 from a file:// proxy, beside the
// dependencies of this machine's module cache; go install builds its
// command from an empty module cache, outside any module. Before go.mod
// lost its replace directives: "The go.mod file for the module providing
// named packages contains one or more replace directives".
func TestGoInstallLatest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds fusescope from an empty module cache")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "env", "-json", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	var env struct{ GOMODCACHE string }
	if err := json.Unmarshal(out, &env); err != nil {
		t.Fatal(err)
	}

	tmp := t.TempDir()
	const version = "v0.0.1"
	dir := filepath.Join(tmp, "proxy", modPath, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	zf, err := os.Create(filepath.Join(dir, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	err = modzip.CreateFromVCS(zf, module.Version{Path: modPath, Version: version}, root, "HEAD", "")
	zf.Close()
	if err != nil {
		t.Fatalf("zipping the module as a proxy would: %v", err)
	}
	gomod, err := exec.Command("git", "-C", root, "show", "HEAD:go.mod").Output()
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": []byte(`{"Version":"` + version + `","Time":"2026-01-01T00:00:00Z"}`),
		version + ".mod":  gomod,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	gobin := filepath.Join(tmp, "bin")
	install := exec.Command("go", "install", "-trimpath", modPath+"/cmd/fusescope@latest")
	install.Dir = tmp
	install.Env = append(os.Environ(),
		"GOMODCACHE="+filepath.Join(tmp, "modcache"), "GOFLAGS=-mod=mod", "GOBIN="+gobin,
		"GOPROXY=file://"+filepath.Join(tmp, "proxy")+",file://"+filepath.Join(env.GOMODCACHE, "cache", "download"),
		// Offline: the dependencies' zips are the module cache's, checked
		// against go.sum when they were downloaded; no checksum database.
		"GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local", "CGO_ENABLED=0")
	// The module cache's files are read-only: removed as go removes them.
	t.Cleanup(func() {
		clean := exec.Command("go", "clean", "-modcache")
		clean.Env = install.Env
		clean.Run()
	})
	var stderr bytes.Buffer
	install.Stderr = &stderr
	if err := install.Run(); err != nil {
		t.Fatalf("go install %s/cmd/fusescope@latest: %v\n%s", modPath, err, stderr.String())
	}
	ver, err := exec.Command(filepath.Join(gobin, "fusescope"), "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(ver), "fusescope") {
		t.Errorf("the installed fusescope --version: %v: %q", err, ver)
	}
}
