package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/bench"
	"github.com/spf13/pflag"
)

// Bad flag values get one sentence naming the flag, the value and an
// example, never the parser's text; empty text values are refused.
func TestFlagErrors(t *testing.T) {
	for args, want := range map[string]string{
		"trace --conn abc":             `--conn "abc": give a whole number of 0 or more, like --conn 12 (see fusescope trace --help)`,
		"trace -p x1":                  `--pid "x1": give a whole number, like --pid 12`,
		"trace 1 -5":                   "-5: an interval or a count is a positive number: usage: fusescope trace",
		"fs stats /m -1":               "-1: an interval or a count is a positive number: usage: fusescope fs stats",
		"trace --slower 10":            `--slower "10": give a duration with its unit, like --slower 10ms`,
		"fs mount --md-cache 5 a b":    `--md-cache "5": give a duration with its unit`,
		"fs mount --latency= a b":      "--latency was given an empty value: give it one, or leave it out (see fusescope fs mount --help)",
		"trace --op LOOKUP,":           "--op was given an empty value",
		"trace --mount=":               "--mount was given an empty value",
		"syscalls --top many x.log":    `--top "many": give a whole number, like --top 12`,
		"syscalls --since abc x.log":   `--since "abc": give a number, like --since 2.5 (see fusescope syscalls --help)`,
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

// What users read says what a thing is, not which of the project's source
// documents it came from (--help and the presets once cited "seed 000's
// show_diff", "GFFS used 4" and "Seed 001"): every command's help, its
// flags' and the presets' descriptions and published figures' sources.
func TestHelpSaysWhatThingsAre(t *testing.T) {
	internal := regexp.MustCompile(`(?i)\bseeds?\b[' ]+(0\d\d|experiment|and)|\bseed's\b|\bthe seeds'|\bGFFS used\b`)
	check := func(where, text string) {
		if m := internal.FindString(text); m != "" {
			t.Errorf("%s cites the project's sources (%q): say what it is", where, m)
		}
	}
	for _, c := range allCommands(newRootCmd()) {
		check(c.CommandPath(), c.Short+"\n"+c.Long+"\n"+c.Example)
		c.Flags().VisitAll(func(f *pflag.Flag) { check(c.CommandPath()+" --"+f.Name, f.Usage) })
	}
	for _, name := range bench.Presets() {
		b, err := bench.PresetYAML(name)
		if err != nil {
			t.Fatal(err)
		}
		check("preset "+name, string(b))
	}
}
