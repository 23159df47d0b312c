package report

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/golden"
	"github.com/fusescope/fusescope/internal/profile"
)

func findingsRecord() *profile.Record {
	return &profile.Record{
		Schema: profile.Schema,
		Meta:   profile.Meta{Mounts: []profile.Mount{{Conn: 7, MountPoint: "/mnt/a,b"}}},
		Findings: &profile.Findings{
			Rules: []string{"killpriv", "small-writes", "direct-io"},
			Findings: []profile.Finding{
				{Rule: "killpriv", Title: "a GETXATTR before every write", Conn: 7, Mount: "/mnt/a,b",
					Evidence: []string{"1,000 GETXATTR for 1,000 write calls (1.00 per write), 21.34 ms of FUSE time"},
					Cause:    "the daemon does not negotiate FUSE_HANDLE_KILLPRIV_V2",
					Fix:      []string{"libfuse: FUSE_CAP_HANDLE_KILLPRIV_V2", "lab fs: --killpriv-v2"},
					Gain:     "one GETXATTR per file instead of one per write", Cost: 21340000},
				{Rule: "small-writes", Title: "writes sent one small request each", Conn: 7, Mount: "/mnt/a,b",
					Evidence: []string{"1,000 WRITE of 4.0 KiB on average"}, Cause: "no write-back caching",
					Fix: []string{"libfuse: -o writeback_cache"}, Gain: "4.58x", Cost: 1000},
			},
			Undecided: []profile.Undecided{{Rule: "direct-io", Missing: "the application's file calls", Record: "run fusescope doctor -- CMD"}},
		},
	}
}

// doctor's text: worst first, each with its evidence, cause, fix and
// gain, then the rules that could not decide.
func TestFindingsText(t *testing.T) {
	var b bytes.Buffer
	WriteFindingsText(&b, findingsRecord())
	golden.Check(t, "findings.golden", b.Bytes())

	quiet := findingsRecord()
	quiet.Findings.Findings, quiet.Findings.Undecided = nil, nil
	b.Reset()
	WriteFindingsText(&b, quiet)
	golden.Check(t, "findings_none.golden", b.Bytes())
}

// show --csv --table findings: one row per finding, names from the trace
// quoted as every CSV of ours quotes them.
func TestFindingsCSV(t *testing.T) {
	var b bytes.Buffer
	if err := WriteFindingsCSV(&b, findingsRecord(), true); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "findings.csv.golden", b.Bytes())
}

// The HTML report's findings section: every string escaped, as all that
// came from a trace is.
func TestFindingsHTML(t *testing.T) {
	rec := findingsRecord()
	rec.Findings.Findings[0].Evidence = []string{`<script>alert(1)</script> held by "<b>x</b>"`}
	rec.Findings.Findings[0].Mount = "/mnt/<img src=x>"
	var b bytes.Buffer
	if err := WriteHTML(&b, "doctor", []HTMLInput{{Name: "doc.json", Records: []*profile.Record{rec}}}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"Findings (fusescope doctor)", "a GETXATTR before every write", "libfuse: FUSE_CAP_HANDLE_KILLPRIV_V2", "the application&#39;s file calls", "&lt;script&gt;alert(1)&lt;/script&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, bad := range []string{"<script>", "<img src=x>", "<b>x</b>"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q unescaped", bad)
		}
	}
}

// diff names the findings a fix removed, those it brought, and those both
// records have.
func TestFindingsDiff(t *testing.T) {
	a, b := findingsRecord(), findingsRecord()
	b.Findings.Findings = []profile.Finding{a.Findings.Findings[1], {Rule: "keep-cache", Mount: "/mnt/a,b"}}
	a.Profile.Ops = []profile.OpStats{{Conn: 7, Op: "WRITE", Count: 10}}
	b.Profile.Ops = []profile.OpStats{{Conn: 7, Op: "WRITE", Count: 1}}
	d, err := NewDiff(DiffInput{Name: "a.json", Records: []*profile.Record{a}}, DiffInput{Name: "b.json", Records: []*profile.Record{b}})
	if err != nil {
		t.Fatal(err)
	}
	want := FindingsDiff{Gone: []string{"killpriv on /mnt/a,b"}, New: []string{"keep-cache on /mnt/a,b"}, Both: []string{"small-writes on /mnt/a,b"}}
	if d.Findings == nil || !slices.Equal(d.Findings.Gone, want.Gone) || !slices.Equal(d.Findings.New, want.New) || !slices.Equal(d.Findings.Both, want.Both) {
		t.Fatalf("findings diff %+v, want %+v", d.Findings, want)
	}
	var out bytes.Buffer
	if err := WriteDiffText(&out, d, DiffOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "gone in B: killpriv on") {
		t.Errorf("diff text lacks the findings:\n%s", out.String())
	}
}
