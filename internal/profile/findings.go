package profile

// Findings is what fusescope doctor concluded from a record: the FUSE
// performance anti-patterns its rules found, worst first, and the rules
// that could not decide for want of data (docs/doctor.md).
type Findings struct {
	// Rules are the rules that were run, by name.
	Rules    []string  `json:"rules"`
	Findings []Finding `json:"findings"`
	// Undecided are the rules that lacked the data they need, each with
	// how to record it.
	Undecided []Undecided `json:"undecided,omitempty"`
}

// Finding is one anti-pattern on one mount.
type Finding struct {
	Rule  string `json:"rule"`  // the rule's name, e.g. "killpriv"
	Title string `json:"title"` // what was found, in a few words
	Conn  uint32 `json:"conn"`
	Mount string `json:"mount_point,omitempty"`
	// Evidence are the record's figures that show it, one line each.
	Evidence []string `json:"evidence"`
	Cause    string   `json:"cause"` // one sentence
	// Fix is what to change, one line per way to spell it (libfuse,
	// go-fuse, fusectl, a daemon's option).
	Fix []string `json:"fix"`
	// Gain is the gain the fix is expected to bring, with where that
	// figure comes from (a bench preset, a measurement).
	Gain string `json:"gain"`
	// Cost is the FUSE time, in ns, the anti-pattern accounts for in the
	// record (or an estimate of it): findings are sorted by it, worst
	// first.
	Cost uint64 `json:"cost_ns"`
}

// Undecided is a rule that could not decide on a record.
type Undecided struct {
	Rule    string `json:"rule"`
	Missing string `json:"missing"` // the data the record lacks
	Record  string `json:"record"`  // how to record it
}
