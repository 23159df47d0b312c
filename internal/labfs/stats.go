package labfs

import (
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// opStats is the daemon's record of one opcode.
type opStats struct {
	mu     sync.Mutex
	lat    hist.Hist
	errors uint64
	errnos map[string]uint64
	in     uint64 // request bytes, headers included (in.h.len)
	out    uint64 // reply bytes, headers included (out.h.len)
}

// daemonStats holds every opcode's statistics; indexed by opcode.
type daemonStats struct {
	ops [64]opStats
}

func (d *daemonStats) record(op fuseproto.Opcode, took time.Duration, errno string, in uint32, out int) {
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
	s.in += uint64(in)
	s.out += uint64(max(out, 0))
	s.mu.Unlock()
}

// outHeaderSize is a reply's fuse_out_header.
const outHeaderSize = int(unsafe.Sizeof(fuse.OutHeader{}))

// replyStruct is the size of the structure that follows the out header in
// a successful reply of op, as go-fuse writes it (fuse/opcode.go); what a
// reply carries after it (READ's data, a READDIR's entries...) comes on top,
// and an xattr reply's, whose structure depends on the request, is its
// handler's (xattrReply).
func replyStruct(op fuseproto.Opcode) int {
	switch op {
	case fuseproto.Lookup, fuseproto.Mknod, fuseproto.Mkdir, fuseproto.Symlink, fuseproto.Link:
		return int(unsafe.Sizeof(fuse.EntryOut{}))
	case fuseproto.Getattr, fuseproto.Setattr:
		return int(unsafe.Sizeof(fuse.AttrOut{}))
	case fuseproto.Open, fuseproto.Opendir:
		return int(unsafe.Sizeof(fuse.OpenOut{}))
	case fuseproto.Create, fuseproto.Tmpfile:
		return int(unsafe.Sizeof(fuse.CreateOut{}))
	case fuseproto.Write, fuseproto.CopyFileRange:
		return int(unsafe.Sizeof(fuse.WriteOut{}))
	case fuseproto.Statfs:
		return int(unsafe.Sizeof(fuse.StatfsOut{}))
	case fuseproto.Getlk:
		return int(unsafe.Sizeof(fuse.LkOut{}))
	case fuseproto.Lseek:
		return int(unsafe.Sizeof(fuse.LseekOut{}))
	case fuseproto.Statx:
		return int(unsafe.Sizeof(fuse.StatxOut{}))
	}
	return 0
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
// machine: the instrumentation's own cost per request, which the daemon's
// timings include and a reader subtracts when comparing them.
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
