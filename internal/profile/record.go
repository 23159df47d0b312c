package profile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
)

// Schema names the record format and its version (docs/record.md). A change
// that breaks readers gets a new version; loaders refuse versions they do not
// know.
const Schema = "fusescope.record/v1"

// Record is a saved profile with the metadata that makes it comparable.
type Record struct {
	Schema  string  `json:"schema"`
	Meta    Meta    `json:"meta"`
	Profile Profile `json:"profile"`
	// Slow holds the requests that took at least trace --slower, in the
	// order they ended (the interval's, in an interval record); SlowLost
	// counts those it does not hold: the kernel's ring buffer was full, or
	// the record already held MaxSlow.
	Slow     []SlowRequest `json:"slow,omitempty"`
	SlowLost uint64        `json:"slow_lost,omitempty"`
}

// MaxSlow is the most slow requests one record holds.
const MaxSlow = 100000

// SlowRequest is one request that took at least trace --slower: sent whole
// by the kernel, not aggregated.
type SlowRequest struct {
	End        time.Time     `json:"end"` // when its reply was complete
	Latency    time.Duration `json:"latency_ns"`
	Conn       uint32        `json:"conn"`
	Op         string        `json:"op"`
	Opcode     uint32        `json:"opcode"`
	NodeID     uint64        `json:"node_id"`         // the inode it was about (0 on the classic tracepoints, and for requests about none)
	PID        uint32        `json:"pid"`             // the requesting thread, as the daemon sees it
	Comm       string        `json:"comm"`            // its command, when the request was sent
	ReqBytes   uint32        `json:"req_bytes"`       // FUSE headers included, as in the profile
	ReplyBytes uint32        `json:"reply_bytes"`     //
	Errno      string        `json:"errno,omitempty"` // "ENOENT"; empty when the request succeeded
	Mount      string        `json:"mount_point,omitempty"`
}

// Meta says where, when and how a profile was measured.
type Meta struct {
	Tool    string    `json:"tool"`   // fusescope version
	Source  string    `json:"source"` // what measured it, e.g. "kernel:fuse_request"
	Kernel  string    `json:"kernel"` // uname -r
	Host    string    `json:"host"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Command []string  `json:"command"`
	Filters Filters   `json:"filters"`
	Mounts  []Mount   `json:"mounts"`
	FS      *FSInfo   `json:"fs,omitempty"` // the lab file system's own view, when it made the record
}

// FSInfo is what the lab file system (fusescope fs) knows about itself.
type FSInfo struct {
	Source        string            `json:"source"`         // the directory it passes through to
	Config        json.RawMessage   `json:"config"`         // its configuration (docs/labfs.md)
	Flags         []string          `json:"flags"`          // the same, as fusescope fs mount flags over the default preset
	Offered       []string          `json:"init_offered"`   // INIT flags the kernel offered
	Requested     []string          `json:"init_requested"` // INIT flags the daemon asked for
	Negotiated    []string          `json:"init_negotiated"`
	MaxWrite      uint32            `json:"max_write"`
	MaxPages      uint16            `json:"max_pages"`     // largest request, in pages
	MaxReadahead  uint32            `json:"max_readahead"` // the kernel's offer, capped by --max-readahead
	MaxBackground uint16            `json:"max_background"`
	Congestion    uint16            `json:"congestion_threshold"`
	TimerNs       float64           `json:"timer_overhead_ns"` // cost of the timing around each request
	HeapBytes     uint64            `json:"heap_bytes"`
	Requests      uint64            `json:"requests"`
	Counters      map[string]uint64 `json:"counters,omitempty"` // caches' hits and misses, inodes...
}

// Filters records which requests were kept.
type Filters struct {
	PID   int      `json:"pid,omitempty"`
	Comm  string   `json:"comm,omitempty"`
	Ops   []string `json:"ops,omitempty"`
	Conns []uint32 `json:"conns,omitempty"` // empty: every FUSE connection
}

// Mount describes one FUSE connection and where it is mounted.
type Mount struct {
	Conn       uint32    `json:"conn"` // /sys/fs/fuse/connections/N
	MountPoint string    `json:"mount_point,omitempty"`
	FSType     string    `json:"fs_type,omitempty"`
	Source     string    `json:"source,omitempty"`
	Options    string    `json:"options,omitempty"` // per-mount and super-block options
	Connection *ConnInfo `json:"connection,omitempty"`
}

// ConnInfo is what /sys/fs/fuse/connections/N shows.
type ConnInfo struct {
	Waiting             uint64 `json:"waiting"`
	MaxBackground       uint64 `json:"max_background"`
	CongestionThreshold uint64 `json:"congestion_threshold"`
	// Aborted: the connection was aborted (its daemon died, or it was
	// aborted through fusectl); no request reaches a daemon any more.
	Aborted bool `json:"aborted,omitempty"`
}

// Label names a connection for people: its mount point, or conn N.
func (r *Record) Label(conn uint32) string {
	if m := r.Mount(conn); m != nil && m.MountPoint != "" {
		return m.MountPoint
	}
	return fmt.Sprintf("conn %d", conn)
}

// Mount returns the mount of a connection, or nil.
func (r *Record) Mount(conn uint32) *Mount {
	for i := range r.Meta.Mounts {
		if r.Meta.Mounts[i].Conn == conn {
			return &r.Meta.Mounts[i]
		}
	}
	return nil
}

// Write saves the record as indented JSON.
func (r *Record) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Load reads a record and checks it; the error says what is wrong.
func Load(path string) (*Record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// Parse decodes and validates a record.
// ParseAll loads one record, or the records of an interval trace's --json
// output (one per line, or any JSON whitespace between them), in order.
func ParseAll(b []byte) ([]*Record, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	var raws []json.RawMessage
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			break
		} else if err != nil {
			if len(raws) == 0 {
				return nil, fmt.Errorf("not a fusescope record: %w", err)
			}
			return nil, fmt.Errorf("record %d: not a fusescope record: %w", len(raws)+1, err)
		}
		raws = append(raws, raw)
	}
	if len(raws) == 0 {
		return nil, fmt.Errorf("not a fusescope record: it is empty")
	}
	recs := make([]*Record, len(raws))
	for i, raw := range raws {
		r, err := Parse(raw)
		if err != nil {
			if len(raws) > 1 {
				err = fmt.Errorf("record %d of %d: %w", i+1, len(raws), err)
			}
			return nil, err
		}
		recs[i] = r
	}
	return recs, nil
}

func Parse(b []byte) (*Record, error) {
	var head struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("not a fusescope record: %w", err)
	}
	if head.Schema != Schema {
		if strings.HasPrefix(head.Schema, "fusescope.record/") {
			return nil, fmt.Errorf("record schema %q is not supported by this fusescope (it reads %q)", head.Schema, Schema)
		}
		if strings.HasPrefix(head.Schema, "fusescope.syscalls/") {
			return nil, fmt.Errorf("a fusescope syscalls report (schema %q), not a record of FUSE requests: render it with fusescope show", head.Schema)
		}
		return nil, fmt.Errorf("not a fusescope record (schema %q, want %q)", head.Schema, Schema)
	}
	var r Record
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("malformed record: %w", err)
	}
	seen := make(map[Key]bool, len(r.Profile.Ops))
	for i := range r.Profile.Ops {
		s := &r.Profile.Ops[i]
		if s.Count != s.Latency.Count {
			return nil, fmt.Errorf("malformed record: %s on conn %d counts %d requests but its histogram %d", s.Op, s.Conn, s.Count, s.Latency.Count)
		}
		if s.Errors > s.Count {
			return nil, fmt.Errorf("malformed record: %s on conn %d has more errors (%d) than requests (%d)", s.Op, s.Conn, s.Errors, s.Count)
		}
		if want := fuseproto.Opcode(s.Opcode).String(); s.Op != want {
			return nil, fmt.Errorf("malformed record: opcode %d is named %q, want %q", s.Opcode, s.Op, want)
		}
		if seen[s.Key()] {
			return nil, fmt.Errorf("malformed record: %s on conn %d appears twice", s.Op, s.Conn)
		}
		seen[s.Key()] = true
	}
	return &r, nil
}
