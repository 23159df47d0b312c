// Package bench drives fusescope bench: a matrix of file system
// configurations and workloads, each pair run several times in an
// interleaved, randomised order with caches dropped before each run, every
// run's figures kept beside the FUSE trace of that run, and summarised with
// the statistics of internal/stats.
package bench

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/fusescope/fusescope/internal/fuseproto"
)

// Spec is a bench: what the YAML file (or a preset) says.
type Spec struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Repetitions are the measured runs of each (configuration,
	// workload); Warmup runs come before and are not kept.
	Repetitions int `yaml:"repetitions"`
	Warmup      int `yaml:"warmup"`
	// Order is "random" (each round runs the configurations in an order
	// of its own, shuffled with Seed) or "rotate" (each round starts one
	// configuration further on).
	Order string `yaml:"order"`
	Seed  uint64 `yaml:"seed"`
	// DropCaches drops the kernel's caches before each run (default on).
	DropCaches *bool `yaml:"drop_caches"`
	// Remount mounts each configuration anew before each run: cold runs.
	Remount bool `yaml:"remount"`
	// Budget stops the bench after the round that passes it (0: none).
	Budget Duration `yaml:"budget"`
	// Scratch is where the source directory lives: "ext4" (default) makes
	// an ext4 file system with a journal on a loop device, "tmp" a
	// directory under /var/tmp; ScratchSize is the ext4 image's size.
	Scratch     string `yaml:"scratch"`
	ScratchSize string `yaml:"scratch_size"`
	// Trace records the FUSE requests of each run (default on), and
	// Stages splits them into queue, daemon and reply (default on; the
	// syscall tracepoints it needs cost FUSE-heavy workloads more than
	// the plain trace: docs/bench.md).
	Trace  *bool `yaml:"trace"`
	Stages *bool `yaml:"stages"`
	// Baseline names the configuration the others are compared with
	// (default: the first).
	Baseline       string          `yaml:"baseline"`
	Configurations []Configuration `yaml:"configurations"`
	Workloads      []Workload      `yaml:"workloads"`
	// Published are the figures a preset reproduces.
	Published []Published `yaml:"published"`
}

// Configuration is one file system under test, mounted over the bench's
// source directory: the directory itself (native), the lab file system
// with fs mount's options, or a mount command template.
type Configuration struct {
	Name   string   `yaml:"name"`
	Native bool     `yaml:"native"`
	LabFS  []string `yaml:"labfs"`
	// Mount is a shell command with {src} and {mnt}; it may stay in the
	// foreground (the bench waits for the mount to appear) or return.
	Mount string `yaml:"mount"`
	// Umount is a shell command with {mnt} (default: umount {mnt}).
	Umount string `yaml:"umount"`
	// MountTimeout is how long the mount may take to appear (default
	// 30 s).
	MountTimeout Duration `yaml:"mount_timeout"`
	// Needs are commands that must be installed for this configuration.
	Needs []string `yaml:"needs"`
	// Trace overrides the bench's tracing for this configuration: false
	// (the tracer detached for its runs: what tracing costs, beside a
	// traced twin), plain (requests without their stages) or stages.
	Trace string `yaml:"trace"`
	// IOURing: the mount's daemon asks for FUSE over io_uring. The bench
	// enables the kernel's ring (fuse's enable_uring) while it mounts,
	// restores the setting once the mount is up (the connection keeps
	// the ring), and says from the runs' traces whether the ring carried
	// the requests or the daemon fell back to /dev/fuse.
	IOURing bool `yaml:"io_uring"`
}

// Workload is one thing to run in each configuration: its name, one kind
// (the key of a registered WorkloadKind: fio, cat, tree, walk, smallfiles,
// untar, git_status, shell) and what the bench adds to any kind.
type Workload struct {
	Name string `yaml:"name"`
	// Kind is what runs; in YAML, the value under the kind's key.
	Kind WorkloadKind `yaml:"-"`
	// Requests adds figures from each run's trace: the number of
	// requests of each opcode named (LOOKUP, GETATTR...), per run.
	Requests []string `yaml:"requests"`
	// Calls records the workload's file calls on the mount, each joined
	// to the FUSE requests it sent (trace --calls; the bench's process and
	// its children are the application): which calls the kernel's caches
	// served alone. Its programs run at every system call of the machine,
	// so only these runs carry them.
	Calls bool `yaml:"calls"`
}

// Published is a figure a seed published: a configuration's ratio to the
// baseline on a workload's first figure.
type Published struct {
	Workload      string `yaml:"workload"`
	Configuration string `yaml:"configuration"`
	// Metric is the figure compared (default: the workload's first).
	Metric string  `yaml:"metric"`
	Ratio  float64 `yaml:"ratio"`
	Source string  `yaml:"source"`
}

// Duration is a time.Duration written as "90s" in YAML.
type Duration time.Duration

func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration: give one such as 90s or 10m", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// Defaults.
const (
	DefaultRepetitions = 5
	DefaultScratchSize = "4G"
)

//go:embed presets/*.yaml
var presets embed.FS

// Presets lists the presets' names.
func Presets() []string {
	ents, _ := presets.ReadDir("presets")
	var names []string
	for _, e := range ents {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(names)
	return names
}

// PresetYAML is a preset's YAML file, to print or start one's own from.
func PresetYAML(name string) ([]byte, error) {
	b, err := presets.ReadFile("presets/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("no preset %q: give one of %s", name, strings.Join(Presets(), ", "))
	}
	return b, nil
}

// LoadPreset parses a preset.
func LoadPreset(name string) (*Spec, error) {
	b, err := PresetYAML(name)
	if err != nil {
		return nil, err
	}
	return Parse(bytes.NewReader(b), "preset "+name)
}

// Load parses a bench file.
func Load(path string) (*Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bench file: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse reads a bench from r (named name in errors), rejects keys it does
// not know, fills in the defaults and checks the whole.
func Parse(r io.Reader, name string) (*Spec, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s%s", name, syntaxError(err))
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: empty: give configurations and workloads", name)
	}
	if err := checkYAML(&doc); err != nil {
		return nil, fmt.Errorf("%s, %w", name, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Spec
	if err := dec.Decode(&s); err != nil {
		// checkYAML lets nothing through that go-yaml refuses; should it,
		// the line is still said, without go-yaml's Go type names.
		return nil, fmt.Errorf("%s%s: see docs/bench.md for the bench file's keys and values", name, syntaxError(err))
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &s, nil
}

// syntaxError is go-yaml's message on YAML it cannot parse, less its
// prefix and Go type names, with the usual fix: ", line N: ..." or ": ...".
func syntaxError(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		err = errors.New(te.Errors[0])
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = goTypeName.ReplaceAllString(msg, "")
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf(", line %s: not YAML the bench can read (%s): check the indentation, the colons and the quotes", m[1], m[2])
	}
	return fmt.Sprintf(": not YAML the bench can read (%s): check the indentation, the colons and the quotes", msg)
}

var (
	// yamlLine finds "line N: ..." in go-yaml's messages.
	yamlLine = regexp.MustCompile(`^line (\d+): (.*)`)
	// goTypeName is a Go type in go-yaml's messages.
	goTypeName = regexp.MustCompile(` (in|into) (type )?[\w.\[\]*]+`)
)

func (s *Spec) check() error {
	if s.Repetitions == 0 {
		s.Repetitions = DefaultRepetitions
	}
	if s.Repetitions < 1 || s.Warmup < 0 {
		return fmt.Errorf("repetitions %d, warmup %d: give at least one repetition and no negative warm-up", s.Repetitions, s.Warmup)
	}
	switch s.Order {
	case "":
		s.Order = "random"
	case "random", "rotate":
	default:
		return fmt.Errorf("order %q: give random or rotate", s.Order)
	}
	switch s.Scratch {
	case "":
		s.Scratch = "ext4"
	case "ext4", "tmp":
	default:
		return fmt.Errorf("scratch %q: give ext4 (a journalled ext4 on a loop device) or tmp", s.Scratch)
	}
	if s.ScratchSize == "" {
		s.ScratchSize = DefaultScratchSize
	}
	if _, err := ParseSize(s.ScratchSize); err != nil {
		return fmt.Errorf("scratch_size: %w", err)
	}
	if len(s.Configurations) == 0 || len(s.Workloads) == 0 {
		return errors.New("give at least one configuration and one workload")
	}
	seen := map[string]bool{}
	// named checks the name of the i-th configuration or workload.
	named := func(kind string, i int, name string) error {
		switch {
		case name == "":
			return fmt.Errorf("%s %d has no name", kind, i+1)
		case seen[kind+" "+name]:
			return fmt.Errorf("%s %q is named twice", kind, name)
		}
		seen[kind+" "+name] = true
		return nil
	}
	for i := range s.Configurations {
		c := &s.Configurations[i]
		if err := named("configuration", i, c.Name); err != nil {
			return err
		}
		kinds := 0
		if c.Native {
			kinds++
		}
		if c.LabFS != nil {
			kinds++
		}
		if c.Mount != "" {
			kinds++
			if !strings.Contains(c.Mount, "{mnt}") {
				return fmt.Errorf("configuration %q: the mount template has no {mnt}", c.Name)
			}
		}
		if kinds != 1 {
			return fmt.Errorf("configuration %q: give exactly one of native: true, labfs: [options] or mount: TEMPLATE", c.Name)
		}
		if c.IOURing && c.Mount == "" {
			return fmt.Errorf("configuration %q: io_uring is for a mount: TEMPLATE whose daemon asks for the ring", c.Name)
		}
		switch c.Trace {
		case "", "false", "true", "off", "plain", "stages":
		default:
			return fmt.Errorf("configuration %q: trace %q: give false, plain or stages", c.Name, c.Trace)
		}
	}
	if s.Baseline == "" {
		s.Baseline = s.Configurations[0].Name
	} else if !seen["configuration "+s.Baseline] {
		return fmt.Errorf("baseline %q is not a configuration", s.Baseline)
	}
	for i := range s.Workloads {
		w := &s.Workloads[i]
		if err := named("workload", i, w.Name); err != nil {
			return err
		}
		if err := w.check(); err != nil {
			return fmt.Errorf("workload %q: %w", w.Name, err)
		}
	}
	for _, p := range s.Published {
		if !seen["workload "+p.Workload] || !seen["configuration "+p.Configuration] {
			return fmt.Errorf("published figure for %s on %s: no such workload or configuration", p.Configuration, p.Workload)
		}
	}
	return nil
}

func (w *Workload) check() error {
	if w.Kind == nil {
		return fmt.Errorf("give exactly one of %s", orList(kindKeys()))
	}
	for _, op := range w.Requests {
		if _, err := fuseproto.ParseOpcode(op); err != nil {
			return fmt.Errorf("requests: %v", err)
		}
	}
	return w.Kind.check()
}

// ParseSize reads 64m, 1G, 4096 (bytes; k, m, g, t in powers of 1024).
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "ib"), "b")
	mult := int64(1)
	if n := len(t); n > 0 {
		if i := strings.IndexByte("kmgt", t[n-1]); i >= 0 {
			mult = int64(1) << (10 * (i + 1))
			t = t[:n-1]
		}
	}
	var v int64
	if _, err := fmt.Sscanf(t, "%d", &v); err != nil || v <= 0 || fmt.Sprint(v) != t {
		return 0, fmt.Errorf("%q is not a size: give one such as 64m or 1g", s)
	}
	return v * mult, nil
}

// Only keeps the configurations and workloads named (none named: all); a
// name the bench does not have is a *NotInBenchError.
func (s *Spec) Only(configs, workloads []string) error {
	pick := func(names []string, have func(string) bool, what string) error {
		for _, n := range names {
			if !have(n) {
				return &NotInBenchError{What: what, Name: n}
			}
		}
		return nil
	}
	hasC := func(n string) bool {
		return slices.ContainsFunc(s.Configurations, func(c Configuration) bool { return c.Name == n })
	}
	hasW := func(n string) bool {
		return slices.ContainsFunc(s.Workloads, func(w Workload) bool { return w.Name == n })
	}
	if err := pick(configs, hasC, "configuration"); err != nil {
		return err
	}
	if err := pick(workloads, hasW, "workload"); err != nil {
		return err
	}
	left := map[string]bool{} // "configuration NAME", "workload NAME"
	if len(configs) > 0 {
		if !slices.Contains(configs, s.Baseline) {
			configs = append([]string{s.Baseline}, configs...)
		}
		s.Configurations = slices.DeleteFunc(s.Configurations, func(c Configuration) bool {
			left["configuration "+c.Name] = !slices.Contains(configs, c.Name)
			return left["configuration "+c.Name]
		})
	}
	if len(workloads) > 0 {
		s.Workloads = slices.DeleteFunc(s.Workloads, func(w Workload) bool {
			left["workload "+w.Name] = !slices.Contains(workloads, w.Name)
			return left["workload "+w.Name]
		})
	}
	// A published figure of what was left out has nothing to stand
	// beside (one that names what the file never had is still refused).
	s.Published = slices.DeleteFunc(s.Published, func(p Published) bool {
		return left["configuration "+p.Configuration] || left["workload "+p.Workload]
	})
	return nil
}

// traceMode is how a configuration's runs are traced: "off", "plain" or
// "stages".
func (s *Spec) traceMode(c Configuration) string {
	switch c.Trace {
	case "false", "off":
		return "off"
	case "plain":
		return "plain"
	case "true", "stages":
		return "stages"
	}
	if s.Trace != nil && !*s.Trace {
		return "off"
	}
	if s.Stages != nil && !*s.Stages {
		return "plain"
	}
	return "stages"
}

// Check fills in the defaults and checks a bench made or changed in code
// (flags over a file).
func Check(s *Spec) error { return s.check() }

// Scale multiplies the work of every workload by f (sizes, files; cat's
// reads and shell's commands are left as they are): --scale grows a
// preset's defaults. The bench is checked (Check) first.
func (s *Spec) Scale(f float64) error {
	if !(f > 0) {
		return fmt.Errorf("scale %v: give a positive factor, e.g. 4", f)
	}
	for _, w := range s.Workloads {
		if w.Kind != nil {
			w.Kind.scale(f)
		}
	}
	return nil
}

// WritePresetList prints each preset's name and the first sentence of its
// description, wrapped at word boundaries to width columns under the
// description's first column.
func WritePresetList(w io.Writer, width int) error {
	const indent = 15
	for _, name := range Presets() {
		s, err := LoadPreset(name)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%-*s", indent-1, name)
		for _, word := range strings.Fields(firstSentence(s.Description)) {
			if len(line) > indent && len(line)+1+len(word) > width {
				if _, err := fmt.Fprintln(w, line); err != nil {
					return err
				}
				line = strings.Repeat(" ", indent-1)
			}
			line += " " + word
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}

// firstSentence is s up to its first full stop followed by a space.
func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i > 0 {
		return s[:i+1]
	}
	return s
}
