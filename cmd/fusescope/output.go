package main

import (
	"os"

	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/report"
	"github.com/spf13/cobra"
)

// outputFlags are the flags that choose how profiles are shown; trace and
// show share them so a saved record renders exactly as the live trace did.
type outputFlags struct {
	unitFlags
	json, csv bool
	counts    bool
	noHists   bool
}

// unitFlags are bcc's -m and -u, and --ns: the unit of times shown.
type unitFlags struct{ msecs, usecs, nsecs bool }

func (u *unitFlags) register(c *cobra.Command) {
	f := c.Flags()
	f.BoolVarP(&u.msecs, "milliseconds", "m", false, "show times in milliseconds")
	f.BoolVarP(&u.usecs, "microseconds", "u", false, "show times in microseconds (the default)")
	f.BoolVar(&u.nsecs, "ns", false, "show times in nanoseconds")
	exclusive(c, "milliseconds", "microseconds", "ns")
}

func (u *unitFlags) unit() hist.Unit {
	switch {
	case u.msecs:
		return hist.Msecs
	case u.nsecs:
		return hist.Nsecs
	}
	return hist.Usecs
}

// functionFlags are kfunc's and ufunc's output flags: the unit, JSON or
// CSV, -T and -o.
type functionFlags struct {
	unitFlags
	json, csv, stamp bool
	output           string
}

func (o *functionFlags) register(c *cobra.Command) {
	o.unitFlags.register(c)
	f := c.Flags()
	f.BoolVar(&o.json, "json", false, "print the record as JSON (docs/record.md; one line per interval)")
	f.BoolVar(&o.csv, "csv", false, "print one CSV row per function (docs/record.md)")
	f.BoolVarP(&o.stamp, "timestamp", "T", false, "print a timestamp before each report")
	f.StringVarP(&o.output, "output", "o", "", "save the whole run as a record to `RECORD.json`")
	exclusive(c, "json", "csv")
}

// renderer renders the records to standard output, a line each under
// intervals (JSON).
func (o *functionFlags) renderer(intervals bool) *report.Renderer {
	return &report.Renderer{Format: report.Format{Unit: o.unit(), JSON: o.json, CSV: o.csv}, W: os.Stdout, Stamp: o.stamp, Lines: intervals}
}

func (o *outputFlags) register(c *cobra.Command) {
	o.unitFlags.register(c)
	f := c.Flags()
	f.BoolVar(&o.json, "json", false, "print the record as JSON (docs/record.md)")
	f.BoolVar(&o.csv, "csv", false, "print one CSV row per mount and opcode (docs/record.md)")
	f.BoolVar(&o.counts, "counts", false, "counters only: requests and errors per opcode, no latency")
	f.BoolVar(&o.noHists, "no-hist", false, "print the table without the per-opcode histograms")
	exclusive(c, "json", "csv")
}

// format is the view the flags chose.
func (o *outputFlags) format() report.Format {
	return report.Format{Unit: o.unit(), JSON: o.json, CSV: o.csv, CountsOnly: o.counts, NoHists: o.noHists}
}

// resolveMounts resolves --mount's paths to their FUSE connections.
func resolveMounts(paths []string) ([]fuseconn.MountInfo, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	infos, err := fuseconn.ReadMountInfo()
	if err != nil {
		return nil, err
	}
	var out []fuseconn.MountInfo
	for _, p := range paths {
		mi, err := fuseconn.ResolveMount(p, infos)
		if err != nil {
			return nil, err
		}
		out = append(out, mi)
	}
	return out, nil
}
