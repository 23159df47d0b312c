package labfs

import "github.com/fusescope/fusescope/internal/profile"

// gauges are the counters of fs stats that hold a level, not a count of
// events: an interval shows them as they stand at its end.
var gauges = map[string]bool{"inodes": true, "write_behind_max_depth": true}

// Interval is the daemon's statistics between two of its records of the
// same mount (fs stats MNT INTERVAL, as gluster's "volume profile info
// incremental"): requests, histograms and counters of that window alone,
// gauges and the heap as they stand at its end.
func Interval(prev, cur *profile.Record) (*profile.Record, error) {
	p, err := cur.Profile.Sub(&prev.Profile)
	if err != nil {
		return nil, err
	}
	out := *cur
	out.Profile = p
	out.Meta.Start = prev.Meta.End
	if cur.Meta.FS != nil && prev.Meta.FS != nil {
		fs := *cur.Meta.FS
		fs.Requests -= min(fs.Requests, prev.Meta.FS.Requests)
		fs.Counters = make(map[string]uint64, len(cur.Meta.FS.Counters))
		for k, v := range cur.Meta.FS.Counters {
			if !gauges[k] {
				v -= min(v, prev.Meta.FS.Counters[k])
			}
			fs.Counters[k] = v
		}
		out.Meta.FS = &fs
	}
	return &out, nil
}
