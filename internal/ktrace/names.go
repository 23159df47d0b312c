package ktrace

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/fusescope/fusescope/internal/bpf"
)

// loadNames loads the program that learns node names (names.bpf.h), sharing
// the request programs' maps.
func (t *Tracer) loadNames(spec *ebpf.CollectionSpec, files bool) error {
	var p struct {
		Prog *ebpf.Program `ebpf:"fuse_names"`
	}
	opts := &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		"filter_conns": t.maps.FilterConns, "names_sent": t.maps.NamesSent, "node_names": t.maps.NodeNames,
	}}
	if err := spec.LoadAndAssign(&p, opts); err != nil {
		return kernelLacks(err, "the program that names files (--files, --slower)")
	}
	r, err := ringbuf.NewReader(t.maps.NodeNames)
	if err != nil {
		p.Prog.Close()
		return fmt.Errorf("reading the file names: %w", err)
	}
	t.namesProg, t.names, t.files = p.Prog, r, files
	return nil
}

func (t *Tracer) closeNames() error {
	var errs []error
	if t.names != nil {
		errs = append(errs, t.names.Close())
	}
	if t.namesProg != nil {
		errs = append(errs, t.namesProg.Close())
	}
	return errors.Join(errs...)
}

// Names says whether the tracer learns node names.
func (t *Tracer) Names() bool { return t.names != nil }

// ReadNames calls fn with each (connection, node) the kernel named since
// the last call: its parent node and its name in that directory.
func (t *Tracer) ReadNames(fn func(conn uint32, node, parent uint64, name string)) error {
	if t.names == nil {
		return nil
	}
	return drain(t.names, "the file names", func(e *bpf.FuseReqNodeName) {
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
	if !t.files {
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
