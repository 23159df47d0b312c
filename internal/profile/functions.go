package profile

// The kernel-function section of a record: fusescope kfunc's calls of
// kernel functions, counted and timed in the kernel (docs/record.md).

import (
	"fmt"
	"sort"

	"github.com/fusescope/fusescope/internal/hist"
)

// How kfunc's programs reach the functions (KernelFunctions.Mechanism).
const (
	MechanismFentry      = "fentry"       // fentry/fexit: a BPF trampoline per function (BTF)
	MechanismKprobeMulti = "kprobe_multi" // counts through one kprobe.multi link; timed functions through kprobes
	MechanismKprobe      = "kprobe"       // a kprobe (and kretprobe) link per function
)

// KernelFunctions is what fusescope kfunc measured: how often each
// matching kernel function was called and, for the functions it timed,
// a log2 histogram of each call's time from entry to return.
type KernelFunctions struct {
	// Pattern is the glob the counted functions matched ("fuse_*"); ""
	// when only --latency's functions were measured.
	Pattern string `json:"pattern,omitempty"`
	// Timed are --latency's functions (or globs), as given.
	Timed []string `json:"timed,omitempty"`
	// Mechanism is how the programs were attached, and Why says why that
	// one was chosen.
	Mechanism string `json:"mechanism"`
	Why       string `json:"why,omitempty"`
	// Attached counts the functions probed; AttachNs is how long
	// attaching them took (loading included).
	Attached int   `json:"attached"`
	AttachNs int64 `json:"attach_ns,omitempty"`
	// NotAttached are the matching functions the kernel would not probe,
	// with its reason.
	NotAttached []FunctionError `json:"not_attached,omitempty"`
	// ValuesLost counts the hits whose argument's value found the table
	// of values full (16,384 values; --arg).
	ValuesLost uint64 `json:"values_lost,omitempty"`
	// Missed counts the timed calls not timed: the table of calls in
	// progress was full (10,240 at once), or the kernel skipped the entry
	// or return program (Skipped's reason).
	Missed uint64 `json:"missed,omitempty"`
	// Skipped counts the calls of counted functions for which the kernel
	// did not run the fentry program, because a run of the same program
	// was preempted on that CPU (the trampoline's recursion guard; the
	// program's recursion_misses). They are in the counts, except under
	// -p, where whose calls they were is not known.
	Skipped uint64 `json:"skipped,omitempty"`
	// Functions are the functions called in the record's window, each
	// once; in the order of Sort.
	Functions []FunctionCalls `json:"functions"`
	// DaemonStage is the daemon stage broken down by the functions (ufunc
	// --stages), per connection and opcode, in the order of SortStage;
	// nil when it was not measured.
	DaemonStage []StageFunctions `json:"daemon_stage,omitempty"`
}

// StageFunctions is the daemon stage of one opcode's requests on one
// connection, broken down by the daemon's functions: a call that began
// while a daemon thread (or a Go daemon's goroutine) held one of these
// requests counts for it, up to the start of the reply.
type StageFunctions struct {
	Conn   uint32 `json:"conn"`
	Op     string `json:"op"`
	Opcode uint32 `json:"opcode"`
	// Requests and HeldNs are the trace's daemon stage of the opcode's
	// requests: how many it timed, and their time from being read to the
	// reply's start, summed.
	Requests uint64 `json:"requests"`
	HeldNs   uint64 `json:"held_ns"`
	// InFunctionsNs is the part of HeldNs inside at least one of the
	// functions (nested calls count once); the rest is unaccounted for.
	InFunctionsNs uint64 `json:"in_functions_ns"`
	// Functions are each function's calls within the holds and their
	// time (a nested call's time is its caller's too), most time first.
	Functions []StageFunction `json:"functions"`
}

// StageFunction is one function's calls within an opcode's holds.
type StageFunction struct {
	Name  string `json:"name"`
	Calls uint64 `json:"calls"`
	Ns    uint64 `json:"ns"`
}

// UnaccountedNs is the daemon's time with the requests outside every
// function measured.
func (s StageFunctions) UnaccountedNs() uint64 {
	if s.InFunctionsNs >= s.HeldNs {
		return 0
	}
	return s.HeldNs - s.InFunctionsNs
}

// SortStage orders the daemon stage's rows by the daemon's time, most
// first, and each row's functions likewise.
func (k *KernelFunctions) SortStage() {
	for i := range k.DaemonStage {
		fs := k.DaemonStage[i].Functions
		sort.Slice(fs, func(a, b int) bool {
			if fs[a].Ns != fs[b].Ns {
				return fs[a].Ns > fs[b].Ns
			}
			return fs[a].Name < fs[b].Name
		})
	}
	sort.Slice(k.DaemonStage, func(i, j int) bool {
		a, b := &k.DaemonStage[i], &k.DaemonStage[j]
		if a.HeldNs != b.HeldNs {
			return a.HeldNs > b.HeldNs
		}
		if a.Conn != b.Conn {
			return a.Conn < b.Conn
		}
		return a.Opcode < b.Opcode
	})
}

// subStage is the daemon stage between an earlier snapshot and cur.
func subStage(cur, earlier []StageFunctions) []StageFunctions {
	if cur == nil {
		return nil
	}
	type key struct{ conn, opcode uint32 }
	old := map[key]*StageFunctions{}
	for i := range earlier {
		old[key{earlier[i].Conn, earlier[i].Opcode}] = &earlier[i]
	}
	out := []StageFunctions{}
	for _, s := range cur {
		o := old[key{s.Conn, s.Opcode}]
		if o == nil {
			out = append(out, s)
			continue
		}
		s.Requests -= min(s.Requests, o.Requests)
		s.HeldNs -= min(s.HeldNs, o.HeldNs)
		s.InFunctionsNs -= min(s.InFunctionsNs, o.InFunctionsNs)
		was := map[string]StageFunction{}
		for _, f := range o.Functions {
			was[f.Name] = f
		}
		fs := []StageFunction{}
		for _, f := range s.Functions {
			w := was[f.Name]
			f.Calls -= min(f.Calls, w.Calls)
			f.Ns -= min(f.Ns, w.Ns)
			if f.Calls > 0 {
				fs = append(fs, f)
			}
		}
		s.Functions = fs
		if s.Requests > 0 || len(fs) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// FunctionError is a function that could not be probed, and why.
type FunctionError struct {
	Name  string `json:"name"`
	Error string `json:"error"`
}

// FunctionCalls are one kernel function's calls.
type FunctionCalls struct {
	Name   string `json:"name"`
	Module string `json:"module,omitempty"` // "fuse"; "" for the kernel's own
	Count  uint64 `json:"count"`
	// Latency is each timed call's time from entry to return, ns
	// (--latency); nil for a function only counted.
	Latency *hist.Hist `json:"latency,omitempty"`
	// Arg is the argument (from 1) whose values Values counts, most hits
	// first (ufunc --usdt --arg); none without it.
	Arg    int        `json:"arg,omitempty"`
	Values []ArgValue `json:"values,omitempty"`
}

// ArgValue is how often a probe was hit with its argument at one value.
type ArgValue struct {
	Value int64  `json:"value"`
	Count uint64 `json:"count"`
}

// SortValues orders the values most hits first, then by value.
func (f *FunctionCalls) SortValues() {
	sort.Slice(f.Values, func(i, j int) bool {
		a, b := f.Values[i], f.Values[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return a.Value < b.Value
	})
}

// addValues adds (sign 1) or takes away (sign -1) o's values from f's.
func (f *FunctionCalls) addValues(o []ArgValue, sign int) {
	if len(o) == 0 {
		return
	}
	at := map[int64]int{}
	for i, v := range f.Values {
		at[v.Value] = i
	}
	for _, v := range o {
		i, ok := at[v.Value]
		switch {
		case ok && sign > 0:
			f.Values[i].Count += v.Count
		case ok:
			f.Values[i].Count -= min(f.Values[i].Count, v.Count)
		case sign > 0:
			at[v.Value] = len(f.Values)
			f.Values = append(f.Values, v)
		}
	}
	kept := f.Values[:0]
	for _, v := range f.Values {
		if v.Count > 0 {
			kept = append(kept, v)
		}
	}
	f.Values = kept
	f.SortValues()
}

// Key names a function uniquely in one kernel.
func (f *FunctionCalls) Key() string { return f.Module + ":" + f.Name }

// Sort orders the functions as bcc's funccount prints them: fewest calls
// first (the busiest last, above the prompt), then by name.
func (k *KernelFunctions) Sort() {
	sort.Slice(k.Functions, func(i, j int) bool {
		a, b := &k.Functions[i], &k.Functions[j]
		if a.Count != b.Count {
			return a.Count < b.Count
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Module < b.Module
	})
}

// Sub is what happened between an earlier snapshot of one run and k: the
// functions called in between, their counts and histograms the
// differences.
func (k *KernelFunctions) Sub(earlier *KernelFunctions) (*KernelFunctions, error) {
	out := *k
	out.Missed -= min(out.Missed, earlier.Missed)
	out.ValuesLost -= min(out.ValuesLost, earlier.ValuesLost)
	out.Skipped -= min(out.Skipped, earlier.Skipped)
	old := make(map[string]*FunctionCalls, len(earlier.Functions))
	for i := range earlier.Functions {
		old[earlier.Functions[i].Key()] = &earlier.Functions[i]
	}
	out.Functions = []FunctionCalls{}
	for _, f := range k.Functions {
		if o := old[f.Key()]; o != nil {
			if o.Count > f.Count {
				return nil, fmt.Errorf("%s: %d calls, fewer than the earlier snapshot's %d", f.Name, f.Count, o.Count)
			}
			f.Count -= o.Count
			f.Values = append([]ArgValue(nil), f.Values...)
			f.addValues(o.Values, -1)
			if f.Latency != nil && o.Latency != nil {
				lat, err := f.Latency.Sub(o.Latency)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", f.Name, err)
				}
				f.Latency = &lat
			}
		}
		if f.Count > 0 || (f.Latency != nil && f.Latency.Count > 0) {
			out.Functions = append(out.Functions, f)
		}
	}
	out.Sort()
	out.DaemonStage = subStage(k.DaemonStage, earlier.DaemonStage)
	out.SortStage()
	return &out, nil
}

// check finds figures that contradict themselves.
func (k *KernelFunctions) check() error {
	seen := map[string]bool{}
	for _, f := range k.Functions {
		if f.Name == "" {
			return fmt.Errorf("a kernel function without a name")
		}
		if seen[f.Key()] {
			return fmt.Errorf("kernel function %s appears twice", f.Name)
		}
		seen[f.Key()] = true
	}
	type key struct{ conn, opcode uint32 }
	rows := map[key]bool{}
	for _, s := range k.DaemonStage {
		if rows[key{s.Conn, s.Opcode}] {
			return fmt.Errorf("daemon stage of %s on connection %d appears twice", s.Op, s.Conn)
		}
		rows[key{s.Conn, s.Opcode}] = true
		for _, f := range s.Functions {
			if f.Name == "" {
				return fmt.Errorf("daemon stage of %s: a function without a name", s.Op)
			}
		}
	}
	return nil
}

// Add sums o, a later window of the same run, into k: an interval run's
// records add up to the whole run.
func (k *KernelFunctions) Add(o *KernelFunctions) {
	k.Missed += o.Missed
	k.Skipped += o.Skipped
	k.ValuesLost += o.ValuesLost
	at := map[string]int{}
	for i := range k.Functions {
		at[k.Functions[i].Key()] = i
	}
	for _, f := range o.Functions {
		i, ok := at[f.Key()]
		if !ok {
			at[f.Key()] = len(k.Functions)
			if f.Latency != nil {
				h := f.Latency.Clone()
				f.Latency = &h
			}
			f.Values = append([]ArgValue(nil), f.Values...)
			k.Functions = append(k.Functions, f)
			continue
		}
		g := &k.Functions[i]
		g.Count += f.Count
		g.addValues(f.Values, 1)
		switch {
		case f.Latency == nil:
		case g.Latency == nil:
			h := f.Latency.Clone()
			g.Latency = &h
		default:
			g.Latency.Merge(f.Latency)
		}
	}
	k.Sort()
	if o.DaemonStage == nil {
		return
	}
	type key struct{ conn, opcode uint32 }
	rows := map[key]int{}
	for i, s := range k.DaemonStage {
		rows[key{s.Conn, s.Opcode}] = i
	}
	for _, s := range o.DaemonStage {
		i, ok := rows[key{s.Conn, s.Opcode}]
		if !ok {
			rows[key{s.Conn, s.Opcode}] = len(k.DaemonStage)
			s.Functions = append([]StageFunction{}, s.Functions...)
			k.DaemonStage = append(k.DaemonStage, s)
			continue
		}
		r := &k.DaemonStage[i]
		r.Requests += s.Requests
		r.HeldNs += s.HeldNs
		r.InFunctionsNs += s.InFunctionsNs
		fi := map[string]int{}
		for j, f := range r.Functions {
			fi[f.Name] = j
		}
		for _, f := range s.Functions {
			if j, ok := fi[f.Name]; ok {
				r.Functions[j].Calls += f.Calls
				r.Functions[j].Ns += f.Ns
			} else {
				r.Functions = append(r.Functions, f)
			}
		}
	}
	k.SortStage()
}

// SumFunctions is the functions of an interval run's records summed: the
// whole run's. Nil if none of them has any.
func SumFunctions(sections []*KernelFunctions) *KernelFunctions {
	var out *KernelFunctions
	for _, s := range sections {
		if s == nil {
			continue
		}
		if out == nil {
			c := *s
			c.Functions = []FunctionCalls{}
			c.Missed, c.Skipped, c.ValuesLost = 0, 0, 0
			if s.DaemonStage != nil {
				c.DaemonStage = []StageFunctions{}
			}
			out = &c
		}
		out.Add(s)
	}
	return out
}

// FunctionsSince is the record of what happened between earlier, a
// snapshot of the same run of kfunc or ufunc, and r: its functions'
// calls in between (the sections' Sub), from earlier's end.
func (r *Record) FunctionsSince(earlier *Record) (*Record, error) {
	out := *r
	out.Meta.Start = earlier.Meta.End
	var err error
	if r.Functions != nil && earlier.Functions != nil {
		if out.Functions, err = r.Functions.Sub(earlier.Functions); err != nil {
			return nil, err
		}
	}
	if r.DaemonFunctions != nil && earlier.DaemonFunctions != nil {
		if out.DaemonFunctions, err = r.DaemonFunctions.Sub(earlier.DaemonFunctions); err != nil {
			return nil, err
		}
	}
	return &out, nil
}
