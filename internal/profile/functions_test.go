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
