package ktrace

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/fusescope/fusescope/internal/bpf"
	"github.com/fusescope/fusescope/internal/option"
	"github.com/fusescope/fusescope/internal/profile"
)

// nameFeature learns node names (names.bpf.h) for --slower's lines and
// --files, whose end program also sums each node's requests in the kernel.
// Both read the request's node from tp_btf: the classic tracepoints carry
// none.
type nameFeature struct {
	files bool
	funcs *funcMech // on fuse_request_end's entry, not its tracepoint (funcs.go)
	prog  *ebpf.Program
	names *ringbuf.Reader
	known nodeNames // the names learnt so far
	// --files in interval mode: the nodes' sums at the previous interval.
	prev map[NodeKey]NodeStats
}

func (f *nameFeature) configure(p *loadPlan) (bool, error) {
	f.files = p.opts.Files
	if !f.files {
		p.unused("node_table")
	} else if p.opts.Attach == AttachTracepoint {
		return false, option.Errorf("{files} needs the raw tracepoints with BTF (the classic tracepoints carry no node id): leave out {attach} tracepoint")
	}
	p.files = f.files
	if p.opts.Slower <= 0 && !f.files {
		p.unused("names_sent", "node_names")
		return false, nil
	}
	if p.opts.Stages {
		p.consts["stage_names"] = uint8(1) // READDIRPLUS replies name their entries
	}
	return true, nil
}

// load loads the program that learns node names, sharing the request
// programs' maps. --slower alone on the classic tracepoints goes without
// names.
func (f *nameFeature) load(t *Tracer, spec *ebpf.CollectionSpec) error {
	var p struct {
		Prog *ebpf.Program `ebpf:"fuse_names"`
	}
	if f.funcs = t.funcs; f.funcs != nil {
		var err error
		if p.Prog, err = f.funcs.loadNames(t, spec); err != nil {
			return err
		}
	} else if t.attach != AttachBTF {
		if f.files {
			return option.Errorf("{files} needs the raw tracepoints with BTF (the classic tracepoints carry no node id), which did not load: %v", t.fallback)
		}
		return nil
	} else if err := spec.LoadAndAssign(&p, &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		"filter_conns": t.maps.FilterConns, "names_sent": t.maps.NamesSent, "node_names": t.maps.NodeNames,
	}}); err != nil {
		return kernelLacks(err, "the program that names files ({files}, {slower})")
	}
	r, err := ringbuf.NewReader(t.maps.NodeNames)
	if err != nil {
		p.Prog.Close()
		return fmt.Errorf("reading the file names: %w", err)
	}
	f.prog, f.names = p.Prog, r
	return nil
}

func (f *nameFeature) attach() ([]link.Link, error) {
	if f.prog == nil {
		return nil, nil
	}
	if f.funcs != nil {
		l, err := f.funcs.attachTo(endFunc, f.prog)
		if err != nil {
			return nil, err
		}
		return []link.Link{l}, nil
	}
	return attachTracing("the names program to fuse:fuse_request_end", f.prog)
}

func (f *nameFeature) close() error {
	var errs []error
	if f.names != nil {
		errs = append(errs, f.names.Close())
	}
	if f.prog != nil {
		errs = append(errs, f.prog.Close())
	}
	return errors.Join(errs...)
}

func (f *nameFeature) programs() map[string]*ebpf.Program {
	if f.prog == nil {
		return nil
	}
	return map[string]*ebpf.Program{"names:fuse_request_end": f.prog}
}

// Names says whether the tracer learns node names.
func (t *Tracer) Names() bool { return t.names != nil && t.names.names != nil }

// drainNames learns the names the kernel sent since the last call: each
// (connection, node)'s parent node and its name in that directory.
func (t *Tracer) drainNames() error {
	if !t.Names() {
		return nil
	}
	known := t.names.known
	return drain(t.names.names, "the file names", func(e *bpf.FuseReqNodeName) {
		known.add(e.Conn, e.Node, e.Parent, cString(e.Name[:]))
	})
}

// nodePath is a node's path in its mount, where its names are known.
func (t *Tracer) nodePath(conn uint32, node uint64) (string, bool) {
	if !t.Names() {
		return "", false
	}
	return t.names.known.path(conn, node)
}

// read learns the names sent since the last read and, with --files,
// lists the files with the most FUSE time, named where known; an
// interval's, by what they did since the previous interval.
func (f *nameFeature) read(t *Tracer, rd *recordRead) error {
	if err := t.drainNames(); err != nil {
		return err
	}
	if !f.files {
		return nil
	}
	nodes, err := t.nodeStats()
	if err != nil {
		return err
	}
	rd.whole.Files = f.top(nodes, rd)
	f.countFiles(rd.whole, nodes)
	if rd.interval != nil {
		since := subNodes(nodes, f.prev)
		rd.interval.Files = f.top(since, rd)
		f.countFiles(rd.interval, since)
		f.prev = nodes
	}
	return nil
}

// countFiles sets each mount's count of the files its requests were
// about: by path where the names are known, since a file the kernel
// forgot and looked up again may come back as another node.
func (f *nameFeature) countFiles(rec *profile.Record, nodes map[NodeKey]NodeStats) {
	type file struct {
		conn uint32
		path string
		node uint64
	}
	seen := map[file]bool{}
	per := map[uint32]uint64{}
	for k, n := range nodes {
		if n.Count == 0 {
			continue
		}
		id := file{conn: k.Conn, node: k.Node}
		if p, ok := f.known.path(k.Conn, k.Node); ok {
			id = file{conn: k.Conn, path: p}
		}
		if !seen[id] {
			seen[id] = true
			per[k.Conn]++
		}
	}
	for i := range rec.Meta.Mounts {
		rec.Meta.Mounts[i].Nodes = per[rec.Meta.Mounts[i].Conn]
	}
}

// top lists the rd.files nodes with the most FUSE time, named where known.
func (f *nameFeature) top(nodes map[NodeKey]NodeStats, rd *recordRead) []profile.FileStats {
	out := make([]profile.FileStats, 0, len(nodes))
	for k, n := range nodes {
		if n.Count == 0 {
			continue
		}
		fs := profile.FileStats{Conn: k.Conn, Node: k.Node, Mount: rd.labels.MountPoint(k.Conn),
			Count: n.Count, Errors: n.Errors, Total: n.Sum, Max: n.Max}
		fs.Path, _ = f.known.path(k.Conn, k.Node)
		out = append(out, fs)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Total != out[j].Total {
			return out[i].Total > out[j].Total
		}
		if out[i].Conn != out[j].Conn {
			return out[i].Conn < out[j].Conn
		}
		return out[i].Node < out[j].Node
	})
	return out[:min(len(out), rd.files)]
}

// subNodes is what the nodes did since prev: counts and sums subtract; the
// maximum is the run's so far (a bound for the interval's).
func subNodes(cur, prev map[NodeKey]NodeStats) map[NodeKey]NodeStats {
	out := make(map[NodeKey]NodeStats, len(cur))
	for k, c := range cur {
		p := prev[k]
		out[k] = NodeStats{Count: c.Count - p.Count, Errors: c.Errors - p.Errors, Sum: c.Sum - p.Sum, Max: c.Max}
	}
	return out
}

// cString is the string a C char array holds, up to its first NUL.
func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

// NodeKey is one node of one connection.
type NodeKey struct {
	Conn uint32
	Node uint64
}

// NodeStats are the requests about one node (--files).
type NodeStats struct {
	Count, Errors uint64
	Sum, Max      time.Duration
}

// nodeStats are each node's requests, summed over CPUs (--files).
func (t *Tracer) nodeStats() (map[NodeKey]NodeStats, error) {
	out := map[NodeKey]NodeStats{}
	var k bpf.FuseReqNodeKey
	var perCPU []bpf.FuseReqNodeStats
	it := t.maps.NodeTable.Iterate()
	for it.Next(&k, &perCPU) {
		var s NodeStats
		for _, c := range perCPU {
			s.Count += c.Count
			s.Errors += c.Errors
			s.Sum += time.Duration(c.SumNs)
			s.Max = max(s.Max, time.Duration(c.MaxNs))
		}
		out[NodeKey{Conn: k.Conn, Node: k.Node}] = s
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading the files' statistics: %w", err)
	}
	return out, nil
}
