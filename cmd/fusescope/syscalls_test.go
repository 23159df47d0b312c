package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// syscalls refuses what cannot run in one sentence naming the flag and the
// fix, before it creates anything: a refusal leaves no -o file behind (the
// -p and --comm one was made after -o's temporary file, and left it).
func TestSyscallsRefusals(t *testing.T) {
	log, err := filepath.Abs("../../internal/systrace/testdata/sample.log")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ args, want string }{
		{"-p 1 --comm cat LOG", "give -p PID or --comm NAME to choose processes, not both"},
		{"--until 1 --since 5 LOG", "--until 1.000 is before --since 5.000"},
		{"--file [ LOG", `--file "[": syntax error in pattern`},
		{"--category disk LOG", `--category "disk": give one of`},
		{"--min-wait -1ms LOG", "--min-wait -1ms: give a positive duration, such as 1ms"},
		{"--csv --table timeline LOG", "--table timeline needs --timeline SECONDS"},
		{"--timeline 1 --comm cat -- true", "--timeline counts every traced process in the kernel, live: it cannot be combined with --comm"},
		{"-p 1 -p 2", "-p takes one process when tracing live"},
		{"--serve LOG", "--serve takes no logs, command or -p"},
		{"LOG --", "nothing after --"},
		{"", "give strace logs to analyse"},
	} {
		dir := t.TempDir()
		args := append([]string{"syscalls", "-o", filepath.Join(dir, "out.json")}, strings.Fields(strings.ReplaceAll(c.args, "LOG", log))...)
		root := newRootCmd()
		root.SetArgs(args)
		err := root.Execute()
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line starting %q", c.args, err, c.want)
		}
		if left, _ := os.ReadDir(dir); len(left) > 0 {
			t.Errorf("%s: left %s behind", c.args, left[0].Name())
		}
	}
}
