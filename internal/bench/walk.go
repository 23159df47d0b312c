package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
)

// WalkWorkload walks a tree of Files files in Dirs directories, laid out
// once in the source, Passes times (find and stat of each file): the
// first pass finds the kernel's caches empty, the later ones as the
// configuration's timeouts leave them. The figure is files per second.
type WalkWorkload struct {
	Files  int `yaml:"files"`
	Dirs   int `yaml:"dirs"`
	Passes int `yaml:"passes"`
}

func init() { registerKind("walk", func() WorkloadKind { return new(WalkWorkload) }) }

func (k *WalkWorkload) check() error {
	if k.Dirs == 0 {
		k.Dirs = 1
	}
	if k.Passes == 0 {
		k.Passes = 1
	}
	if k.Files < 1 || k.Dirs < 1 || k.Passes < 1 {
		return errors.New("walk: give files (and dirs, passes) as positive numbers")
	}
	return nil
}

func (k *WalkWorkload) scale(f float64) { k.Files = scaleCount(k.Files, f) }

// layout makes Files empty files in Dirs directories.
func (k *WalkWorkload) layout(w *Workload, src string) error {
	root := treeDir(src, w)
	for d := range k.Dirs {
		if err := os.MkdirAll(filepath.Join(root, fmt.Sprintf("d%04d", d)), 0o755); err != nil {
			return err
		}
	}
	for i := range k.Files {
		f, err := os.Create(filepath.Join(root, fmt.Sprintf("d%04d", i%k.Dirs), fmt.Sprintf("f%06d", i)))
		if err != nil {
			return err
		}
		f.Close()
	}
	return nil
}

// run walks the tree as find DIR -type f -exec stat does: each directory
// listed, each entry stat'ed.
func (k *WalkWorkload) run(w *Workload, env runEnv) ([]profile.BenchMetric, error) {
	root := treeDir(env.dir, w)
	if err := env.drop(); err != nil {
		return nil, err
	}
	start := time.Now()
	n := 0
	for range k.Passes {
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if _, err := os.Lstat(p); err != nil {
				return err
			}
			if !d.IsDir() {
				n++
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if want := k.Files * k.Passes; n != want {
		return nil, fmt.Errorf("walk found %d files, %d were laid out", n, want)
	}
	return []profile.BenchMetric{{Name: "walk", Unit: "files/s", Value: float64(n) / time.Since(start).Seconds(), HigherIsBetter: true}}, nil
}
