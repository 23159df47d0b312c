package ktrace

import (
	"errors"
	"fmt"
	"sort"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/fusescope/fusescope/internal/bpf"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
)

// The kinds of file calls --calls counts (enum call_kind in calls.bpf.h):
// how each names its file.
const (
	callFD     = 1 // fd in its first argument
	callAt     = 2 // dirfd, then a path
	callPath   = 3 // a path, relative to the working directory
	callOpenAt = 4 // as callAt, and the fd it returns names the file
	callOpen   = 5 // as callPath, and the fd it returns names the file
)

// fileCalls are the file system calls --calls counts, by how they name
// their file.
var fileCalls = map[string]uint8{
	"read": callFD, "write": callFD, "close": callFD, "fstat": callFD, "lseek": callFD, "pread64": callFD,
	"pwrite64": callFD, "readv": callFD, "writev": callFD, "preadv": callFD, "pwritev": callFD, "preadv2": callFD,
	"pwritev2": callFD, "fsync": callFD, "fdatasync": callFD, "ftruncate": callFD, "getdents": callFD,
	"getdents64": callFD, "fchmod": callFD, "fchown": callFD, "fstatfs": callFD, "fallocate": callFD,
	"fgetxattr": callFD, "fsetxattr": callFD, "flistxattr": callFD, "fremovexattr": callFD, "flock": callFD,
	"sync_file_range": callFD, "fadvise64": callFD, "copy_file_range": callFD,
	"newfstatat": callAt, "statx": callAt, "unlinkat": callAt, "mkdirat": callAt, "mknodat": callAt,
	"fchownat": callAt, "fchmodat": callAt, "fchmodat2": callAt, "faccessat": callAt, "faccessat2": callAt,
	"readlinkat": callAt, "renameat": callAt, "renameat2": callAt, "linkat": callAt, "utimensat": callAt,
	"openat": callOpenAt, "openat2": callOpenAt,
	"stat": callPath, "lstat": callPath, "access": callPath, "readlink": callPath, "unlink": callPath,
	"rmdir": callPath, "mkdir": callPath, "rename": callPath, "link": callPath, "chmod": callPath,
	"chown": callPath, "lchown": callPath, "truncate": callPath, "statfs": callPath, "getxattr": callPath,
	"lgetxattr": callPath, "setxattr": callPath, "lsetxattr": callPath, "listxattr": callPath,
	"llistxattr": callPath, "removexattr": callPath, "lremovexattr": callPath, "utime": callPath,
	"utimes": callPath, "mknod": callPath,
	"open": callOpen, "creat": callOpen,
}

// maxCallNr is MAX_CALL_NR in fusereq.h.
const maxCallNr = 512

// callKinds is the program's table of file calls, by system call number.
func callKinds() [maxCallNr]uint8 {
	var t [maxCallNr]uint8
	for nr, name := range bpf.SyscallNames {
		if k, ok := fileCalls[name]; ok && nr < maxCallNr {
			t[nr] = k
		}
	}
	return t
}

// callPrograms are --calls' programs (calls.bpf.h), all on raw tracepoints.
type callPrograms struct {
	Enter *ebpf.Program `ebpf:"app_enter"`
	Exit  *ebpf.Program `ebpf:"app_exit"`
	Send  *ebpf.Program `ebpf:"app_send"`
	End   *ebpf.Program `ebpf:"app_end"`
	Fork  *ebpf.Program `ebpf:"app_fork"`
}

func (p *callPrograms) all() []*ebpf.Program {
	return []*ebpf.Program{p.Enter, p.Exit, p.Send, p.End, p.Fork}
}

func (p *callPrograms) configure(plan *loadPlan) (bool, error) {
	if !plan.opts.Calls {
		plan.unused("app_tgids", "app_threads", "app_mounts", "call_table", "app_scratch")
		return false, nil
	}
	if plan.opts.Attach == AttachTracepoint {
		return false, fmt.Errorf("--calls needs the raw tracepoints with BTF: leave out --attach tracepoint")
	}
	plan.consts["call_kind"] = callKinds()
	if plan.opts.Comm != "" {
		plan.consts["app_comm_on"] = uint8(1)
	}
	return true, nil
}

func (p *callPrograms) load(t *Tracer, spec *ebpf.CollectionSpec) error {
	if t.attach != AttachBTF {
		return fmt.Errorf("--calls needs the raw tracepoints with BTF, which did not load: %v", t.fallback)
	}
	repl := map[string]*ebpf.Map{
		"filter_conns": t.maps.FilterConns, "pc_conns": t.maps.PcConns, "app_tgids": t.maps.AppTgids,
		"app_threads": t.maps.AppThreads, "app_mounts": t.maps.AppMounts, "call_table": t.maps.CallTable,
		"app_scratch": t.maps.AppScratch,
	}
	if err := spec.LoadAndAssign(p, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
		return kernelLacks(err, "--calls")
	}
	return nil
}

func (p *callPrograms) attach() ([]link.Link, error) {
	return attachTracing("the application programs (--calls)", p.all()...)
}

func (p *callPrograms) close() error {
	var errs []error
	for _, prog := range p.all() {
		if prog != nil {
			errs = append(errs, prog.Close())
		}
	}
	return errors.Join(errs...)
}

// WatchApplication adds processes to the application whose calls --calls
// counts; the processes they fork join it.
func (t *Tracer) WatchApplication(pids ...int) error {
	if t.calls == nil {
		return nil
	}
	for _, pid := range pids {
		if pid <= 0 || pid >= stagePIDLimit {
			return fmt.Errorf("process %d is beyond the %d process ids --calls can watch", pid, stagePIDLimit)
		}
		w := uint32(pid / 64)
		var bits uint64
		if err := t.maps.AppTgids.Lookup(w, &bits); err != nil {
			return fmt.Errorf("watching the application: %w", err)
		}
		bits |= 1 << (pid % 64)
		if err := t.maps.AppTgids.Put(w, bits); err != nil {
			return fmt.Errorf("watching the application: %w", err)
		}
	}
	return nil
}

// appMounts is APP_MOUNTS and APP_PATH in calls.bpf.h.
const (
	appMounts = 8
	appPath   = 128
)

// SetApplicationMounts gives the programs the traced mount points, for the
// calls that name their file by an absolute path. Mount points beyond the
// eight the programs compare, or too long, are left out; the calls on them
// are still counted when they send a request, or name their file by an fd
// or a relative path.
func (t *Tracer) SetApplicationMounts(mounts map[uint32]string) error {
	if t.calls == nil {
		return nil
	}
	conns := make([]uint32, 0, len(mounts))
	for c := range mounts {
		conns = append(conns, c)
	}
	sort.Slice(conns, func(i, j int) bool { return conns[i] < conns[j] })
	var i uint32
	for _, c := range conns {
		mp := mounts[c]
		if mp == "" || len(mp) >= appPath || i >= appMounts {
			continue
		}
		if mp == "/" {
			mp = "" // every absolute path: compare nothing
		}
		var m bpf.FuseReqAppMount
		m.Len, m.Conn = uint32(len(mp)), c
		for j := range len(mp) {
			m.Path[j] = int8(mp[j])
		}
		if err := t.maps.AppMounts.Put(i, m); err != nil {
			return fmt.Errorf("giving the mount points to the application programs: %w", err)
		}
		i++
	}
	return nil
}

// Calls returns the application's file calls on the traced mounts
// (--calls), by system call, most time first.
func (t *Tracer) Calls() ([]profile.CallStats, error) {
	if t.calls == nil {
		return nil, nil
	}
	out := []profile.CallStats{}
	var nr uint32
	var perCPU []bpf.FuseReqCallStats
	it := t.maps.CallTable.Iterate()
	for it.Next(&nr, &perCPU) {
		var c profile.CallStats
		var slots [hist.NumBuckets]uint64
		var sum, lo, hi uint64
		first := true
		for _, s := range perCPU {
			if s.Count == 0 {
				continue
			}
			if first || s.MinNs < lo {
				lo, first = s.MinNs, false
			}
			hi = max(hi, s.MaxNs)
			sum += s.SumNs
			c.Errors += s.Errors
			c.WithRequests += s.WithRequests
			c.Requests += s.Requests
			c.FuseNs += s.FuseNs
			for i, v := range s.Slots {
				slots[i] += v
			}
		}
		c.Latency = hist.FromBuckets(slots[:], sum, lo, hi)
		if c.Latency.Count == 0 {
			continue
		}
		c.Count = c.Latency.Count
		c.Syscall = bpf.SyscallNames[nr]
		out = append(out, c)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("reading the application's calls: %w", err)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Latency.Sum != out[j].Latency.Sum {
			return out[i].Latency.Sum > out[j].Latency.Sum
		}
		return out[i].Syscall < out[j].Syscall
	})
	return out, nil
}
