package ktrace

import (
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/fusescope/fusescope/internal/fuseconn"
	"github.com/fusescope/fusescope/internal/profile"
)

// A feature is one optional part of the tracer: the stage split
// (stages.go), file names and files (names.go), the page cache
// (pagecache.go), the application's calls (calls.go). Each lives in its
// own file with its kernel variants, behind the steps Start, Resume and
// the request source's records take for every feature in turn.
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
	// read adds what it measured to the records being made (recordRead),
	// keeping what an interval's figures are taken from.
	read(t *Tracer, rd *recordRead) error
}

// recordRead is what the features read into: the record of the run so
// far and, at an interval, the interval's (nil for a snapshot, which
// moves no interval on), with the session's mount labels. The opcodes'
// figures are in both already: the stages' statistics with their totals,
// from the same half of the tables (halves.go), so that an interval's
// stages count the requests its totals do.
type recordRead struct {
	whole, interval *profile.Record
	labels          *fuseconn.Book
	conns           []uint32 // the traced connections; none: all
	files           int      // --files: how many files to list
}

// records are rd's records: the whole run's, then the interval's.
func (rd *recordRead) records() []*profile.Record {
	if rd.interval == nil {
		return []*profile.Record{rd.whole}
	}
	return []*profile.Record{rd.whole, rd.interval}
}

// readFeatures has each feature the options turned on read into rd.
func (t *Tracer) readFeatures(rd *recordRead) error {
	for _, f := range t.features {
		if err := f.read(t, rd); err != nil {
			return err
		}
	}
	return nil
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
