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

// stageRecord is a deterministic ufunc --stages record: passthrough_hp's
// LOOKUPs (a nested call, sfs_lookup's fuse_reply_entry) and GETATTRs,
// and an OPEN no function's call fell in.
func stageRecord(scale uint64) *profile.Record {
	t0 := time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)
	fn := &profile.KernelFunctions{
		Pattern: "sfs_*", Timed: []string{"sfs_*"}, Mechanism: "uprobe", Why: "uprobes on ./passthrough_hp", Attached: 41,
		Functions: []profile.FunctionCalls{{Name: "sfs_getattr", Module: "passthrough_hp", Count: 250 * scale}, {Name: "sfs_lookup", Module: "passthrough_hp", Count: 100 * scale}},
		DaemonStage: []profile.StageFunctions{
			{Conn: 42, Op: "LOOKUP", Opcode: 1, Requests: 100 * scale, HeldNs: 222_786_521 * scale, InFunctionsNs: 222_413_170 * scale, Functions: []profile.StageFunction{
				{Name: "sfs_lookup", Calls: 100 * scale, Ns: 222_413_170 * scale}, {Name: "fuse_reply_entry", Calls: 100 * scale, Ns: 1_204_000 * scale}}},
			{Conn: 42, Op: "GETATTR", Opcode: 3, Requests: 250 * scale, HeldNs: 17_850_680 * scale, InFunctionsNs: 16_744_585 * scale, Functions: []profile.StageFunction{
				{Name: "sfs_getattr", Calls: 250 * scale, Ns: 16_744_585 * scale}}},
			{Conn: 42, Op: "OPEN", Opcode: 14, Requests: 2, HeldNs: 90_000, Functions: []profile.StageFunction{}},
		},
	}
	fn.Sort()
	fn.SortStage()
	var lat hist.Hist
	lat.Add(2_300_000)
	return &profile.Record{Schema: profile.Schema, Meta: profile.Meta{Tool: "test", Source: "tracepoint", Start: t0, End: t0.Add(5 * time.Second)},
		Profile:         profile.Profile{Ops: []profile.OpStats{{Conn: 42, Op: "LOOKUP", Opcode: 1, Count: 1, Latency: lat}}},
		DaemonFunctions: fn}
}

func TestDaemonStageGolden(t *testing.T) {
	r := stageRecord(1)
	var text, ms, csv bytes.Buffer
	if err := WriteDaemonStageText(&text, r, hist.Usecs); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "daemon_stage.golden", text.Bytes())
	if err := WriteDaemonStageText(&ms, r, hist.Msecs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ms.String(), "222.787 msecs (2.228 msecs each)") {
		t.Errorf("in msecs:\n%s", ms.String())
	}
	for i := range 2 { // an interval's: no second header
		if err := WriteDaemonStageCSV(&csv, r, i == 0); err != nil {
			t.Fatal(err)
		}
	}
	golden.Check(t, "daemon_stage.csv.golden", csv.Bytes())
	// Its record renders the requests and the functions, the stage last.
	var all bytes.Buffer
	if err := (&Renderer{W: &all}).Render(r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(all.String(), "op = LOOKUP") || !strings.Contains(all.String(), "sfs_getattr") || !strings.HasSuffix(all.String(), text.String()) {
		t.Errorf("show of a ufunc --stages record:\n%s", all.String())
	}
	// Its CSV is the opcodes' table; the functions' and the stage's are
	// show --table's.
	var ops bytes.Buffer
	if err := (&Renderer{Format: Format{CSV: true}, W: &ops}).Render(r); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ops.String(), "end_time,mount,") {
		t.Errorf("the CSV of a record with requests and functions is not the opcodes':\n%s", ops.String())
	}
}

// diff sets the daemon stage side by side per request held, and sums an
// interval run's records first; the HTML report shows each row.
func TestDaemonStageDiffAndHTML(t *testing.T) {
	a := stageRecord(1)
	b1, b2 := stageRecord(1), stageRecord(1)
	b2.DaemonFunctions.DaemonStage[0].HeldNs *= 3 // LOOKUP: 3x the hold in the second interval
	b2.DaemonFunctions.DaemonStage[0].Functions[0].Ns *= 3
	b2.DaemonFunctions.DaemonStage[0].InFunctionsNs *= 3
	d, err := NewDiff(DiffInput{Name: "a.json", Records: []*profile.Record{a}}, DiffInput{Name: "b.json", Records: []*profile.Record{b1, b2}})
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := WriteDiffText(&text, d, DiffOptions{Unit: hist.Usecs}); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "diff_daemon_stage.golden", text.Bytes())
	var held *StageDiff
	for i := range d.DaemonStage {
		if d.DaemonStage[i].Op == "LOOKUP" && d.DaemonStage[i].Function == StageHeld {
			held = &d.DaemonStage[i]
		}
	}
	if held == nil || held.RequestsB != 200 || held.PerRequestPct == nil || *held.PerRequestPct < 99 || *held.PerRequestPct > 101 {
		t.Errorf("LOOKUP's hold: %+v, want 200 requests in B at twice A's time each", held)
	}
	a.DaemonFunctions.DaemonStage[0].Functions[1].Name = "<img src=x onerror=alert(1)>"
	var page bytes.Buffer
	if err := WriteHTML(&page, "t", []HTMLInput{{Name: "a.json", Records: []*profile.Record{a}}}); err != nil {
		t.Fatal(err)
	}
	p := page.String()
	if !strings.Contains(p, "Daemon stage by function") || !strings.Contains(p, "unaccounted for") || strings.Contains(p, "<img src=x") {
		t.Errorf("the HTML report's daemon stage: missing, or a name unescaped")
	}
}
