package labfs

import (
	"runtime"
	"sync"
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
)

// opStats is the daemon's record of one opcode.
type opStats struct {
	mu     sync.Mutex
	lat    hist.Hist
	errors uint64
	errnos map[string]uint64
	in     uint64 // request data bytes (WRITE)
	out    uint64 // reply data bytes (READ, READDIR...)
}

// daemonStats holds every opcode's statistics; indexed by opcode.
type daemonStats struct {
	ops [64]opStats
}

func (d *daemonStats) record(op fuseproto.Opcode, took time.Duration, errno string, in, out int) {
	if int(op) >= len(d.ops) {
		return
	}
	s := &d.ops[op]
	s.mu.Lock()
	s.lat.Add(uint64(took))
	if errno != "" {
		s.errors++
		if s.errnos == nil {
			s.errnos = map[string]uint64{}
		}
		s.errnos[errno]++
	}
	s.in += uint64(max(in, 0))
	s.out += uint64(max(out, 0))
	s.mu.Unlock()
}

// profile returns the daemon's statistics as a profile on connection conn.
func (d *daemonStats) profile(conn uint32) profile.Profile {
	var p profile.Profile
	for i := range d.ops {
		s := &d.ops[i]
		s.mu.Lock()
		if s.lat.Count > 0 {
			o := profile.OpStats{
				Conn: conn, Opcode: uint32(i), Op: fuseproto.Opcode(i).String(),
				Count: s.lat.Count, Errors: s.errors, ReqBytes: s.in, ReplyBytes: s.out, Latency: s.lat.Clone(),
			}
			if len(s.errnos) > 0 {
				o.Errnos = map[string]uint64{}
				for k, v := range s.errnos {
					o.Errnos[k] = v
				}
			}
			p.Ops = append(p.Ops, o)
		}
		s.mu.Unlock()
	}
	return p
}

// TimerOverhead measures what one request's clock reads cost on this
// machine: the instrumentation's own cost per request (seed 000's Figure 8).
func TimerOverhead() time.Duration {
	const n = 20000
	start := monotonic()
	var last time.Duration
	for i := 0; i < n; i++ {
		last = monotonic()
	}
	return (last - start) * 2 / n // a request reads the clock twice
}

// memoryBytes is the daemon's heap in use.
func memoryBytes() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
