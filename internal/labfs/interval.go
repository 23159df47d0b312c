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

// StatsSource is a mounted lab file system's own statistics, read through
// its control socket, as a session source: the daemon counts from its
// mount, so a snapshot covers the whole mount and an interval is the
// difference of two.
type StatsSource struct {
	mnt  string
	prev *profile.Record
}

// OpenStats asks the daemon at mnt for its statistics once, so that a
// mount that does not answer is refused before anything is reported.
func OpenStats(mnt string) (*StatsSource, error) {
	rec, err := Stats(mnt)
	if err != nil {
		return nil, err
	}
	return &StatsSource{mnt: mnt, prev: rec}, nil
}

// Snapshot is the daemon's statistics since its mount.
func (s *StatsSource) Snapshot() (*profile.Record, error) { return Stats(s.mnt) }

// Interval is what the daemon served since the previous interval (or the
// open), and its statistics now.
func (s *StatsSource) Interval(bool) (interval, whole *profile.Record, err error) {
	cur, err := Stats(s.mnt)
	if err != nil {
		return nil, nil, err
	}
	in, err := Interval(s.prev, cur)
	if err != nil {
		return nil, nil, err
	}
	s.prev = cur
	return in, cur, nil
}

// Close does nothing: the daemon goes on serving.
func (s *StatsSource) Close() error { return nil }
