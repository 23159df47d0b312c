package systrace

import (
	"path"
	"sort"
	"strconv"

	"github.com/fusescope/fusescope/internal/profile"
	"github.com/fusescope/fusescope/internal/strace"
)

// What a slow-startup hunt asks of a trace (seed 002): the programs each
// process ran with their arguments, its time outside system calls, the
// critical path from the root's start to its end, waits grouped by call
// and target, and the paths a search probed in vain.

// DefaultWaitMinS is the shortest call the wait groups, the critical path
// and the timeline count as a wait.
const DefaultWaitMinS = 0.001

// waitGroups sums the blocking calls of at least min by call and target.
type waitGroups struct {
	min float64
	m   map[[2]string]*profile.WaitGroup
}

func (a *waitGroups) Observe(e *strace.Event) {
	if e.Kind != strace.Syscall || e.Calls > 0 || !e.Info().Wait || e.Dur < a.min || e.Dur <= 0 {
		return
	}
	target := e.FileTarget()
	if e.Name == "read" && (target == "" || strace.TargetKind(target) == "file") {
		return
	}
	k := [2]string{e.Name, target}
	g := a.m[k]
	if g == nil {
		g = &profile.WaitGroup{Name: e.Name, Target: target}
		a.m[k] = g
	}
	g.Calls++
	g.TimeS += e.Dur
	g.MaxS = max(g.MaxS, e.Dur)
}

func (a *waitGroups) Finish(r *profile.SyscallReport) {
	for _, g := range a.m {
		r.WaitGroups = append(r.WaitGroups, *g)
	}
	sort.Slice(r.WaitGroups, func(i, j int) bool {
		a, b := r.WaitGroups[i], r.WaitGroups[j]
		if a.TimeS != b.TimeS {
			return a.TimeS > b.TimeS
		}
		return a.Name+a.Target < b.Name+b.Target
	})
	r.WaitMinS = a.min
}

// maxPathSteps bounds the critical path's steps.
const maxPathSteps = 5000

// criticalPath explains the root process's run: its programs in turn,
// the long calls of its main thread, and for a wait for a child, that
// child's run over the wait, the same way.
func criticalPath(r *profile.SyscallReport, minS float64) {
	procs := map[int]*profile.Process{}
	var root *profile.Process
	for i := range r.Processes {
		p := &r.Processes[i]
		procs[p.PID] = p
	}
	for i := range r.Processes {
		p := &r.Processes[i]
		if p.PID == strace.Unattributed || procs[p.Parent] != nil && p.Parent != p.PID {
			continue
		}
		if root == nil || p.Start < root.Start || p.Start == root.Start && p.PID < root.PID {
			root = p
		}
	}
	if root == nil || root.End <= root.Start {
		return
	}
	items := map[profile.PathItem]float64{}
	var explain func(p *profile.Process, from, to float64, depth int)
	explain = func(p *profile.Process, from, to float64, depth int) {
		for _, seg := range segments(p) {
			a, b := max(seg.Start, from), min(seg.end, to)
			if b <= a || len(r.CriticalPath) >= maxPathSteps {
				continue
			}
			r.CriticalPath = append(r.CriticalPath, profile.PathStep{Depth: depth, Kind: "exec", PID: p.PID, Program: seg.Program, Args: seg.Args, Start: a, DurS: b - a})
			covered := 0.0
			for _, s := range p.Blocked {
				sa, sb := max(s.Start, a), min(s.Start+s.DurS, b)
				if sb <= sa || len(r.CriticalPath) >= maxPathSteps {
					continue
				}
				target := s.Target
				child := procs[s.Child]
				if child != nil {
					target = "pid " + strconv.Itoa(child.PID) + " " + path.Base(child.Exec)
				}
				r.CriticalPath = append(r.CriticalPath, profile.PathStep{Depth: depth + 1, Kind: "wait", PID: p.PID, Name: s.Name, Target: target, Start: sa, DurS: sb - sa})
				covered += sb - sa
				if child != nil && child != p {
					explain(child, sa, sb, depth+2)
				} else {
					items[profile.PathItem{Kind: "wait", Name: s.Name, Target: s.Target}] += sb - sa
				}
			}
			if out := (b - a) - covered; out > 0 {
				if out >= minS {
					r.CriticalPath = append(r.CriticalPath, profile.PathStep{Depth: depth + 1, Kind: "outside", PID: p.PID, Start: a, DurS: out})
				}
				items[profile.PathItem{Kind: "outside", Program: seg.Program}] += out
			}
		}
	}
	explain(root, root.Start, root.End, 0)
	total := root.End - root.Start
	for it, d := range items {
		it.DurS, it.Share = d, d/total
		r.CriticalTop = append(r.CriticalTop, it)
	}
	sort.Slice(r.CriticalTop, func(i, j int) bool {
		a, b := r.CriticalTop[i], r.CriticalTop[j]
		if a.DurS != b.DurS {
			return a.DurS > b.DurS
		}
		return a.Kind+a.Name+a.Target+a.Program < b.Kind+b.Name+b.Target+b.Program
	})
}

type segment struct {
	profile.ExecStep
	end float64
}

// segments divides a process's life by the programs it ran: before its
// first exec it ran its parent's program (a fork; Program "").
func segments(p *profile.Process) []segment {
	var out []segment
	if len(p.Execs) == 0 || p.Execs[0].Start > p.Start {
		prog := ""
		if len(p.Execs) == 0 {
			prog = p.Exec
		}
		out = append(out, segment{ExecStep: profile.ExecStep{Start: p.Start, Program: prog}})
	}
	for _, x := range p.Execs {
		if n := len(out); n > 0 {
			out[n-1].end = x.Start
		}
		out = append(out, segment{ExecStep: x})
	}
	out[len(out)-1].end = p.End
	return out
}
