package profile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/fusescope/fusescope/internal/hist"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fusescope/fusescope/internal/fuseproto"
)

// Schema names the record format and its major version (docs/record.md).
// Within a major version fields and sections are only added, and readers
// ignore the ones they do not know; a change that breaks readers gets a
// new major version, which older readers refuse in one line.
const Schema = "fusescope.record/v2"

// Earlier formats this version reads and upgrades: records of the first
// version, and system-call reports from before records held them.
const (
	SchemaV1         = "fusescope.record/v1"
	SyscallsSchemaV1 = "fusescope.syscalls/v1"
)

// schemaPrefix starts every record format's name; the major version follows.
const schemaPrefix = "fusescope.record/v"

// Record is a saved profile with the metadata that makes it comparable.
type Record struct {
	Schema string `json:"schema"`
	Meta   Meta   `json:"meta"`
	// Profile is the FUSE requests' statistics, in every record a FUSE
	// source made (trace, fs stats); a record of system calls alone has
	// none.
	Profile Profile `json:"profile"`
	// Slow holds the requests that took at least trace --slower, in the
	// order they ended (the interval's, in an interval record); SlowLost
	// counts those it does not hold: the kernel's ring buffer was full, or
	// the record already held MaxSlow.
	Slow     []SlowRequest `json:"slow,omitempty"`
	SlowLost uint64        `json:"slow_lost,omitempty"`
	// Hung holds the requests in flight longer than trace --hung when the
	// record was made, oldest first.
	Hung []HungRequest `json:"hung,omitempty"`
	// Files holds the files the most FUSE time went to (trace --files N),
	// most first.
	Files []FileStats `json:"files,omitempty"`

	// The optional sections: each is present when a source filled it.
	// PageCache is each traced mount's page cache (trace --page-cache).
	PageCache []PageCache `json:"page_cache,omitempty"`
	// Calls are the application's file calls on the traced mounts (trace
	// --calls), each joined to the FUSE requests it sent, most time first.
	Calls []CallStats `json:"calls,omitempty"`
	// Syscalls is the system-call report (fusescope syscalls).
	Syscalls *SyscallReport `json:"syscalls,omitempty"`
	// Bench is a bench run (fusescope bench).
	Bench *BenchReport `json:"bench,omitempty"`
	// Functions are the calls of kernel functions (fusescope kfunc).
	Functions *KernelFunctions `json:"kernel_functions,omitempty"`
	// DaemonFunctions are the calls of a program's or a library's own
	// functions (fusescope ufunc), in the same form.
	DaemonFunctions *KernelFunctions `json:"daemon_functions,omitempty"`
	// Programs are the tracer's own BPF programs' cost so far, as the
	// kernel accounts it (kernel.bpf_stats_enabled; export turns it on).
	Programs []ProgramCost `json:"programs,omitempty"`
	// Findings are what fusescope doctor concluded from the record.
	Findings *Findings `json:"findings,omitempty"`
}

// ProgramCost is the time the kernel spent in one of the tracer's BPF
// programs, and how many times it ran.
type ProgramCost struct {
	Program string        `json:"program"`
	Runtime time.Duration `json:"runtime_ns"`
	Runs    uint64        `json:"runs"`
}

// HasRequests tells whether the record holds FUSE request statistics (a
// quiet interval of a trace does, with no opcode in them); a record of
// system calls, or of kernel functions, alone does not.
func (r *Record) HasRequests() bool {
	return (r.Syscalls == nil && r.Bench == nil && r.Functions == nil && r.DaemonFunctions == nil) || len(r.Profile.Ops) > 0
}

// MarshalJSON leaves out the request statistics of a record that has none.
func (r Record) MarshalJSON() ([]byte, error) { return json.Marshal(r.jsonView()) }

// jsonView is what a record's JSON holds: r without its request
// statistics when it has none, the system-call report's lists never null.
func (r *Record) jsonView() any {
	type plain Record // without the MarshalJSON method
	c := plain(*r)
	if c.Syscalls != nil {
		c.Syscalls = c.Syscalls.withLists()
	}
	if r.HasRequests() {
		return &c
	}
	return &struct {
		*plain
		Profile *Profile `json:"profile,omitempty"` // shadows plain's
	}{plain: &c}
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
	// File is the path in its mount of the node it was about, "" when its
	// name is not known (looked up before the trace began).
	File string `json:"file,omitempty"`
	// Stages are its queue, daemon and reply times (trace --stages), in
	// that order; none when its passage through the daemon was not seen.
	Stages []time.Duration `json:"stages_ns,omitempty"`
	// Interval is the tracer's number of the interval it ended in: what
	// interval mode splits the requests by (not kept in records).
	Interval uint32 `json:"-"`
}

// CallStats is one system call of the application on the traced mounts:
// how often, how long, and how much of it the FUSE requests it sent took.
type CallStats struct {
	Syscall string `json:"syscall"`
	Count   uint64 `json:"count"`
	Errors  uint64 `json:"errors"`
	// WithRequests counts the calls that sent at least one FUSE request;
	// the others were served by the kernel's caches alone.
	WithRequests uint64 `json:"with_requests"`
	Requests     uint64 `json:"requests"`
	// FuseNs is the time the calls waited for their requests (the last
	// request a thread sent in a call, which it waits for).
	FuseNs  uint64    `json:"fuse_ns"`
	Latency hist.Hist `json:"latency"` // the calls', entry to exit, ns
}

// Add sums o's calls of the same system call into c (another interval of
// one run); c shares nothing with o afterwards.
func (c *CallStats) Add(o *CallStats) {
	if c.Latency.Count == 0 && c.Latency.Fine == nil {
		c.Latency = o.Latency.Clone()
	} else {
		c.Latency.Merge(&o.Latency)
	}
	c.Count += o.Count
	c.Errors += o.Errors
	c.WithRequests += o.WithRequests
	c.Requests += o.Requests
	c.FuseNs += o.FuseNs
}

// SubCalls is what the calls did since prev, cumulative snapshots.
func SubCalls(cur, prev []CallStats) []CallStats {
	if cur == nil {
		return nil
	}
	old := map[string]CallStats{}
	for _, c := range prev {
		old[c.Syscall] = c
	}
	out := []CallStats{}
	for _, c := range cur {
		o, ok := old[c.Syscall]
		if ok {
			lat, err := c.Latency.Sub(&o.Latency)
			if err != nil {
				continue
			}
			c.Latency = lat
			c.Count, c.Errors = c.Count-o.Count, c.Errors-o.Errors
			c.WithRequests, c.Requests, c.FuseNs = c.WithRequests-o.WithRequests, c.Requests-o.Requests, c.FuseNs-o.FuseNs
		}
		if c.Count > 0 {
			out = append(out, c)
		}
	}
	return out
}

// PageCache is one FUSE mount's page cache over a record's window, in pages
// (trace --page-cache: the filemap and readahead tracepoints).
type PageCache struct {
	Conn  uint32 `json:"conn"`
	Mount string `json:"mount_point,omitempty"`
	// Reads are the buffered reads' lookups in the cache, ReadPages the
	// pages they asked for; reads with direct_io make none.
	Reads     uint64 `json:"reads"`
	ReadPages uint64 `json:"read_pages"`
	// Added: pages put in the cache (a read's miss, read-ahead, a write to
	// a page not cached); Removed: taken out (evicted, truncated,
	// invalidated).
	Added   uint64 `json:"added"`
	Removed uint64 `json:"removed"`
	// Read-ahead windows, started by a miss (sync) or by reaching a marked
	// page (async), and the pages they asked for.
	ReadaheadSync  uint64 `json:"readahead_sync"`
	ReadaheadAsync uint64 `json:"readahead_async"`
	ReadaheadPages uint64 `json:"readahead_pages"`
	// NoReadahead: the kernel has no readahead tracepoints (before
	// Linux 6.18), so the three counts above were not measured.
	NoReadahead bool `json:"readahead_unavailable,omitempty"`
}

// Add sums what a later window of the same mount saw into pc.
func (pc *PageCache) Add(o PageCache) {
	if o.Mount != "" {
		pc.Mount = o.Mount
	}
	pc.Reads += o.Reads
	pc.ReadPages += o.ReadPages
	pc.Added += o.Added
	pc.Removed += o.Removed
	pc.ReadaheadSync += o.ReadaheadSync
	pc.ReadaheadAsync += o.ReadaheadAsync
	pc.ReadaheadPages += o.ReadaheadPages
	pc.NoReadahead = pc.NoReadahead || o.NoReadahead
}

// Sub is what happened between an earlier snapshot and pc.
func (pc PageCache) Sub(earlier PageCache) PageCache {
	return PageCache{Conn: pc.Conn, Mount: pc.Mount, Reads: pc.Reads - earlier.Reads, ReadPages: pc.ReadPages - earlier.ReadPages,
		Added: pc.Added - earlier.Added, Removed: pc.Removed - earlier.Removed,
		ReadaheadSync: pc.ReadaheadSync - earlier.ReadaheadSync, ReadaheadAsync: pc.ReadaheadAsync - earlier.ReadaheadAsync,
		ReadaheadPages: pc.ReadaheadPages - earlier.ReadaheadPages, NoReadahead: pc.NoReadahead}
}

// PageCacheHitRatio is the share of the pages read on pc's mount that its
// page cache served: hits are the pages buffered reads asked the cache for,
// less the pages added meanwhile (a miss, or read-ahead); misses are the
// pages FUSE READs fetched from the daemon (with direct_io every read's,
// since those never ask the cache). ok is false when nothing was read.
func (r *Record) PageCacheHitRatio(pc PageCache) (ratio float64, ok bool) {
	hits := uint64(0)
	if pc.ReadPages > pc.Added {
		hits = pc.ReadPages - pc.Added
	}
	var misses uint64
	if s := r.Profile.Find(pc.Conn, fuseproto.Read); s != nil {
		data := s.ReplyBytes - min(s.ReplyBytes, 16*s.Count) // less each reply's header
		misses = (data + 4095) / 4096
	}
	if hits+misses == 0 {
		return 0, false
	}
	return float64(hits) / float64(hits+misses), true
}

// FileStats are the FUSE requests about one file (node) of one mount.
type FileStats struct {
	Conn  uint32 `json:"conn"`
	Node  uint64 `json:"node_id"`
	Path  string `json:"path,omitempty"` // in its mount, "/dir/file"; absent when its name is not known
	Mount string `json:"mount_point,omitempty"`
	Count uint64 `json:"count"`
	// Errors counts the requests answered with an error.
	Errors uint64        `json:"errors"`
	Total  time.Duration `json:"total_ns"`
	Max    time.Duration `json:"max_ns"`
}

// HungRequest is a request in flight for longer than trace --hung when a
// record was made: a daemon that stopped answering shows here, where the
// statistics, which count requests when they end, show nothing.
type HungRequest struct {
	Conn   uint32        `json:"conn"`
	Op     string        `json:"op"`
	Opcode uint32        `json:"opcode"`
	Age    time.Duration `json:"age_ns"` // since the kernel sent it
	PID    uint32        `json:"pid"`    // the requesting thread, as the daemon sees it (0: the kernel's own)
	Comm   string        `json:"comm,omitempty"`
	// Stage is where it waits: "queued" (not yet read by the daemon) or
	// "daemon" (read, no reply yet), with trace --stages; "" without.
	Stage string `json:"stage,omitempty"`
	Mount string `json:"mount_point,omitempty"`
	// ThreadState is the requesting thread's state (/proc's: D, S...)
	// when fusescope doctor looked; "" when not looked at, or gone.
	ThreadState string `json:"thread_state,omitempty"`
}

// Meta says where, when and how a profile was measured.
type Meta struct {
	Tool    string    `json:"tool"`             // fusescope version
	Source  string    `json:"source"`           // what measured it, e.g. "kernel:fuse_request"
	Kernel  string    `json:"kernel,omitempty"` // uname -r; "" for a log analysed elsewhere
	Host    string    `json:"host,omitempty"`
	Start   time.Time `json:"start,omitzero"` // of the measurement; none for a log analysed afterwards
	End     time.Time `json:"end,omitzero"`
	Command []string  `json:"command,omitempty"` // the fusescope command line that made the record
	Filters Filters   `json:"filters,omitzero"`
	Mounts  []Mount   `json:"mounts,omitempty"`
	FS      *FSInfo   `json:"fs,omitempty"` // the lab file system's own view, when it made the record
	// FuseURing says the kernel had FUSE over io_uring enabled
	// (/sys/module/fuse/parameters/enable_uring) while trace --stages ran:
	// requests its ring carries are never read from /dev/fuse.
	FuseURing bool `json:"fuse_uring_enabled,omitempty"`
	// Measured names the optional sections the run measured (Measured*),
	// so that an empty one reads as none found, not as not measured.
	Measured []string `json:"measured,omitempty"`
	// Probes says how the kernel probes attached (tp_btf, tracepoint)
	// and found requests, with why where that is not the default, e.g.
	// "tp_btf; requests found by their address: ...".
	Probes string `json:"probes,omitempty"`
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

// The optional measurements a record's Meta.Measured names.
const (
	MeasuredStages    = "stages"     // trace --stages
	MeasuredCalls     = "calls"      // trace --calls
	MeasuredPageCache = "page_cache" // trace --page-cache
	MeasuredHung      = "hung"       // trace --hung
	MeasuredFiles     = "files"      // trace --files
	MeasuredSlow      = "slow"       // trace --slower
	MeasuredForgets   = "forgets"    // trace --stages, where the daemons' reads are timed
)

// Measures says whether the run measured one of the Measured* sections.
func (m *Meta) Measures(what string) bool { return slices.Contains(m.Measured, what) }

// Mount describes one FUSE connection and where it is mounted.
type Mount struct {
	Conn       uint32    `json:"conn"` // /sys/fs/fuse/connections/N
	MountPoint string    `json:"mount_point,omitempty"`
	FSType     string    `json:"fs_type,omitempty"`
	Source     string    `json:"source,omitempty"`
	Options    string    `json:"options,omitempty"` // per-mount and super-block options
	Connection *ConnInfo `json:"connection,omitempty"`
	// Daemons are the processes that hold the connection's /dev/fuse when
	// the record was made: its daemon (several with clone_fd or a helper
	// that kept the fd).
	Daemons []Daemon `json:"daemons,omitempty"`
	// PassthroughOpens counts the opens its daemon answered with FUSE
	// passthrough while trace --stages ran: those files' reads and writes
	// go to the backing file in the kernel, no FUSE request, and appear in
	// no statistics.
	PassthroughOpens uint64 `json:"passthrough_opens,omitempty"`
	// Nodes counts the distinct files the mount's requests were about
	// (trace --files; by path where their names are known, else by
	// inode): with the application's calls, how often it came back to the
	// same files.
	Nodes uint64 `json:"nodes,omitempty"`
	// Forgets counts the FORGET and BATCH_FORGET requests its daemons
	// read (trace --stages, where the daemons' reads are timed: the fuse
	// tracepoints do not see them), ForgetNodes the nodes they forgot.
	Forgets     uint64 `json:"forgets,omitempty"`
	ForgetNodes uint64 `json:"forget_nodes,omitempty"`
	// Gone: the connection was no longer there when the record was made
	// (unmounted, or its daemon died); its statistics stay, its series
	// leave the exporter's output.
	Gone bool `json:"gone,omitempty"`
}

// Daemon is a process serving a FUSE connection.
type Daemon struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
	FDs  int    `json:"fds"` // its /dev/fuse fds on the connection
	// Watched is when trace --stages began timing its reads of requests
	// and writes of replies; its requests before then have no stages.
	Watched time.Time `json:"stages_watched,omitzero"`
	// Backing names the local file system (type and a path) of the
	// regular files or directories the daemon held open when fusescope
	// doctor looked: a daemon that could pass its files through.
	Backing string `json:"backing,omitempty"`
	// Args is its command line, as fusescope doctor saw it.
	Args []string `json:"args,omitempty"`
}

// ConnInfo is what /sys/fs/fuse/connections/N shows.
type ConnInfo struct {
	Waiting             uint64 `json:"waiting"`
	MaxBackground       uint64 `json:"max_background"`
	CongestionThreshold uint64 `json:"congestion_threshold"`
	// Aborted: the connection was aborted (its daemon died, or it was
	// aborted through fusectl); no request reaches a daemon any more.
	Aborted bool `json:"aborted,omitempty"`
	// Samples of waiting taken while fusescope doctor ran, every 10 ms:
	// how many, the most waiting, and how many found more waiting than
	// max_background (then background requests were held back in the
	// kernel's queue: waiting counts every request not yet ended).
	Samples         uint64 `json:"samples,omitempty"`
	WaitingPeak     uint64 `json:"waiting_peak,omitempty"`
	AboveBackground uint64 `json:"above_max_background,omitempty"`
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
	return enc.Encode(r.jsonView())
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

// Parse decodes and validates a record.
func Parse(b []byte) (*Record, error) {
	var head struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("not a fusescope record: %w", err)
	}
	var r Record
	switch head.Schema {
	case Schema:
		// Unknown fields are a later minor revision's: ignored.
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("malformed record: %w", err)
		}
	case SchemaV1:
		// v2 only added to v1: a v1 record decodes as it is, strictly.
		if err := decodeStrict(b, &r); err != nil {
			return nil, fmt.Errorf("malformed record: %w", err)
		}
		r.Syscalls = nil // not a v1 field
		r.Schema = Schema
	case SyscallsSchemaV1:
		var old struct {
			Schema string `json:"schema"`
			*SyscallReport
		}
		old.SyscallReport = &SyscallReport{}
		if err := decodeStrict(b, &old); err != nil {
			return nil, fmt.Errorf("malformed syscalls report: %w", err)
		}
		r = Record{Schema: Schema, Meta: Meta{Source: SourceSyscalls}, Syscalls: old.SyscallReport}
		if l := old.Live; l != nil {
			r.Meta.Command = l.Command
		}
	default:
		if major, ok := strings.CutPrefix(head.Schema, schemaPrefix); ok {
			return nil, fmt.Errorf("record schema %q is newer than this fusescope reads (%s and %s): read it with a newer fusescope, major version %s", head.Schema, SchemaV1, Schema, major)
		}
		return nil, fmt.Errorf("not a fusescope record (schema %q, want %q)", head.Schema, Schema)
	}
	if err := r.Profile.check(); err != nil {
		return nil, fmt.Errorf("malformed record: %w", err)
	}
	for _, fn := range []*KernelFunctions{r.Functions, r.DaemonFunctions} {
		if fn == nil {
			continue
		}
		if err := fn.check(); err != nil {
			return nil, fmt.Errorf("malformed record: %w", err)
		}
	}
	return &r, nil
}

// SourceSyscalls is the source named in a record upgraded from a v1
// system-call report, which did not say which of the two it came from.
const SourceSyscalls = "syscalls"

// decodeStrict refuses fields v points to no place for.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// check finds statistics that contradict themselves.
func (p *Profile) check() error {
	seen := make(map[Key]bool, len(p.Ops))
	for i := range p.Ops {
		s := &p.Ops[i]
		if s.Count != s.Latency.Count {
			return fmt.Errorf("%s on conn %d counts %d requests but its histogram %d", s.Op, s.Conn, s.Count, s.Latency.Count)
		}
		if s.Errors > s.Count {
			return fmt.Errorf("%s on conn %d has more errors (%d) than requests (%d)", s.Op, s.Conn, s.Errors, s.Count)
		}
		if want := fuseproto.Opcode(s.Opcode).String(); s.Op != want {
			return fmt.Errorf("opcode %d is named %q, want %q", s.Opcode, s.Op, want)
		}
		if seen[s.Key()] {
			return fmt.Errorf("%s on conn %d appears twice", s.Op, s.Conn)
		}
		seen[s.Key()] = true
		stages := map[Stage]bool{}
		for _, st := range s.Stages {
			if st.Stage == StageTotal || stages[st.Stage] {
				return fmt.Errorf("%s on conn %d: stage %q appears twice (the total is its latency)", s.Op, s.Conn, st.Stage)
			}
			stages[st.Stage] = true
			if st.Latency.Count > s.Count {
				return fmt.Errorf("%s on conn %d: stage %s counts %d requests of %d", s.Op, s.Conn, st.Stage, st.Latency.Count, s.Count)
			}
		}
	}
	return nil
}
