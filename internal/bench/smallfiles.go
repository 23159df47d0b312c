package bench

import (
	"os"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
)

// SmallFilesWorkload reads every file of a tree laid out once in the
// source, whole: files/s and MiB/s.
type SmallFilesWorkload FilesWorkload

func init() {
	registerKind("smallfiles", func() WorkloadKind { return new(SmallFilesWorkload) })
}

func (s *SmallFilesWorkload) tree() *FilesWorkload { return (*FilesWorkload)(s) }
func (s *SmallFilesWorkload) check() error         { return s.tree().check("smallfiles") }
func (s *SmallFilesWorkload) scale(f float64)      { s.tree().scale(f) }

func (s *SmallFilesWorkload) layout(w *Workload, src string) error {
	return layoutFiles(treeDir(src, w), s.tree())
}

func (s *SmallFilesWorkload) run(w *Workload, env runEnv) ([]profile.BenchMetric, error) {
	root := treeDir(env.dir, w)
	if err := env.drop(); err != nil {
		return nil, err
	}
	buf := make([]byte, 128<<10)
	var bytes int64
	start := time.Now()
	for i := range s.Files {
		f, err := os.Open(s.tree().path(root, i))
		if err != nil {
			return nil, err
		}
		n, err := readAll(f, buf)
		f.Close()
		if err != nil {
			return nil, err
		}
		bytes += n
	}
	secs := time.Since(start).Seconds()
	return []profile.BenchMetric{
		{Name: "files", Unit: "files/s", Value: float64(s.Files) / secs, HigherIsBetter: true},
		{Name: "read", Unit: "MiB/s", Value: float64(bytes) / (1 << 20) / secs, HigherIsBetter: true},
	}, nil
}
