package report

import (
	"cmp"
	"slices"

	"github.com/fusescope/fusescope/internal/profile"
)

// WholeRun sums an interval trace's records into one for the whole run:
// the opcodes, the application's calls, each mount's page cache, the
// files' requests, the drops and the slow requests not listed. The
// intervals of a trace add up to its run (docs/architecture.md), so this
// is the record trace -o writes for the same run, but for the files:
// each interval lists its N busiest, so a file that was never among an
// interval's N is missing from the sum. The slow and hung requests stay
// in the records they came with.
func WholeRun(recs []*profile.Record) *profile.Record {
	if len(recs) == 1 {
		return recs[0]
	}
	out := merged(recs) // the opcodes and mounts, as diff sums them
	out.Meta.End = recs[len(recs)-1].Meta.End
	out.Profile.Drops = profile.Drops{}
	out.SlowLost = 0
	for _, r := range recs {
		out.Profile.Drops.Add(r.Profile.Drops)
		out.SlowLost += r.SlowLost
	}
	out.Calls = sumCalls(recs)
	out.PageCache = sumPageCache(recs)
	out.Files = sumFiles(recs)
	var kf, df []*profile.KernelFunctions
	for _, r := range recs {
		kf, df = append(kf, r.Functions), append(df, r.DaemonFunctions)
	}
	out.Functions, out.DaemonFunctions = profile.SumFunctions(kf), profile.SumFunctions(df)
	return out
}

// sumCalls sums each system call over the records, most time first, as
// a whole run's record lists them.
func sumCalls(recs []*profile.Record) []profile.CallStats {
	var out []profile.CallStats
	at := map[string]int{}
	for _, r := range recs {
		for _, c := range r.Calls {
			i, ok := at[c.Syscall]
			if !ok {
				i = len(out)
				at[c.Syscall] = i
				out = append(out, profile.CallStats{Syscall: c.Syscall})
			}
			out[i].Add(&c)
		}
	}
	slices.SortFunc(out, func(a, b profile.CallStats) int {
		return cmp.Or(cmp.Compare(b.Latency.Sum, a.Latency.Sum), cmp.Compare(a.Syscall, b.Syscall))
	})
	return out
}

// sumPageCache sums each mount's page cache over the records.
func sumPageCache(recs []*profile.Record) []profile.PageCache {
	var out []profile.PageCache
	at := map[uint32]int{}
	for _, r := range recs {
		for _, pc := range r.PageCache {
			i, ok := at[pc.Conn]
			if !ok {
				i = len(out)
				at[pc.Conn] = i
				out = append(out, profile.PageCache{Conn: pc.Conn})
			}
			out[i].Add(pc)
		}
	}
	slices.SortFunc(out, func(a, b profile.PageCache) int { return cmp.Compare(a.Conn, b.Conn) })
	return out
}

// sumFiles sums each file's (node's) requests over the records, most
// time first as the tracer lists them. Its path is the latest known: a
// node's name is learnt once, and a rename changes it.
func sumFiles(recs []*profile.Record) []profile.FileStats {
	type key struct {
		conn uint32
		node uint64
	}
	var out []profile.FileStats
	at := map[key]int{}
	for _, r := range recs {
		for _, f := range r.Files {
			k := key{f.Conn, f.Node}
			i, ok := at[k]
			if !ok {
				i = len(out)
				at[k] = i
				out = append(out, profile.FileStats{Conn: f.Conn, Node: f.Node})
			}
			s := &out[i]
			if f.Path != "" {
				s.Path = f.Path
			}
			if f.Mount != "" {
				s.Mount = f.Mount
			}
			s.Count += f.Count
			s.Errors += f.Errors
			s.Total += f.Total
			s.Max = max(s.Max, f.Max)
		}
	}
	slices.SortFunc(out, func(a, b profile.FileStats) int {
		return cmp.Or(cmp.Compare(b.Total, a.Total), cmp.Compare(a.Conn, b.Conn), cmp.Compare(a.Node, b.Node))
	})
	return out
}
