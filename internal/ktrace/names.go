package ktrace

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/fusescope/fusescope/internal/bpf"
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
}

func (f *nameFeature) configure(p *loadPlan) (bool, error) {
	f.files = p.opts.Files
	if !f.files {
		p.unused("node_table")
	} else if p.opts.Attach == AttachTracepoint {
		return false, fmt.Errorf("--files needs the raw tracepoints with BTF (the classic tracepoints carry no node id): leave out --attach tracepoint")
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
			return fmt.Errorf("--files needs the raw tracepoints with BTF (the classic tracepoints carry no node id), which did not load: %v", t.fallback)
		}
		return nil
	} else if err := spec.LoadAndAssign(&p, &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		"filter_conns": t.maps.FilterConns, "names_sent": t.maps.NamesSent, "node_names": t.maps.NodeNames,
	}}); err != nil {
		return kernelLacks(err, "the program that names files (--files, --slower)")
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

// ReadNames calls fn with each (connection, node) the kernel named since
// the last call: its parent node and its name in that directory.
func (t *Tracer) ReadNames(fn func(conn uint32, node, parent uint64, name string)) error {
	if !t.Names() {
		return nil
	}
	return drain(t.names.names, "the file names", func(e *bpf.FuseReqNodeName) {
		fn(e.Conn, e.Node, e.Parent, cString(e.Name[:]))
	})
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

// Nodes returns each node's requests, summed over CPUs (--files).
func (t *Tracer) Nodes() (map[NodeKey]NodeStats, error) {
	out := map[NodeKey]NodeStats{}
	if t.names == nil || !t.names.files {
		return out, nil
	}
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
