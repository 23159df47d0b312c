package bench

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
)

// FilesWorkload is a generated tree: Files files of Size bytes in Dirs
// directories (smallfiles, untar and git_status lay one out).
type FilesWorkload struct {
	Files int    `yaml:"files"`
	Dirs  int    `yaml:"dirs"`
	Size  string `yaml:"size"`
}

func (f *FilesWorkload) check(kind string) error {
	if f.Dirs == 0 {
		f.Dirs = 1
	}
	if f.Size == "" {
		f.Size = "4k"
	}
	if f.Files < 1 || f.Dirs < 1 {
		return fmt.Errorf("%s: give files (and dirs) as positive numbers", kind)
	}
	if _, err := ParseSize(f.Size); err != nil {
		return fmt.Errorf("%s size: %w", kind, err)
	}
	return nil
}

func (f *FilesWorkload) scale(by float64) { f.Files = scaleCount(f.Files, by) }

// path is the i-th file of the tree under root.
func (f *FilesWorkload) path(root string, i int) string {
	return filepath.Join(root, fmt.Sprintf("d%04d", i%f.Dirs), fmt.Sprintf("f%06d", i))
}

// layoutFiles makes f's tree under root: files of random bytes.
func layoutFiles(root string, f *FilesWorkload) error {
	size, _ := ParseSize(f.Size)
	buf := make([]byte, size)
	for i := range f.Files {
		if i < f.Dirs {
			if err := os.MkdirAll(filepath.Dir(f.path(root, i)), 0o755); err != nil {
				return err
			}
		}
		rand.Read(buf)
		if err := os.WriteFile(f.path(root, i), buf, 0o644); err != nil {
			return err
		}
	}
	return nil
}
