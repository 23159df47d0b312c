package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/fusescope/fusescope/internal/profile"
)

// A WorkloadKind is what a workload runs: the value under its kind's key
// (fio, cat, tree...). Each kind is a file of its own that registers itself
// by that key (registerKind, in an init function), as node_exporter's
// collectors do; nothing else in the bench names a kind.
type WorkloadKind interface {
	// check fills in the defaults and says what is wrong in one sentence
	// that names the kind's YAML keys.
	check() error
	// layout puts in src, once for the whole bench, what every
	// configuration's runs read (nothing, for a kind that makes its own
	// files): the same blocks for all, so that where they landed on the
	// disk is no difference between configurations.
	layout(w *Workload, src string) error
	// run runs the workload once in env.dir and returns its figures, the
	// first being the one the table shows.
	run(w *Workload, env runEnv) ([]profile.BenchMetric, error)
	// scale multiplies the work by f (--scale; a kind with no size to
	// grow leaves itself as it is).
	scale(f float64)
}

// setupKind is a kind with something to do in each configuration once it is
// mounted, untimed (shell's setup).
type setupKind interface {
	setup(ctx context.Context, w *Workload, dir string) error
}

// kindEntry is a registered kind.
type kindEntry struct {
	// make returns a new, empty value of the kind, to decode into.
	make func() WorkloadKind
	// needs are the commands the kind runs, checked before the bench
	// starts.
	needs []string
}

var (
	// kinds are the registered kinds by their YAML key; kindKeyOf is the
	// key of each kind's type.
	kinds     = map[string]kindEntry{}
	kindKeyOf = map[reflect.Type]string{}
)

// registerKind registers a kind under its YAML key; make returns a pointer
// to a new value of it.
func registerKind(key string, make func() WorkloadKind, needs ...string) {
	if _, dup := kinds[key]; dup {
		panic("bench: workload kind " + key + " registered twice")
	}
	kinds[key] = kindEntry{make: make, needs: needs}
	kindKeyOf[reflect.TypeOf(make())] = key
}

// kindKeys are the registered kinds' keys, sorted.
func kindKeys() []string {
	keys := make([]string, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// orList is "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// UnmarshalYAML reads a workload: its own keys (name, requests, calls) and
// one kind's key, whose value is decoded into that kind. Keys it does not
// know were refused before, with their line (checkYAML).
func (w *Workload) UnmarshalYAML(n *yaml.Node) error {
	var common struct {
		Name     string   `yaml:"name"`
		Requests []string `yaml:"requests"`
		Calls    bool     `yaml:"calls"`
	}
	if err := n.Decode(&common); err != nil {
		return err
	}
	var keys map[string]yaml.Node // merge keys (<<) resolved
	if err := n.Decode(&keys); err != nil {
		return err
	}
	*w = Workload{Name: common.Name, Requests: common.Requests, Calls: common.Calls}
	given := 0
	for key, v := range keys {
		k, ok := kinds[key]
		if !ok || v.ShortTag() == "!!null" {
			continue // a common key, or a kind left empty: as if not given
		}
		given++
		kind := k.make()
		if err := v.Decode(kind); err != nil {
			return err
		}
		w.Kind = kind
	}
	if given > 1 {
		w.Kind = nil // check says to give one
	}
	return nil
}

// kindKey is the key k's kind is registered under.
func kindKey(k WorkloadKind) string { return kindKeyOf[reflect.TypeOf(k)] }

// needs are the commands the workloads' kinds run, each once.
func needs(ws []Workload) map[string]string {
	out := map[string]string{} // command: the kind's key
	for _, w := range ws {
		key := kindKey(w.Kind)
		for _, cmd := range kinds[key].needs {
			if _, ok := out[cmd]; !ok {
				out[cmd] = key
			}
		}
	}
	return out
}

// runEnv is what a workload's run is given.
type runEnv struct {
	ctx context.Context
	// dir is the configuration's directory (its mount point, or the
	// source itself for native); src is the source directory, where
	// files every configuration reads were laid out once.
	dir, src string
	// drop drops the caches (a no-op with drop_caches: false).
	drop func() error
}

// layout lays out, in src, what w's runs read.
func layout(w Workload, src string) error { return w.Kind.layout(&w, src) }

// runWorkload runs w once and returns its figures, the first being the one
// the table shows.
func runWorkload(w Workload, env runEnv) ([]profile.BenchMetric, error) {
	return w.Kind.run(&w, env)
}

// setupWorkload does what w's kind does in each configuration once it is
// mounted (most: nothing).
func setupWorkload(ctx context.Context, w Workload, dir string) error {
	if s, ok := w.Kind.(setupKind); ok {
		return s.setup(ctx, &w, dir)
	}
	return nil
}

// readFile is the file w reads, under dir.
func readFile(dir string, w *Workload) string { return filepath.Join(dir, "bench-"+w.Name+".dat") }

// treeDir is the directory of w's tree under dir.
func treeDir(dir string, w *Workload) string { return filepath.Join(dir, "bench-"+w.Name) }

func writeRandom(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	rand.Read(buf)
	for left := size; left > 0; left -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(int64(len(buf)), left)]); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readAll reads r to its end in reads of len(buf), as cat does (io.Copy
// to io.Discard would read 8 KiB at a time).
func readAll(r io.Reader, buf []byte) (int64, error) {
	var n int64
	for {
		k, err := r.Read(buf)
		n += int64(k)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// command is a workload's process, in a process group of its own that a
// stopped bench kills whole (fio's jobs are processes of their own, and any
// left would keep the mount busy).
func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// scaleCount is n times f, at least 1.
func scaleCount(n int, f float64) int { return max(1, int(float64(n)*f)) }

// scaleSize is a size times f, at least 4 KiB (left as it is if it is not
// a size).
func scaleSize(v string, f float64) string {
	n, err := ParseSize(v)
	if err != nil {
		return v
	}
	return fmt.Sprint(max(int64(float64(n)*f), 4096))
}
