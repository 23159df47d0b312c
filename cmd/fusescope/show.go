package main

import (
	"os"

	"github.com/fusescope/fusescope/internal/profile"
	"github.com/spf13/cobra"
)

func newShowCmd() *cobra.Command {
	var out outputFlags
	c := &cobra.Command{
		Use:   "show RECORD.json",
		Short: "Render a saved record exactly as the live trace did",
		Example: `  fusescope trace --mount /cvmfs/sft.cern.ch -o run1.json
  fusescope show run1.json            # histograms and table, in usecs
  fusescope show -m --no-hist run1.json
  fusescope show --csv run1.json > run1.csv`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rec, err := profile.Load(args[0])
			if err != nil {
				return err
			}
			r := &renderer{o: &out, w: os.Stdout}
			return r.render(rec)
		},
	}
	out.register(c)
	return c
}
