package ktrace

import (
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// A feature is one optional part of the tracer: the stage split
// (stages.go), file names and files (names.go), the page cache
// (pagecache.go), the application's calls (calls.go). Each lives in its
// own file with its kernel variants, behind the steps Start and Resume
// take for every feature in turn; what it measures is read through the
// Tracer's methods in the same file.
type feature interface {
	// configure readies the object for the options before anything
	// loads: the feature's constants and map sizes, its maps shrunk to
	// nothing when the options leave it out (on is then false, and it is
	// not loaded), or the options refused in one line.
	configure(p *loadPlan) (on bool, err error)
	// load loads its programs, sharing the request programs' maps.
	load(t *Tracer, spec *ebpf.CollectionSpec) error
	// attach attaches them (again, after a Pause).
	attach() ([]link.Link, error)
	// close frees its programs and what reads them.
	close() error
	// programs are its programs loaded, by what they run on, for the
	// kernel's accounting of their cost (ProgramStats).
	programs() map[string]*ebpf.Program
}

// loadPlan is the object and its settings while Start readies them.
type loadPlan struct {
	spec    *ebpf.CollectionSpec
	consts  map[string]any
	opts    Options
	tps     Tracepoints
	tracefs string // where the tracepoints' event directories are
	// twin is the suffix of the request programs' twins the options
	// need (_slow, _stages), files whether the end program is the one
	// that sums each node's requests.
	twin  string
	files bool
}

// unused shrinks maps to the smallest the kernel allows.
func (p *loadPlan) unused(maps ...string) {
	for _, m := range maps {
		if p.spec.Maps[m].Type == ebpf.RingBuf {
			p.spec.Maps[m].MaxEntries = uint32(os.Getpagesize())
		} else {
			p.spec.Maps[m].MaxEntries = 1
		}
	}
}

// attachAll attaches the programs of one feature as tracing links (tp_btf).
func attachTracing(what string, progs ...*ebpf.Program) ([]link.Link, error) {
	var links []link.Link
	for _, p := range progs {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			closeLinks(links)
			return nil, &attachError{what: what, err: err}
		}
		links = append(links, l)
	}
	return links, nil
}

func closeLinks(links []link.Link) {
	for _, l := range links {
		l.Close()
	}
}

type attachError struct {
	what string
	err  error
}

func (e *attachError) Error() string { return "attaching " + e.what + ": " + e.err.Error() }
func (e *attachError) Unwrap() error { return e.err }
