package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/fusescope/fusescope/test/fsx"
	"github.com/fusescope/fusescope/test/labmodes"
)

// The model checker's long mode: every configuration of make test's
// TestLabFSModelCheck, with a new seed each run (printed, to replay) and
// FUSESCOPE_BENCH_FSX_OPS operations (50,000 by default) per run, by one
// process and by two; then the coherence tester for 30 s per configuration.
// A failure prints the seed and the shortest failing prefix.
func TestBenchModelCheck(t *testing.T) {
	setup(t)
	bin, _ := filepath.Abs("../../bin/fusescope")
	checker := filepath.Join(t.TempDir(), "fsx")
	if out, err := exec.Command("go", "build", "-o", checker, "../fsx/cmd/fsx").CombinedOutput(); err != nil {
		t.Fatalf("building fsx: %v %s", err, out)
	}
	ops, cohFor := 50000, 30*time.Second
	if os.Getenv("FUSESCOPE_BENCH_QUICK") != "" {
		ops, cohFor = 5000, 3*time.Second
	}
	if v, err := strconv.Atoi(os.Getenv("FUSESCOPE_BENCH_FSX_OPS")); err == nil && v > 0 {
		ops = v
	}
	modes := labmodes.All()
	names := make([]string, 0, len(modes))
	for name := range modes {
		names = append(names, name)
	}
	sort.Strings(names)
	seed := uint64(time.Now().UnixNano() % 1_000_000)
	fmt.Printf("\n### Model checker, %d operations per run, seeds from %d\n\n", ops, seed)
	fmt.Println("| mode | processes | seed | operations | MiB moved | time | result |")
	fmt.Println("|---|---|---|---|---|---|---|")
	cohLines := []string{}
	for _, name := range names {
		src, mnt := t.TempDir(), t.TempDir()
		args := append(append([]string{"fs", "mount", "--background"}, modes[name].Args()...), src, mnt)
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("fs mount %v: %v %s", args, err, out)
		}
		for procs := 1; procs <= 2; procs++ {
			seed++
			out, _ := exec.Command(checker, "-json", "-seed", fmt.Sprint(seed), "-ops", fmt.Sprint(ops), "-procs", fmt.Sprint(procs),
				"-backing", filepath.Join(src, "fsx"), filepath.Join(mnt, "fsx")).Output()
			var res struct {
				Stats   fsx.Stats
				Failure string
			}
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("fsx on %s: %q", name, out)
			}
			result := "ok"
			if res.Failure != "" {
				result = "FAILED"
				t.Errorf("mode %s:\n%s", name, res.Failure)
			}
			fmt.Printf("| %s | %d | %d | %d | %.0f | %v | %s |\n", name, procs, seed, res.Stats.Ops,
				float64(res.Stats.Bytes)/(1<<20), res.Stats.Duration.Round(time.Second), result)
		}
		out, err := exec.Command(checker, "-json", "-coherence", cohFor.String(), "-readers", "2", filepath.Join(mnt, "coherence")).Output()
		var c fsx.CoherenceResult
		if jerr := json.Unmarshal(out, &c); err != nil || jerr != nil {
			t.Fatalf("fsx -coherence on %s: %v %q", name, err, out)
		}
		if c.Stale > 0 {
			t.Errorf("mode %s: %d of %d reads older than a completed write", name, c.Stale, c.Reads)
		}
		cohLines = append(cohLines, fmt.Sprintf("| %s | %d | %d | %d | %d |", name, c.Writes, c.Reads, c.Stale, c.Torn))
		exec.Command(bin, "fs", "umount", mnt).Run()
	}
	fmt.Printf("\n### Coherence, one writer and two readers, %v per mode\n\n", cohFor)
	fmt.Println("| mode | writes | reads | stale | torn |")
	fmt.Println("|---|---|---|---|---|")
	for _, l := range cohLines {
		fmt.Println(l)
	}
}
