package profile

import (
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/hist"
)

func histOf(vals ...uint64) *hist.Hist {
	var h hist.Hist
	for _, v := range vals {
		h.Add(v)
	}
	return &h
}

// An interval is the difference of two snapshots: the functions called
// in between, with their counts' and histograms' differences, in
// funccount's order.
func TestKernelFunctionsSub(t *testing.T) {
	earlier := &KernelFunctions{Mechanism: MechanismKprobe, Missed: 1, Skipped: 5, Functions: []FunctionCalls{
		{Name: "fuse_lookup", Module: "fuse", Count: 5, Latency: histOf(1000, 2000, 3000, 4000, 5000)},
		{Name: "fuse_getattr", Module: "fuse", Count: 7},
		{Name: "fuse_quiet", Module: "fuse", Count: 2},
	}}
	later := &KernelFunctions{Mechanism: MechanismKprobe, Missed: 4, Skipped: 6, Functions: []FunctionCalls{
		{Name: "fuse_lookup", Module: "fuse", Count: 7, Latency: histOf(1000, 2000, 3000, 4000, 5000, 9000, 70000)},
		{Name: "fuse_getattr", Module: "fuse", Count: 10},
		{Name: "fuse_quiet", Module: "fuse", Count: 2},
		{Name: "fuse_new", Module: "fuse", Count: 1},
	}}
	d, err := later.Sub(earlier)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range d.Functions {
		got = append(got, f.Name)
	}
	if strings.Join(got, " ") != "fuse_new fuse_lookup fuse_getattr" {
		t.Errorf("functions %v, want fuse_new fuse_lookup fuse_getattr (fewest first, fuse_quiet not called)", got)
	}
	if d.Missed != 3 || d.Skipped != 1 {
		t.Errorf("missed %d, skipped %d: want 3 and 1", d.Missed, d.Skipped)
	}
	lookup := d.Functions[1]
	if lookup.Count != 2 || lookup.Latency.Count != 2 || lookup.Latency.Sum != 79000 || lookup.Latency.Max != 70000 {
		t.Errorf("fuse_lookup's interval: count %d, histogram %+v", lookup.Count, lookup.Latency)
	}
	if earlier.Functions[0].Count != 5 || later.Functions[0].Count != 7 {
		t.Errorf("Sub changed its operands")
	}
	if _, err := earlier.Sub(later); err == nil {
		t.Errorf("a later snapshot subtracted from an earlier one: no error")
	}
}

// A record of kernel functions holds no FUSE requests, reads back, and a
// function listed twice is refused.
func TestKernelFunctionsRecord(t *testing.T) {
	r := &Record{Schema: Schema, Meta: Meta{Source: "kernel:functions (fentry)"}, Functions: &KernelFunctions{Mechanism: MechanismFentry, Functions: []FunctionCalls{{Name: "fuse_lookup", Module: "fuse", Count: 3}}}}
	if r.HasRequests() {
		t.Errorf("a record of kernel functions has requests")
	}
	var b strings.Builder
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), `"profile"`) {
		t.Errorf("the record holds an empty profile:\n%s", b.String())
	}
	back, err := Parse([]byte(b.String()))
	if err != nil || back.Functions == nil || back.Functions.Functions[0].Count != 3 {
		t.Fatalf("read back: %v %+v", err, back)
	}
	r.Functions.Functions = append(r.Functions.Functions, FunctionCalls{Name: "fuse_lookup", Module: "fuse", Count: 1})
	b.Reset()
	r.Write(&b)
	if _, err := Parse([]byte(b.String())); err == nil || !strings.Contains(err.Error(), "fuse_lookup appears twice") {
		t.Errorf("a function listed twice: %v", err)
	}
}

func stageSection(requests, held, in, fnNs uint64) *KernelFunctions {
	return &KernelFunctions{Mechanism: "uprobe", Functions: []FunctionCalls{{Name: "sfs_lookup", Count: requests}},
		DaemonStage: []StageFunctions{{Conn: 7, Op: "LOOKUP", Opcode: 1, Requests: requests, HeldNs: held, InFunctionsNs: in,
			Functions: []StageFunction{{Name: "sfs_lookup", Calls: requests, Ns: fnNs}}}}}
}

// The daemon stage by function: an interval is the difference of two
// snapshots, and the intervals add up to the whole run.
func TestDaemonStageSubAdd(t *testing.T) {
	first, whole := stageSection(10, 1000, 900, 900), stageSection(25, 3000, 2500, 2500)
	in, err := whole.Sub(first)
	if err != nil {
		t.Fatal(err)
	}
	s := in.DaemonStage[0]
	if s.Requests != 15 || s.HeldNs != 2000 || s.InFunctionsNs != 1600 || s.Functions[0].Calls != 15 || s.Functions[0].Ns != 1600 || s.UnaccountedNs() != 400 {
		t.Errorf("interval: %+v", s)
	}
	sum := SumFunctions([]*KernelFunctions{first, nil, in})
	if got := sum.DaemonStage[0]; got.Requests != 25 || got.HeldNs != 3000 || got.InFunctionsNs != 2500 || got.Functions[0].Ns != 2500 || sum.Functions[0].Count != 25 {
		t.Errorf("the intervals summed: %+v, want the whole run's %+v", got, whole.DaemonStage[0])
	}
	if first.DaemonStage[0].Requests != 10 {
		t.Errorf("summing changed the first interval: %+v", first.DaemonStage[0])
	}
	// Nothing new in an interval: no row.
	if same, _ := whole.Sub(whole); len(same.DaemonStage) != 0 {
		t.Errorf("an empty interval has rows: %+v", same.DaemonStage)
	}
	// More time inside the functions than held (a window's edge) leaves
	// nothing unaccounted, never a wrapped-around number.
	if u := (StageFunctions{HeldNs: 5, InFunctionsNs: 6}).UnaccountedNs(); u != 0 {
		t.Errorf("unaccounted %d, want 0", u)
	}
	dup := stageSection(1, 1, 1, 1)
	dup.DaemonStage = append(dup.DaemonStage, dup.DaemonStage[0])
	if err := dup.check(); err == nil {
		t.Errorf("a connection's opcode twice in the daemon stage passed the check")
	}
}
