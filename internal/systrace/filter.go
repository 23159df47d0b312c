package systrace

import (
	"path"
	"slices"
	"strings"

	"github.com/fusescope/fusescope/internal/option"
	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/strace"
)

// Filter keeps the events a question is about. The zero value keeps all.
type Filter struct {
	PIDs     map[int]bool // processes to keep; empty: all
	Files    []string     // path.Match patterns on the fd target; empty: all
	Category string       // keep only system calls of this category
	From, To float64      // seconds after Origin; To 0: the end
	// Origin is the time From and To count from (live: the command's
	// release, or -p's attach); 0: the first event's.
	Origin float64
	// Comms keeps the processes that executed a program whose base name
	// matches one of these path.Match patterns, from that exec on, and
	// their threads; empty: all.
	Comms []string
}

// Validate checks the filter's patterns and category. Its errors are
// option.Errors, which name the settings by their keys ({file}, {since}).
func (f *Filter) Validate() error {
	for _, p := range f.Files {
		if _, err := path.Match(p, ""); err != nil {
			return option.Errorf("{file} %q: %v", p, err)
		}
	}
	for _, p := range f.Comms {
		if _, err := path.Match(p, ""); err != nil || p == "" || strings.Contains(p, "/") {
			return option.Errorf("{comm} %q: give a program's base name or a glob of one, such as cc1 or 'python*'", p)
		}
	}
	if f.Category != "" && !slices.Contains(profile.SyscallCategories, f.Category) {
		return option.Errorf("{category} %q: give one of %s", f.Category, strings.Join(profile.SyscallCategories, ", "))
	}
	for _, t := range []struct {
		key string
		v   float64
	}{{"since", f.From}, {"until", f.To}} {
		if !(t.v >= 0 && t.v < 1e12) { // also NaN
			return option.Errorf("{"+t.key+"} %v: give a number of seconds after the start (a log's first timestamp; live, the command's release or {pid}'s attach)", t.v)
		}
	}
	if f.To != 0 && f.To < f.From {
		return option.Errorf("{until} %.3f is before {since} %.3f", f.To, f.From)
	}
	return nil
}

// Record is the filter as a report records it; nil when it keeps all.
func (f *Filter) Record() *profile.SyscallFilter {
	r := &profile.SyscallFilter{Comms: f.Comms, Files: f.Files, Category: f.Category, SinceS: f.From, UntilS: f.To}
	for pid := range f.PIDs {
		r.PIDs = append(r.PIDs, pid)
	}
	slices.Sort(r.PIDs)
	if len(r.PIDs) == 0 && len(r.Comms) == 0 && len(r.Files) == 0 && r.Category == "" && r.SinceS == 0 && r.UntilS == 0 {
		return nil
	}
	return r
}

// Wrap returns an event source that passes only the filter's events on.
// Process events (exits, signals) are kept for the processes kept, so the
// process tree stays whole.
func (f *Filter) Wrap(events func(emit func(*strace.Event)) error) func(emit func(*strace.Event)) error {
	if len(f.PIDs) == 0 && len(f.Comms) == 0 && len(f.Files) == 0 && f.Category == "" && f.From == 0 && f.To == 0 {
		return events
	}
	return func(emit func(*strace.Event)) error {
		first, seen := f.Origin, f.Origin != 0
		kept := make(map[int]bool, len(f.PIDs))
		for pid := range f.PIDs {
			kept[pid] = true
		}
		// strace -f prints a new thread's first calls under its own id as
		// soon as it makes them, often before its creator's clone returns
		// and says whose thread it is: those lines wait here until then.
		// created holds every id a clone returned, whose lines need not wait.
		early := map[int][]strace.Event{}
		created := map[int]bool{}
		pass := func(e *strace.Event) {
			// A call is timed by its entry, so one that was unfinished
			// while later lines completed comes out earlier than the
			// first event: without --since nothing is before the window.
			if e.Time > 0 && ((f.From > 0 && e.Time-first < f.From) || (f.To > 0 && e.Time-first > f.To)) {
				return
			}
			if e.Kind == strace.Syscall || e.Kind == strace.PeerIO || e.Kind == strace.Failed {
				if f.Category != "" && e.Category() != f.Category {
					return
				}
				// A transfer call is kept when either of its fds matches.
				if len(f.Files) > 0 && !f.matchFile(e.FileTarget()) && !f.matchFile(e.Peer()) && !f.matchFile(e.MissingPath()) {
					return
				}
			} else if e.Kind == strace.Sample {
				if len(f.Files) > 0 || (f.Category != "" && e.Name != f.Category) {
					return
				}
			} else if len(f.Files) > 0 || f.Category != "" {
				return
			}
			emit(e)
		}
		return events(func(e *strace.Event) {
			if e.Time > 0 && !seen {
				first, seen = e.Time, true
			}
			if len(f.PIDs) == 0 && len(f.Comms) == 0 {
				pass(e)
				return
			}
			if len(f.Comms) > 0 && f.execMatches(e) {
				kept[e.PID] = true
				if e.TGID > 0 {
					kept[e.TGID] = true
				}
			}
			child := e.Child()
			if !kept[e.PID] && !kept[e.TGID] {
				switch {
				case child > 0:
					created[child] = true
					delete(early, child)
				case e.PID > 0 && e.TGID == 0 && !created[e.PID]:
					// Bounded: an id whose clone never shows up (it ran
					// before the log began) stops waiting.
					if len(early[e.PID]) >= maxEarlyLines || (early[e.PID] == nil && len(early) >= maxEarlyThreads) {
						created[e.PID] = true
						delete(early, e.PID)
					} else {
						early[e.PID] = append(early[e.PID], *e)
					}
				}
				return
			}
			if child > 0 {
				created[child] = true
				// A kept process's threads are kept; its child processes
				// are not (they are processes of their own, as with -p).
				if strings.Contains(e.Args, "CLONE_THREAD") {
					kept[child] = true
					for i := range early[child] {
						pass(&early[child][i])
					}
				}
				delete(early, child)
			}
			pass(e)
		})
	}
}

// How many lines of how many threads the -p filter holds while it waits
// for the clones that made them.
const (
	maxEarlyLines   = 64
	maxEarlyThreads = 256
)

// execMatches says whether e is an exec, which succeeded, of a program
// --comm names.
func (f *Filter) execMatches(e *strace.Event) bool {
	if e.Kind != strace.Syscall || (e.Name != "execve" && e.Name != "execveat") || e.Errno != "" {
		return false
	}
	program, ok := strace.Quoted(strace.FirstArg(e.Args))
	if !ok {
		return false
	}
	for _, p := range f.Comms {
		if ok, _ := path.Match(p, path.Base(program)); ok {
			return true
		}
	}
	return false
}

func (f *Filter) matchFile(target string) bool {
	if target == "" {
		return false
	}
	for _, p := range f.Files {
		if ok, _ := path.Match(p, target); ok {
			return true
		}
		// A pattern without a slash matches the base name, as find -name does.
		if !strings.Contains(p, "/") {
			if ok, _ := path.Match(p, path.Base(target)); ok {
				return true
			}
		}
	}
	return false
}
