package profile

import (
	"time"

	"github.com/fusescope/fusescope/internal/stats"
)

// BenchReport is a bench run (fusescope bench): every run of every
// configuration and workload, with the FUSE requests of each, and the
// summaries the views print.
type BenchReport struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Baseline    string `json:"baseline"`
	Order       string `json:"order"`
	Seed        uint64 `json:"seed"`
	Repetitions int    `json:"repetitions"`
	// Rounds is how many rounds ran (fewer than Repetitions when the
	// time budget ran out).
	Rounds     int                  `json:"rounds"`
	Warmup     int                  `json:"warmup"`
	DropCaches bool                 `json:"drop_caches"`
	Remount    bool                 `json:"remount"`
	Scratch    string               `json:"scratch"`
	Traced     bool                 `json:"traced"`
	Configs    []BenchConfiguration `json:"configurations"`
	Runs       []BenchRun           `json:"runs"`
	Results    []BenchResult        `json:"results"`
	Published  []BenchPublished     `json:"published,omitempty"`
	// SideBySide are the workloads whose figures the views also show in
	// one table, each configuration's means side by side (coherence: the
	// stale reads beside the reads per second).
	SideBySide []string `json:"side_by_side,omitempty"`
	// Notes are what went wrong or was left out, one line each.
	Notes []string `json:"notes,omitempty"`
}

// BenchConfiguration is a file system under test.
type BenchConfiguration struct {
	Name string `json:"name"`
	// Kind is native, labfs or mount; Detail its options or template.
	Kind   string `json:"kind"`
	Detail string `json:"detail,omitempty"`
	// Conn is its FUSE connection, as traced (0: native, or not traced).
	Conn uint32 `json:"conn,omitempty"`
	// Trace is how its runs were traced: off, plain or stages (empty for
	// native).
	Trace string `json:"trace,omitempty"`
	// AsksURing: its daemon asked for FUSE over io_uring (io_uring: true).
	AsksURing bool `json:"asks_io_uring,omitempty"`
	// Transport carried its traced runs' requests: /dev/fuse, io_uring
	// or both (Profile.Transport); empty where no run was traced.
	Transport string `json:"transport,omitempty"`
}

// BenchMetric is one figure of a run.
type BenchMetric struct {
	Name           string  `json:"name"`
	Unit           string  `json:"unit"`
	Value          float64 `json:"value"`
	HigherIsBetter bool    `json:"higher_is_better"`
}

// BenchRun is one run of a workload in a configuration.
type BenchRun struct {
	Round         int           `json:"round"` // 0-based; warm-up runs are -1
	Seq           int           `json:"seq"`   // its place in the whole bench
	Configuration string        `json:"configuration"`
	Workload      string        `json:"workload"`
	Conn          uint32        `json:"conn,omitempty"`  // the FUSE connection it ran on
	Mount         int           `json:"mount,omitempty"` // which mount of its configuration (1, 2...: a new one each run under remount)
	Start         time.Time     `json:"start"`
	Elapsed       float64       `json:"elapsed_seconds"`
	Metrics       []BenchMetric `json:"metrics,omitempty"`
	Error         string        `json:"error,omitempty"`
	// Requests are the FUSE requests of the run, on its configuration's
	// connection.
	Requests *Profile `json:"requests,omitempty"`
	// Calls are the workload's file calls on the traced mounts, each
	// joined to the requests it sent (a workload with calls: true).
	Calls []CallStats `json:"calls,omitempty"`
}

// BenchResult is a configuration's figures for one metric of a workload.
type BenchResult struct {
	Workload       string        `json:"workload"`
	Metric         string        `json:"metric"`
	Unit           string        `json:"unit"`
	HigherIsBetter bool          `json:"higher_is_better"`
	Configuration  string        `json:"configuration"`
	Values         []float64     `json:"values"` // by round
	Summary        stats.Summary `json:"summary"`
	// VsBaseline compares with the baseline's runs (absent for the
	// baseline itself).
	VsBaseline *stats.Comparison `json:"vs_baseline,omitempty"`
	// Noisy says why the runs spread more than the bench trusts (a
	// coefficient of variation above NoisyCV), with what the traces show;
	// for each workload's first figure only (fio's bandwidth, cat's read,
	// tree's create...), which the others follow.
	Noisy string `json:"noisy,omitempty"`
}

// NoisyCV is the coefficient of variation above which a result is flagged.
const NoisyCV = 0.10

// BenchPublished is a seed's published ratio beside the bench's own.
type BenchPublished struct {
	Workload      string  `json:"workload"`
	Configuration string  `json:"configuration"`
	Metric        string  `json:"metric"`
	Published     float64 `json:"published_ratio"`
	Measured      float64 `json:"measured_ratio"` // 0: not measured
	Source        string  `json:"source"`
}
