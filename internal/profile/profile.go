// Package profile is fusescope's data model: a Profile holds per-opcode
// statistics with full histograms, and a Record is a profile plus the metadata
// that says where and how it was measured. Every view renders profiles, so a
// live trace and a saved record look the same.
package profile

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/hist"
)

// OpStats is what was measured for one opcode on one FUSE connection.
type OpStats struct {
	Conn       uint32            `json:"conn"`
	Op         string            `json:"op"`
	Opcode     uint32            `json:"opcode"`
	Count      uint64            `json:"count"`
	Errors     uint64            `json:"errors"`
	Errnos     map[string]uint64 `json:"errnos,omitempty"` // "ENOENT": n
	ReqBytes   uint64            `json:"req_bytes"`
	ReplyBytes uint64            `json:"reply_bytes"`
	// URing counts the requests FUSE over io_uring's ring carried; the
	// others came through /dev/fuse (or the kernel ended them itself).
	URing   uint64    `json:"uring,omitempty"`
	Latency hist.Hist `json:"latency"` // the total stage: send -> end, ns
	// Stages splits the requests' time into the parts a source could
	// measure (queue, daemon, reply), each a histogram of the requests it
	// timed; none when only the total was measured.
	Stages []StageLatency `json:"stages,omitempty"`
	// StageGaps counts the requests the stages do not: those whose
	// passage through the daemon was not seen whole.
	StageGaps StageGaps `json:"stage_gaps,omitzero"`
}

// StageGaps are the requests of an operation that a stage source timed in
// total only, by the stamp it missed.
type StageGaps struct {
	// NotTaken: no read of the request from /dev/fuse was seen (the ring
	// transport of FUSE over io_uring, a daemon process not watched, or a
	// request the kernel ended itself, such as one interrupted or aborted).
	NotTaken uint64 `json:"not_taken,omitempty"`
	// NotReplied: read, but no write of its reply was seen.
	NotReplied uint64 `json:"not_replied,omitempty"`
}

// Stage names a part of a request's time (docs/record.md).
type Stage string

// The stages of a FUSE request. The total is every request's; the others
// need a source that sees the daemon take the request and write its reply.
const (
	StageTotal  Stage = "total"  // sent by the kernel -> reply complete
	StageQueue  Stage = "queue"  // sent -> taken by the daemon from /dev/fuse
	StageDaemon Stage = "daemon" // taken -> reply written by the daemon
	StageReply  Stage = "reply"  // reply written -> complete in the kernel
)

// StageLatency is the histogram of one stage of one opcode's requests.
type StageLatency struct {
	Stage   Stage     `json:"stage"`
	Latency hist.Hist `json:"latency"` // ns
}

// Stage returns the histogram of a stage, or nil if it was not measured.
func (s *OpStats) Stage(st Stage) *hist.Hist {
	if st == StageTotal {
		return &s.Latency
	}
	for i := range s.Stages {
		if s.Stages[i].Stage == st {
			return &s.Stages[i].Latency
		}
	}
	return nil
}

// HasStages says whether any operation's requests were split into stages.
func (p *Profile) HasStages() bool {
	for i := range p.Ops {
		if len(p.Ops[i].Stages) > 0 {
			return true
		}
	}
	return false
}

// Drops counts what the tracer saw but could not account for.
type Drops struct {
	InflightFull   uint64 `json:"inflight_full"`         // sends not timed: both in-flight slots busy
	UnmatchedEnd   uint64 `json:"unmatched_end"`         // ends of requests sent before tracing began
	StatsFull      uint64 `json:"stats_full"`            // ends lost: no room for a new (conn, opcode)
	ErrnoFull      uint64 `json:"errno_full"`            // errors not broken down by errno
	UniqueZero     uint64 `json:"unique_zero"`           // sends without a request id (kernel < 6.18)
	ReapedConnGone uint64 `json:"reaped_conn_gone"`      // still in flight on connections that went away: never to end
	ReapedStale    uint64 `json:"reaped_stale"`          // in flight beyond the reap age; their slots were reused
	StagesFull     uint64 `json:"stages_full,omitempty"` // requests timed in total only: no room for a new (conn, opcode)'s stages
	NodesFull      uint64 `json:"nodes_full,omitempty"`  // --files: requests not summed by file: no room for a new (conn, node)
}

// Lost is the number of requests that are missing from the statistics.
func (d Drops) Lost() uint64 {
	return d.InflightFull + d.StatsFull + d.ReapedConnGone + d.ReapedStale
}

// Profile is a set of per-opcode statistics.
type Profile struct {
	Ops   []OpStats `json:"ops"`
	Drops Drops     `json:"drops"`
}

// MarshalJSON writes ops as an array even when there are none (a quiet
// interval), never null, so that jq's .profile.ops[] works on any record.
func (p Profile) MarshalJSON() ([]byte, error) {
	type plain Profile // without this method
	q := plain(p)
	if q.Ops == nil {
		q.Ops = []OpStats{}
	}
	return json.Marshal(q)
}

// Add sums o's requests into s (the same opcode, on another mount or in
// another interval); s shares nothing with o afterwards.
func (s *OpStats) Add(o *OpStats) {
	s.Count += o.Count
	s.Errors += o.Errors
	s.ReqBytes += o.ReqBytes
	s.ReplyBytes += o.ReplyBytes
	s.URing += o.URing
	if s.Latency.Count == 0 && s.Latency.Fine == nil {
		s.Latency = o.Latency.Clone()
	} else {
		s.Latency.Merge(&o.Latency)
	}
	for k, n := range o.Errnos {
		if s.Errnos == nil {
			s.Errnos = map[string]uint64{}
		}
		s.Errnos[k] += n
	}
	for _, st := range o.Stages {
		if h := s.Stage(st.Stage); h != nil {
			h.Merge(&st.Latency)
		} else {
			s.Stages = append(s.Stages, StageLatency{Stage: st.Stage, Latency: st.Latency.Clone()})
		}
	}
}

// Key identifies an OpStats within a profile.
type Key struct {
	Conn   uint32
	Opcode uint32
}

// Key returns the statistics' identity.
func (s *OpStats) Key() Key { return Key{s.Conn, s.Opcode} }

// Find returns the statistics for (conn, op), or nil.
func (p *Profile) Find(conn uint32, op fuseproto.Opcode) *OpStats {
	for i := range p.Ops {
		if p.Ops[i].Conn == conn && p.Ops[i].Opcode == uint32(op) {
			return &p.Ops[i]
		}
	}
	return nil
}

// Transports of FUSE requests: read from and written to /dev/fuse, or
// carried by FUSE over io_uring's ring (Linux 6.14 on).
const (
	TransportDevFuse = "/dev/fuse"
	TransportURing   = "io_uring"
	TransportBoth    = "io_uring and /dev/fuse"
)

// Transport says which transport carried a connection's requests, and how
// many of them (ring) of all the ring carried; "" for a connection with no
// requests. A daemon that asked for the ring where the kernel did not
// start it (its fallback) is /dev/fuse's.
func (p *Profile) Transport(conn uint32) (name string, ring, all uint64) {
	for i := range p.Ops {
		if p.Ops[i].Conn == conn {
			ring += p.Ops[i].URing
			all += p.Ops[i].Count
		}
	}
	return TransportOf(ring, all), ring, all
}

// TransportOf names the transport of all requests of which ring came over
// FUSE over io_uring's ring; "" for none.
func TransportOf(ring, all uint64) string {
	switch {
	case all == 0:
		return ""
	case ring == 0:
		return TransportDevFuse
	case ring >= all:
		return TransportURing
	}
	return TransportBoth
}

// TotalNs is the time spent in all requests of the profile.
func (p *Profile) TotalNs() uint64 {
	var t uint64
	for i := range p.Ops {
		t += p.Ops[i].Latency.Sum
	}
	return t
}

// SortByTime orders the statistics by total time, largest first, then by
// connection and opcode so that output is stable.
func (p *Profile) SortByTime() {
	sort.SliceStable(p.Ops, func(i, j int) bool {
		a, b := &p.Ops[i], &p.Ops[j]
		if a.Latency.Sum != b.Latency.Sum {
			return a.Latency.Sum > b.Latency.Sum
		}
		if a.Conn != b.Conn {
			return a.Conn < b.Conn
		}
		return a.Opcode < b.Opcode
	})
}

// Sub returns p - earlier for two snapshots of one cumulative profile: what
// happened in the interval between them. Statistics with no requests in the
// interval are left out.
func (p *Profile) Sub(earlier *Profile) (Profile, error) {
	prev := make(map[Key]*OpStats, len(earlier.Ops))
	for i := range earlier.Ops {
		prev[earlier.Ops[i].Key()] = &earlier.Ops[i]
	}
	out := Profile{Drops: subDrops(p.Drops, earlier.Drops)}
	for i := range p.Ops {
		cur := p.Ops[i]
		if old, ok := prev[cur.Key()]; ok {
			lat, err := cur.Latency.Sub(&old.Latency)
			if err != nil {
				return Profile{}, err
			}
			cur.Latency = lat
			if cur.Stages, err = subStages(cur.Stages, old.Stages); err != nil {
				return Profile{}, err
			}
			cur.Count -= old.Count
			cur.Errors -= old.Errors
			cur.ReqBytes -= old.ReqBytes
			cur.ReplyBytes -= old.ReplyBytes
			cur.URing -= min(old.URing, cur.URing)
			cur.StageGaps.NotTaken -= old.StageGaps.NotTaken
			cur.StageGaps.NotReplied -= old.StageGaps.NotReplied
			cur.Errnos = subCounts(cur.Errnos, old.Errnos)
		}
		if cur.Count > 0 {
			out.Ops = append(out.Ops, cur)
		}
	}
	return out, nil
}

func subStages(cur, old []StageLatency) ([]StageLatency, error) {
	if len(cur) == 0 {
		return nil, nil
	}
	out := make([]StageLatency, 0, len(cur))
	for _, s := range cur {
		for _, o := range old {
			if o.Stage == s.Stage {
				lat, err := s.Latency.Sub(&o.Latency)
				if err != nil {
					return nil, fmt.Errorf("stage %s: %w", s.Stage, err)
				}
				s.Latency = lat
			}
		}
		out = append(out, s)
	}
	return out, nil
}

func subCounts(cur, old map[string]uint64) map[string]uint64 {
	if len(cur) == 0 {
		return nil
	}
	out := make(map[string]uint64, len(cur))
	for k, v := range cur {
		if d := v - old[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// Add sums the drops of a later window of the same run into d: the
// counters, and the requests stranded at its end, which are the later
// window's.
func (d *Drops) Add(o Drops) {
	d.InflightFull += o.InflightFull
	d.UnmatchedEnd += o.UnmatchedEnd
	d.StatsFull += o.StatsFull
	d.ErrnoFull += o.ErrnoFull
	d.UniqueZero += o.UniqueZero
	d.ReapedConnGone = o.ReapedConnGone
	d.ReapedStale += o.ReapedStale
	d.StagesFull += o.StagesFull
	d.NodesFull += o.NodesFull
}

func subDrops(a, b Drops) Drops {
	return Drops{
		InflightFull:   a.InflightFull - b.InflightFull,
		UnmatchedEnd:   a.UnmatchedEnd - b.UnmatchedEnd,
		StatsFull:      a.StatsFull - b.StatsFull,
		ErrnoFull:      a.ErrnoFull - b.ErrnoFull,
		UniqueZero:     a.UniqueZero - b.UniqueZero,
		ReapedConnGone: a.ReapedConnGone, // a count at the window's end, not a counter
		ReapedStale:    a.ReapedStale - b.ReapedStale,
		StagesFull:     a.StagesFull - b.StagesFull,
		NodesFull:      a.NodesFull - b.NodesFull,
	}
}
