package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/golden"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
)

// functionsRecord is a deterministic kfunc record: fuse_* counted, two
// functions timed (fuse_lookup is also counted), as the 6.1 guest's run
// looked.
func functionsRecord() *profile.Record {
	t0 := time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)
	lat := func(vals ...uint64) *hist.Hist {
		var h hist.Hist
		for _, v := range vals {
			h.Add(v)
		}
		return &h
	}
	var lookups []uint64
	for i := range uint64(41) {
		lookups = append(lookups, 2_100_000+i*61_000)
	}
	fn := &profile.KernelFunctions{
		Pattern: "fuse_*", Timed: []string{"fuse_lookup", "fuse_readdir"}, Mechanism: profile.MechanismFentry,
		Why: "the kernel has BTF for 258 of the 267 functions (--attach kprobe reaches the 9 others too)", Attached: 258, AttachNs: 4_593_000_000,
		NotAttached: []profile.FunctionError{{Name: "fuse_fill_iomap.isra.0 [fuse]", Error: "no BTF of its name (a compiler's copy): kprobes reach it"}},
		Functions: []profile.FunctionCalls{
			{Name: "fuse_lookup", Module: "fuse", Count: 41, Latency: lat(lookups...)},
			{Name: "fuse_copy_finish", Module: "fuse", Count: 210},
			{Name: "fuse_conn_get", Module: "fuse", Count: 1},
			{Name: "fuse_readdir", Module: "fuse", Count: 2, Latency: lat(180_000, 1_900_000)},
			{Name: "fuse_dev_do_read", Module: "fuse", Count: 42},
			{Name: "a_function_whose_name_is_longer_than_funccount_column", Count: 3},
		},
	}
	fn.Sort()
	return &profile.Record{Schema: profile.Schema, Meta: profile.Meta{
		Tool: "test", Source: "kernel:functions (fentry)", Kernel: "6.1.0-50-amd64", Host: "guest",
		Start: t0, End: t0.Add(5 * time.Second), Command: []string{"fusescope", "kfunc", "fuse_*", "--latency", "fuse_lookup,fuse_readdir"},
	}, Functions: fn}
}

func TestFunctionsGolden(t *testing.T) {
	r := functionsRecord()
	for name, u := range map[string]hist.Unit{"functions.golden": hist.Usecs, "functions_msecs.golden": hist.Msecs} {
		var buf bytes.Buffer
		if err := (&Renderer{Format: Format{Unit: u}, W: &buf}).Render(r); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, name, buf.Bytes())
	}
	var csv bytes.Buffer
	rr := &Renderer{Format: Format{CSV: true}, W: &csv}
	if err := rr.Render(r); err != nil {
		t.Fatal(err)
	}
	if err := rr.Render(r); err != nil { // an interval's: no second header
		t.Fatal(err)
	}
	golden.Check(t, "functions.csv.golden", csv.Bytes())
	if n := strings.Count(csv.String(), "end_time,"); n != 1 {
		t.Errorf("%d CSV headers in two records, want 1", n)
	}
	var js bytes.Buffer
	if err := r.Write(&js); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "functions.json.golden", js.Bytes())
	back, err := profile.Parse(js.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if Kind(back) != KindFunctions || back.HasRequests() {
		t.Errorf("a record read back is %s (requests: %v), want %s", Kind(back), back.HasRequests(), KindFunctions)
	}
	var again bytes.Buffer
	if err := back.Write(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), js.Bytes()) {
		t.Errorf("the record does not read back as it was written:\n%s\n---\n%s", again.Bytes(), js.Bytes())
	}
}

// Timed only: histograms and no table; nothing returned: a line says so.
func TestFunctionsTimedOnly(t *testing.T) {
	r := functionsRecord()
	r.Functions.Pattern = ""
	var buf bytes.Buffer
	if err := WriteFunctionsText(&buf, r, hist.Usecs); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "FUNC") || !strings.Contains(buf.String(), "func = fuse_lookup") {
		t.Errorf("timed only: want histograms and no table\n%s", buf.String())
	}
	r.Functions.Functions = nil
	buf.Reset()
	if err := WriteFunctionsText(&buf, r, hist.Usecs); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != "No call of a timed function returned.\n" {
		t.Errorf("nothing returned: %q", got)
	}
}

// diff compares two function records: each function's calls, mean and
// total, the largest change in time first; a function in one record only
// is new (or gone); the CSV has every row. The HTML report renders the
// functions, every name escaped.
func TestFunctionsDiffAndHTML(t *testing.T) {
	a := functionsRecord()
	b := functionsRecord()
	b.Functions.Functions[len(b.Functions.Functions)-1].Count *= 2
	for i := range b.Functions.Functions {
		f := &b.Functions.Functions[i]
		if f.Latency != nil {
			var h hist.Hist
			for range f.Latency.Count {
				h.Add(uint64(f.Latency.Mean() * 3))
			}
			f.Latency = &h
		}
	}
	b.Functions.Functions = append(b.Functions.Functions, profile.FunctionCalls{Name: "fuse_new_in_b", Module: "fuse", Count: 7})
	d, err := NewDiff(DiffInput{Name: "a.json", Records: []*profile.Record{a}}, DiffInput{Name: "b.json", Records: []*profile.Record{b}})
	if err != nil {
		t.Fatal(err)
	}
	var text, csv bytes.Buffer
	if err := WriteDiffText(&text, d, DiffOptions{Unit: hist.Usecs}); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "diff_functions.golden", text.Bytes())
	if err := WriteDiffCSV(&csv, d); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "diff_functions.csv.golden", csv.Bytes())
	if d.Functions[0].Function != "fuse_lookup" || len(d.Functions) != 7 {
		t.Errorf("rows: %+v, want fuse_lookup's tripled time first, and 7 functions", d.Functions)
	}
	a.Functions.Functions[0].Name = "<script>alert(1)</script>"
	var page bytes.Buffer
	if err := WriteHTML(&page, "t", []HTMLInput{{Name: "a.json", Records: []*profile.Record{a}}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page.String(), "<script>alert") || !strings.Contains(page.String(), "&lt;script&gt;") || !strings.Contains(page.String(), "fuse_copy_finish") {
		t.Errorf("the HTML report does not render the functions with their names escaped")
	}
}

// Calls the kernel did not run a program for are said: in the counts
// without -p, not under it (whose they were is not known).
func TestFunctionsSkippedNote(t *testing.T) {
	r := functionsRecord()
	r.Functions.Skipped, r.Functions.Missed = 3, 2
	var buf bytes.Buffer
	if err := WriteFunctionsText(&buf, r, hist.Usecs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "3 calls were counted without their program") || !strings.Contains(buf.String(), "2 calls were not timed") {
		t.Errorf("no -p:\n%s", buf.String())
	}
	r.Meta.Filters.PID = 42
	buf.Reset()
	if err := WriteFunctionsText(&buf, r, hist.Usecs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "3 calls were not seen, and are not counted") {
		t.Errorf("-p:\n%s", buf.String())
	}
}

// --arg's values: the most hit first, libfuse's opcodes and errors
// named, ten at most in the text, every one in the CSV.
func TestFunctionArgValues(t *testing.T) {
	r := functionsRecord()
	var vals []profile.ArgValue
	for i := range int64(12) {
		vals = append(vals, profile.ArgValue{Value: i + 1, Count: uint64(100 - i)})
	}
	r.Functions.Functions = []profile.FunctionCalls{
		{Name: "usdt:libfuse:request_process", Count: 1000, Arg: 1, Values: vals},
		{Name: "usdt:libfuse:request_reply", Count: 7, Arg: 3, Values: []profile.ArgValue{{Value: 0, Count: 5}, {Value: -39, Count: 2}}},
	}
	var text, csv bytes.Buffer
	if err := WriteFunctionsText(&text, r, hist.Usecs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"argument 1 (FUSE opcode)", "1        100  LOOKUP", "(2 more values, the least hit: show --csv lists them all)", "-39          2  ENOTEMPTY", "argument 3 (negative errno)"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("no %q in\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "  12  ") {
		t.Errorf("the least hit value is shown:\n%s", text.String())
	}
	if err := WriteFunctionsCSV(&csv, r, true); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(csv.String(), ",usdt:libfuse:request_process,"); n != 13 || !strings.Contains(csv.String(), ",2,,,,,,,3,-39\n") {
		t.Errorf("CSV: %d rows of request_process (want the total and 12 values), or no -39 row:\n%s", n, csv.String())
	}
}
