package report

import (
	"fmt"

	"github.com/fusescope/fusescope/internal/profile"
)

// Kinds of record, as the views tell them apart.
const (
	KindRequests  = "requests"  // FUSE requests: trace, fs stats, an interval trace's lines
	KindSyscalls  = "syscalls"  // a system-call report
	KindBench     = "bench"     // a bench run
	KindFunctions = "functions" // calls of kernel functions (kfunc)
)

// KindNames say what each kind is and what makes it.
var KindNames = map[string]string{
	KindRequests:  "a record of FUSE requests (trace, fs stats)",
	KindSyscalls:  "a system-call report (syscalls --json)",
	KindBench:     "a bench run (bench -o)",
	KindFunctions: "a record of function calls (kfunc, ufunc)",
}

// Kind names what a record holds.
func Kind(r *profile.Record) string {
	switch {
	case r.Bench != nil:
		return KindBench
	case FunctionsOf(r) != nil && !r.HasRequests():
		return KindFunctions
	case r.Syscalls != nil && !r.HasRequests():
		return KindSyscalls
	}
	return KindRequests
}

// FileKind is the kind of a file's records, refused in one sentence when
// they are of more than one.
func FileKind(name string, recs []*profile.Record) (string, error) {
	k := Kind(recs[0])
	for _, r := range recs[1:] {
		if other := Kind(r); other != k {
			return "", fmt.Errorf("%s mixes %s with %s: give one kind of record per file", name, KindNames[k], KindNames[other])
		}
	}
	return k, nil
}
