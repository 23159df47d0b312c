package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
)

// UntarWorkload extracts a generated tarball of a tree into the
// configuration.
type UntarWorkload FilesWorkload

func init() {
	registerKind("untar", func() WorkloadKind { return new(UntarWorkload) }, "tar")
}

func (u *UntarWorkload) tree() *FilesWorkload { return (*FilesWorkload)(u) }
func (u *UntarWorkload) check() error         { return u.tree().check("untar") }
func (u *UntarWorkload) scale(f float64)      { u.tree().scale(f) }

// ball is the tarball, beside the source, not in it: reading it is not the
// configuration's work.
func (u *UntarWorkload) ball(src string, w *Workload) string {
	return filepath.Join(filepath.Dir(src), "bench-"+w.Name+".tar")
}

func (u *UntarWorkload) layout(w *Workload, src string) error {
	tree := filepath.Join(filepath.Dir(src), "bench-"+w.Name+".tree")
	if err := layoutFiles(tree, u.tree()); err != nil {
		return err
	}
	defer os.RemoveAll(tree)
	if out, err := exec.Command("tar", "-C", tree, "-cf", u.ball(src, w), ".").CombinedOutput(); err != nil {
		return fmt.Errorf("tar: %s", firstLine(out, err))
	}
	return nil
}

// run extracts the tarball into the configuration and removes what it
// made (not timed).
func (u *UntarWorkload) run(w *Workload, env runEnv) ([]profile.BenchMetric, error) {
	dest := filepath.Join(env.dir, "bench-"+w.Name+".x")
	os.RemoveAll(dest)
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dest)
	if err := env.drop(); err != nil {
		return nil, err
	}
	start := time.Now()
	if out, err := command(env.ctx, "tar", "-C", dest, "-xf", u.ball(env.src, w)).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("tar: %s", firstLine(out, err))
	}
	secs := time.Since(start).Seconds()
	return []profile.BenchMetric{{Name: "extract", Unit: "files/s", Value: float64(u.Files) / secs, HigherIsBetter: true},
		{Name: "elapsed", Unit: "s", Value: secs}}, nil
}
