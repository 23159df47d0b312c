package main

import (
	"strings"
	"testing"
)

// Bad flag values get one sentence naming the flag, the value and an
// example, never the parser's text; empty text values are refused.
func TestFlagErrors(t *testing.T) {
	for args, want := range map[string]string{
		"trace --conn abc":             `--conn "abc": give a whole number of 0 or more, like --conn 12 (see fusescope trace --help)`,
		"trace -p x1":                  `--pid "x1": give a whole number, like --pid 12`,
		"trace --slower 10":            `--slower "10": give a duration with its unit, like --slower 10ms`,
		"fs mount --md-cache 5 a b":    `--md-cache "5": give a duration with its unit`,
		"fs mount --latency= a b":      "--latency was given an empty value: give it one, or leave it out (see fusescope fs mount --help)",
		"trace --op LOOKUP,":           "--op was given an empty value",
		"trace --mount=":               "--mount was given an empty value",
		"syscalls --top many x.log":    `--top "many": give a whole number, like --top 12`,
		"fs mount --max-read 2TiB a b": "--max-read",
	} {
		root := newRootCmd()
		root.SetArgs(strings.Fields(args))
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "strconv") || strings.Contains(err.Error(), "time:") {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}
