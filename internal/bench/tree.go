package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
)

// TreeWorkload is the metadata tree: Files files in Dirs directories
// created, stat'ed cold and warm, listed (readdir and ls -l) and deleted;
// each phase's rate is a figure.
type TreeWorkload struct {
	Files int `yaml:"files"`
	Dirs  int `yaml:"dirs"`
}

func init() { registerKind("tree", func() WorkloadKind { return new(TreeWorkload) }) }

func (k *TreeWorkload) check() error {
	if k.Dirs == 0 {
		k.Dirs = 1
	}
	if k.Files < 1 || k.Dirs < 1 {
		return errors.New("tree: give files (and dirs) as positive numbers")
	}
	return nil
}

func (k *TreeWorkload) scale(f float64) { k.Files = scaleCount(k.Files, f) }

// layout lays out nothing: the tree is made in each run, as a phase.
func (k *TreeWorkload) layout(*Workload, string) error { return nil }

// run runs the tree's phases and returns each one's rate.
func (k *TreeWorkload) run(w *Workload, env runEnv) ([]profile.BenchMetric, error) {
	root := treeDir(env.dir, w)
	os.RemoveAll(root)
	defer os.RemoveAll(root)
	var paths []string
	dirs := make([]string, k.Dirs)
	for d := range dirs {
		dirs[d] = filepath.Join(root, fmt.Sprintf("d%04d", d))
	}
	for i := range k.Files {
		paths = append(paths, filepath.Join(dirs[i%len(dirs)], fmt.Sprintf("f%06d", i)))
	}
	var m []profile.BenchMetric
	phase := func(name string, n int, f func() error) error {
		start := time.Now()
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		m = append(m, profile.BenchMetric{Name: name, Unit: "ops/s", Value: float64(n) / time.Since(start).Seconds(), HigherIsBetter: true})
		return nil
	}
	stat := func() error {
		for _, p := range paths {
			if _, err := os.Lstat(p); err != nil {
				return err
			}
		}
		return nil
	}
	if err := env.drop(); err != nil {
		return nil, err
	}
	steps := []struct {
		name string
		f    func() error
		cold bool
	}{
		{"create", func() error {
			for _, d := range dirs {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			for _, p := range paths {
				f, err := os.Create(p)
				if err != nil {
					return err
				}
				f.Close()
			}
			return nil
		}, false},
		{"stat_cold", stat, true},
		{"stat_warm", stat, false},
		{"readdir", func() error {
			for _, d := range dirs {
				f, err := os.Open(d)
				if err != nil {
					return err
				}
				_, err = f.Readdirnames(-1)
				f.Close()
				if err != nil {
					return err
				}
			}
			return nil
		}, true},
		{"ls_l", func() error {
			for _, d := range dirs {
				ents, err := os.ReadDir(d)
				if err != nil {
					return err
				}
				for _, e := range ents {
					if _, err := e.Info(); err != nil {
						return err
					}
				}
			}
			return nil
		}, true},
		{"delete", func() error {
			for _, p := range paths {
				if err := os.Remove(p); err != nil {
					return err
				}
			}
			return nil
		}, true},
	}
	for _, s := range steps {
		if s.cold {
			if err := env.drop(); err != nil {
				return nil, err
			}
		}
		if err := phase(s.name, len(paths), s.f); err != nil {
			return nil, err
		}
	}
	return m, nil
}
