// Command fsx runs the model-checking tester on a file, as xfstests' fsx
// does: make test runs it on the lab file system in every mode, make bench
// for longer. A failure prints the seed and the shortest failing prefix,
// and exits 1.
//
//	fsx [-seed N] [-ops N] [-procs 1|2] [-backing PATH] [-json] FILE
//	fsx -coherence DURATION [-readers N] [-json] FILE
//
// With -coherence it runs the coherence tester instead: one writer and
// readers, each a process with its own open, counting reads that return a
// block older than a write that completed before the read began.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/fusescope/fusescope/test/fsx"
)

func main() {
	var (
		cfg      fsx.Config
		kinds    string
		asJSON   bool
		worker   bool
		serve    bool
		coh      fsx.CoherenceConfig
		maxLen   = flag.Int64("max-len", fsx.DefaultLimits.MaxLen, "the file's largest size in bytes")
		maxOpLen = flag.Int64("max-op-len", fsx.DefaultLimits.MaxOpLen, "an operation's largest length in bytes")
	)
	flag.Uint64Var(&cfg.Seed, "seed", uint64(time.Now().UnixNano()%1_000_000), "the sequence's seed (default: from the clock)")
	flag.IntVar(&cfg.Ops, "ops", 10000, "operations in the sequence")
	flag.IntVar(&cfg.Procs, "procs", 1, "processes doing them: 1, or 2 (each operation by either)")
	flag.StringVar(&cfg.Backing, "backing", "", "the file on the backing file system, compared with the model after the last close")
	flag.IntVar(&cfg.FullCheckEvery, "full-check-every", 1000, "compare the whole file every this many operations")
	flag.DurationVar(&cfg.ShrinkBudget, "shrink-budget", 2*time.Minute, "time to spend finding the shortest failing prefix")
	flag.StringVar(&kinds, "kinds", "", "operations to choose from, comma-separated (default: all)")
	flag.BoolVar(&asJSON, "json", false, "print the run's statistics and failure as JSON")
	flag.BoolVar(&worker, "worker", false, "be the second process (internal)")
	flag.DurationVar(&coh.Duration, "coherence", 0, "run the coherence tester for this long instead")
	flag.IntVar(&coh.Readers, "readers", 2, "coherence: reader processes")
	flag.BoolVar(&coh.Reopen, "reopen", false, "coherence: readers open the file anew for each read")
	flag.DurationVar(&coh.WriteEvery, "write-every", 0, "coherence: pace the writer to one write each (default: as fast as it can)")
	flag.StringVar(&coh.WriterPath, "writer-path", "", "coherence: the writer writes this path (the backing file of FILE), behind the mount's back")
	flag.IntVar(&coh.BlockSize, "block-size", 4096, "coherence: bytes per block, a multiple of 8")
	flag.BoolVar(&serve, "coherence-process", false, "be a writer or reader of the coherence tester (internal)")
	flag.Parse()
	if serve {
		if err := fsx.ServeCoherence(flag.Args()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		return
	}
	if worker {
		if err := fsx.ServeWorker(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "fsx worker:", err)
			os.Exit(2)
		}
		return
	}
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "fsx: give the file to test: fsx [flags] FILE")
		os.Exit(2)
	}
	cfg.Path = flag.Arg(0)
	cfg.Limits = fsx.Limits{MaxLen: *maxLen, MaxOpLen: *maxOpLen}
	if cfg.Limits.MaxLen < 4096 || cfg.Limits.MaxOpLen < 1 || cfg.Limits.MaxOpLen > cfg.Limits.MaxLen {
		fmt.Fprintln(os.Stderr, "fsx: -max-len must be at least 4096 and -max-op-len between 1 and -max-len")
		os.Exit(2)
	}
	var err error
	if cfg.Kinds, err = fsx.ParseKinds(kinds); err != nil {
		fmt.Fprintln(os.Stderr, "fsx:", err)
		os.Exit(2)
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fsx:", err)
		os.Exit(2)
	}
	cfg.Worker = func() *exec.Cmd { return exec.Command(self, "-worker") }
	if coh.Duration > 0 {
		coh.Path = cfg.Path
		coh.Process = func(args ...string) *exec.Cmd {
			return exec.Command(self, append([]string{"-coherence-process", "--"}, args...)...)
		}
		res, err := fsx.Coherence(coh)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if asJSON {
			json.NewEncoder(os.Stdout).Encode(res)
		} else {
			fmt.Printf("fsx coherence: %d writes, %d reads, %d stale (%.1f per million reads, at most %d writes and %v behind), %d torn\n",
				res.Writes, res.Reads, res.Stale, res.Rate(), res.MaxLag, res.MaxAge.Round(time.Microsecond), res.Torn)
		}
		return
	}
	st, fail, err := fsx.Run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if asJSON {
		out := struct {
			Seed    uint64
			Stats   fsx.Stats
			Failure string `json:",omitempty"`
		}{Seed: cfg.Seed, Stats: st}
		if fail != nil {
			out.Failure = fail.Error()
		}
		json.NewEncoder(os.Stdout).Encode(out)
	} else {
		fmt.Printf("fsx: seed %d: %d operations, %d read-backs, %.0f MiB moved, file up to %.1f MiB, %v\n",
			cfg.Seed, st.Ops, st.Checks, float64(st.Bytes)/(1<<20), float64(st.MaxSize)/(1<<20), st.Duration.Round(time.Millisecond))
		if fail != nil {
			fmt.Println(fail)
		}
	}
	if fail != nil {
		os.Exit(1)
	}
}
