package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
)

// CoherenceWorkload prices a cache setting in stale reads: a writer
// rewrites a 4 KiB file every WriteEvery with a number that grows by one
// each time, in the source behind the mount (as another client of a
// remote file system would) or through the mount, and publishes the number
// once its write returned; a reader reads the file for Duration, through
// the mount, keeping it open or opening it for each read, and counts a
// read that returns a number older than the one published before the read
// began as stale. Figures: the stale reads' share, the reads per second
// (what the cache buys), and the longest a write went unseen.
type CoherenceWorkload struct {
	Writer     string   `yaml:"writer"` // behind (default) or mount
	Reader     string   `yaml:"reader"` // keep (default: one open) or reopen
	Duration   Duration `yaml:"duration"`
	WriteEvery Duration `yaml:"write_every"`
}

func init() { registerKind("coherence", func() WorkloadKind { return new(CoherenceWorkload) }) }

// sideBySide is a kind whose figures are read together: the views show
// them in one table too.
type sideBySide interface{ sideBySide() }

func (k *CoherenceWorkload) sideBySide() {}

func (k *CoherenceWorkload) check() error {
	switch k.Writer {
	case "":
		k.Writer = "behind"
	case "behind", "mount":
	default:
		return fmt.Errorf("coherence writer %q: give behind (the source, behind the mount) or mount", k.Writer)
	}
	switch k.Reader {
	case "":
		k.Reader = "keep"
	case "keep", "reopen":
	default:
		return fmt.Errorf("coherence reader %q: give keep (one open) or reopen (an open per read)", k.Reader)
	}
	if k.Duration == 0 {
		k.Duration = Duration(2 * time.Second)
	}
	if k.WriteEvery == 0 {
		k.WriteEvery = Duration(2 * time.Millisecond)
	}
	if k.Duration < 0 || k.WriteEvery < 0 || time.Duration(k.WriteEvery) >= time.Duration(k.Duration) {
		return errors.New("coherence: give a positive duration and a write_every shorter than it")
	}
	return nil
}

func (k *CoherenceWorkload) scale(f float64) {
	k.Duration = Duration(float64(k.Duration) * f)
}

// coherenceBlock is the file's size: a page, the number at both ends (a
// read that returns parts of two writes, torn, is counted apart).
const coherenceBlock = 4096

func (k *CoherenceWorkload) layout(w *Workload, src string) error {
	return os.WriteFile(readFile(src, w), coherenceData(0), 0o644)
}

func coherenceData(seq uint64) []byte {
	b := make([]byte, coherenceBlock)
	binary.LittleEndian.PutUint64(b, seq)
	binary.LittleEndian.PutUint64(b[coherenceBlock-8:], seq)
	return b
}

func (k *CoherenceWorkload) run(w *Workload, env runEnv) ([]profile.BenchMetric, error) {
	if err := env.drop(); err != nil {
		return nil, err
	}
	target := readFile(env.dir, w)
	writePath := target
	if k.Writer == "behind" {
		writePath = readFile(env.src, w)
	}
	wf, err := os.OpenFile(writePath, os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	defer wf.Close()
	// The numbers go on from the file's: a configuration's runs share it.
	first := make([]byte, 8)
	if f, err := os.Open(writePath); err == nil {
		f.ReadAt(first, 0)
		f.Close()
	}
	base := binary.LittleEndian.Uint64(first)

	var (
		published atomic.Uint64 // the newest number whose write returned
		mu        sync.Mutex
		at        = map[uint64]time.Time{} // when each number was published
		stop      = make(chan struct{})
		writeErr  error
		wg        sync.WaitGroup
	)
	published.Store(base)
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Duration(k.WriteEvery))
		defer t.Stop()
		for seq := base + 1; ; seq++ {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			if _, err := wf.WriteAt(coherenceData(seq), 0); err != nil {
				writeErr = err
				return
			}
			mu.Lock()
			at[seq] = time.Now()
			mu.Unlock()
			published.Store(seq)
		}
	}()

	var reads, stale, torn uint64
	var unseen time.Duration
	buf := make([]byte, coherenceBlock)
	var kept *os.File
	if k.Reader == "keep" {
		if kept, err = os.Open(target); err != nil {
			close(stop)
			wg.Wait()
			return nil, err
		}
		defer kept.Close()
	}
	start := time.Now()
	deadline := start.Add(time.Duration(k.Duration))
	for time.Now().Before(deadline) {
		want := published.Load()
		f := kept
		if f == nil {
			if f, err = os.Open(target); err != nil {
				break
			}
		}
		n, rerr := f.ReadAt(buf, 0)
		if kept == nil {
			f.Close()
		}
		if n < coherenceBlock {
			if rerr == nil {
				rerr = fmt.Errorf("read %d bytes of %d", n, coherenceBlock)
			}
			err = fmt.Errorf("reading %s: %w", filepath.Base(target), rerr)
			break
		}
		reads++
		got, end := binary.LittleEndian.Uint64(buf), binary.LittleEndian.Uint64(buf[coherenceBlock-8:])
		if got != end {
			torn++
			continue
		}
		if got < want {
			stale++
			mu.Lock()
			since, ok := at[got+1]
			mu.Unlock()
			if ok {
				unseen = max(unseen, time.Since(since))
			}
		}
	}
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if writeErr != nil {
		return nil, fmt.Errorf("writing %s: %w", writePath, writeErr)
	}
	if reads == 0 {
		return nil, errors.New("coherence: no read completed")
	}
	return []profile.BenchMetric{
		{Name: "stale", Unit: "% of reads", Value: 100 * float64(stale) / float64(reads)},
		{Name: "reads", Unit: "reads/s", Value: float64(reads) / elapsed.Seconds(), HigherIsBetter: true},
		{Name: "unseen", Unit: "ms (longest)", Value: float64(unseen) / float64(time.Millisecond)},
	}, nil
}
