package bench

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
)

// CatWorkload reads a file of Size Times over, caches dropped before each
// read: one run's figure is the mean MiB/s of the reads, with their spread
// and the best beside.
type CatWorkload struct {
	Size  string `yaml:"size"`
	Times int    `yaml:"times"`
	// Block is the size of each read (default 128k, GNU cat's).
	Block string `yaml:"block"`
}

func init() { registerKind("cat", func() WorkloadKind { return new(CatWorkload) }) }

func (k *CatWorkload) check() error {
	if _, err := ParseSize(k.Size); err != nil {
		return fmt.Errorf("cat size: %w", err)
	}
	if k.Times == 0 {
		k.Times = 1
	}
	if k.Block == "" {
		k.Block = "128k"
	}
	if _, err := ParseSize(k.Block); err != nil {
		return fmt.Errorf("cat block: %w", err)
	}
	if k.Times < 0 {
		return errors.New("cat: times must be positive")
	}
	return nil
}

func (k *CatWorkload) scale(f float64) { k.Size = scaleSize(k.Size, f) }

func (k *CatWorkload) layout(w *Workload, src string) error {
	size, _ := ParseSize(k.Size)
	return writeRandom(readFile(src, w), size)
}

// run reads the file Times over, caches dropped before each read (cold
// reads), and returns the mean MiB/s of the reads and the best; the spread
// across runs is the summary's.
func (k *CatWorkload) run(w *Workload, env runEnv) ([]profile.BenchMetric, error) {
	file := readFile(env.dir, w)
	block, _ := ParseSize(k.Block)
	buf := make([]byte, block)
	rates := make([]float64, 0, k.Times)
	for range k.Times {
		if err := env.drop(); err != nil {
			return nil, err
		}
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		n, err := readAll(f, buf)
		elapsed := time.Since(start)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", file, err)
		}
		rates = append(rates, float64(n)/(1<<20)/elapsed.Seconds())
	}
	var sum, best float64
	for _, r := range rates {
		sum += r
		best = max(best, r)
	}
	return []profile.BenchMetric{
		{Name: "read", Unit: "MiB/s", Value: sum / float64(len(rates)), HigherIsBetter: true},
		{Name: "best", Unit: "MiB/s", Value: best, HigherIsBetter: true},
	}, nil
}
