package guest

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fusescope doctor on a write-through mount: 300 writes of 4 KiB are 300
// WRITEs of 4 KiB, the small-writes finding, on every kernel; what the
// kernel cannot record (the page cache and the calls before 6.12) it does
// without, saying so, and the rules that read it are undecided.
func TestDoctor(t *testing.T) {
	machine(t)
	const writes = 300
	l := mountLab(t)
	steps := []string{"write:" + filepath.Join(l.mnt, "w") + ":300", l.idle()}
	rec := filepath.Join(t.TempDir(), "rec.json")
	r := runFusescopeEnv(workload(steps...), "doctor", "--mount", l.mnt, "-o", rec, "--", self(t))
	o := check(t, Doctor, "doctor", r)
	if o == nil {
		return
	}
	defer o.done()
	f := readRecord(t, rec).Findings
	if f == nil {
		o.Fatalf("the record has no findings section")
	}
	var rules []string
	for _, x := range f.Findings {
		rules = append(rules, x.Rule)
		if x.Rule == "small-writes" && !strings.Contains(strings.Join(x.Evidence, " "), "300 WRITE of 4.0 KiB") {
			o.Errorf("small-writes' evidence %q: want the %d WRITEs of 4 KiB", x.Evidence, writes)
		}
	}
	var undecided []string
	for _, u := range f.Undecided {
		undecided = append(undecided, u.Rule)
	}
	t.Logf("kernel %s: findings %v, undecided %v; %s", release, rules, undecided, firstLine(r.stderr))
	if !slices.Contains(rules, "small-writes") {
		o.Errorf("findings %v, want small-writes", rules)
	}
	if row.Support[Calls] == Refused && !strings.Contains(r.stderr, "doctor goes on without it") {
		o.Errorf("the kernel cannot record the calls, and doctor said nothing of it: %s", r.stderr)
	}
}
