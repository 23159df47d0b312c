package bench

import (
	"fmt"
	"os/exec"
	"time"

	"github.com/fusescope/fusescope/internal/profile"
)

// GitStatusWorkload runs git status in a generated repository laid out
// once in the source.
type GitStatusWorkload FilesWorkload

func init() {
	registerKind("git_status", func() WorkloadKind { return new(GitStatusWorkload) }, "git")
}

func (g *GitStatusWorkload) tree() *FilesWorkload { return (*FilesWorkload)(g) }
func (g *GitStatusWorkload) check() error         { return g.tree().check("git_status") }
func (g *GitStatusWorkload) scale(f float64)      { g.tree().scale(f) }

func (g *GitStatusWorkload) layout(w *Workload, src string) error {
	repo := treeDir(src, w)
	if err := layoutFiles(repo, g.tree()); err != nil {
		return err
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"},
		{"-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-q", "-m", "generated"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %s", args[0], firstLine(out, err))
		}
	}
	return nil
}

func (g *GitStatusWorkload) run(w *Workload, env runEnv) ([]profile.BenchMetric, error) {
	if err := env.drop(); err != nil {
		return nil, err
	}
	cmd := command(env.ctx, "git", "-c", "safe.directory=*", "status", "--porcelain")
	cmd.Dir = treeDir(env.dir, w)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	secs := time.Since(start).Seconds()
	if err != nil {
		return nil, fmt.Errorf("git status: %s", firstLine(out, err))
	}
	if len(out) > 0 {
		return nil, fmt.Errorf("git status found changes in the generated repository: %s", firstLine(out, nil))
	}
	return []profile.BenchMetric{{Name: "elapsed", Unit: "s", Value: secs}}, nil
}
