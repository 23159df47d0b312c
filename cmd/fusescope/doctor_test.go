package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// doctor's bad arguments get one sentence that names the problem and what
// to give, before anything is traced.
func TestDoctorArgErrors(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "r.json")
	os.WriteFile(rec, []byte(`{"schema":"fusescope.record/v2","meta":{"tool":"t"},"profile":{"ops":[]}}`), 0o644)
	notJSON := filepath.Join(t.TempDir(), "log.txt")
	os.WriteFile(notJSON, []byte("read(3, ...) = 4\n"), 0o644)
	for args, want := range map[string]string{
		"doctor nosuchfile":           `"nosuchfile" is neither a duration (30, 10s, 1m) nor a record file`,
		"doctor -- ":                  "nothing after --: give the command",
		"doctor 10 -- true":           "doctor takes a DURATION or records, or -- CMD: not both",
		"doctor -5":                   "-5: an interval or a count is a positive number",
		"doctor 0s":                   `duration "0s": give a positive time`,
		"doctor --hung 0 5":           "--hung 0s: give a positive duration",
		"doctor --rule nosuch " + rec: `no doctor rule is named "nosuch": give one of killpriv,`,
		"doctor --mount /mnt " + rec:  "--mount applies to a live run",
		"doctor -o x.json " + rec:     "-o saves a live run's record",
		"doctor " + notJSON:           "is not JSON",
		"doctor -p 99999999 5":        "-p 99999999: no such process",
		"doctor -p 1 -- true":         "-p and -- CMD both name the application",
	} {
		root := newRootCmd()
		root.SetArgs(strings.Fields(args))
		root.SilenceErrors, root.SilenceUsage = true, true
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}

// doctor on a saved record runs the rules and prints the findings section,
// with what each undecided rule needs.
func TestDoctorOnASavedRecord(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "r.json")
	os.WriteFile(rec, []byte(`{"schema":"fusescope.record/v2","meta":{"tool":"t","kernel":"6.18.0","mounts":[{"conn":7,"mount_point":"/mnt"}]},
"profile":{"ops":[{"conn":7,"op":"WRITE","opcode":16,"count":1000,"req_bytes":4176000,"reply_bytes":24000,"latency":{"unit":"ns","count":1000,"sum":30000000,"min":20000,"max":30000,"buckets":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,1000]}}]}}`), 0o644)
	out := filepath.Join(t.TempDir(), "out.txt")
	f, _ := os.Create(out)
	stdout := os.Stdout
	os.Stdout = f
	root := newRootCmd()
	root.SetArgs([]string{"doctor", rec})
	err := root.Execute()
	os.Stdout = stdout
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	for _, want := range []string{"doctor: 1 finding on /mnt", "writes sent one small request each [small-writes]", "1,000 WRITE of 4.0 KiB", "Undecided", "direct-io", "the application's file calls"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the output lacks %q:\n%s", want, b)
		}
	}
}
