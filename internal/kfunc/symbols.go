package kfunc

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Symbol is a kernel function: its name and the module it is in ("" for
// the kernel's own).
type Symbol struct {
	Name   string
	Module string
}

func (s Symbol) String() string {
	if s.Module == "" {
		return s.Name
	}
	return s.Name + " [" + s.Module + "]"
}

// CheckPattern says in one sentence what is wrong with a glob of function
// names, or returns nil.
func CheckPattern(pattern string) error {
	if pattern == "" {
		return fmt.Errorf("the function pattern is empty: give a glob such as 'fuse_*'")
	}
	if strings.ContainsAny(pattern, " \t\n/") {
		return fmt.Errorf("function pattern %q: kernel function names hold no spaces or slashes; give a glob such as 'fuse_*'", pattern)
	}
	if _, err := path.Match(shellClass(pattern), ""); err != nil {
		return fmt.Errorf("function pattern %q is not a glob (an unclosed [ or a trailing \\): give one such as 'fuse_*' or 'fuse_[lr]*'", pattern)
	}
	return nil
}

// Match reports whether a function's name matches a glob checked by
// CheckPattern: * is any run of characters, ? one, [...] one of a class
// and [!...] one outside it, as in the shell.
func Match(pattern, name string) bool {
	ok, _ := path.Match(shellClass(pattern), name)
	return ok
}

// shellClass writes the shell's negated class [!...] as path.Match's
// [^...].
func shellClass(pattern string) string {
	return strings.ReplaceAll(pattern, "[!", "[^")
}

// ParseAvailableFilterFunctions reads tracefs's available_filter_functions:
// the functions ftrace can hook (kprobes on ftrace and fentry attach
// there), a name per line with its module in brackets ("fuse_lookup
// [fuse]"). A name listed twice (two static functions of one name) is
// returned once; the kernel's placeholders for functions it could not
// place (__ftrace_invalid_address___N) are left out.
func ParseAvailableFilterFunctions(r io.Reader) ([]Symbol, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	seen := map[Symbol]bool{}
	var out []Symbol
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		s := Symbol{Name: f[0]}
		switch {
		case len(f) == 2 && len(f[1]) > 2 && f[1][0] == '[' && f[1][len(f[1])-1] == ']':
			s.Module = f[1][1 : len(f[1])-1]
		case len(f) != 1:
			return nil, fmt.Errorf("line %d: %q is not a function name with an optional [module]", n, sc.Text())
		}
		if strings.HasPrefix(s.Name, "__ftrace_invalid_address__") || seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out, sc.Err()
}

// Addresses is where the kernel's functions start, from /proc/kallsyms.
type Addresses map[Symbol][]uint64

// ParseKallsyms reads /proc/kallsyms ("ffffffffc0a7e201 t fuse_lookup
// [fuse]") for the addresses of the functions in want (text symbols, t or
// T). A static function's name may be listed at several addresses. It
// fails when the file has no address but 0: kptr_restrict hides them from
// this process.
func ParseKallsyms(r io.Reader, want map[Symbol]bool) (Addresses, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	out := Addresses{}
	nonzero := false
	for sc.Scan() {
		// A line of another shape is no function's: skipped, so that
		// one odd line does not cost the run.
		f := strings.Fields(sc.Text())
		if len(f) < 3 || len(f) > 4 {
			continue
		}
		addr, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			continue
		}
		nonzero = nonzero || addr != 0
		if f[1] != "t" && f[1] != "T" {
			continue
		}
		s := Symbol{Name: f[2]}
		if len(f) == 4 {
			if len(f[3]) < 3 || f[3][0] != '[' || f[3][len(f[3])-1] != ']' {
				continue
			}
			s.Module = f[3][1 : len(f[3])-1]
		}
		if want[s] {
			out[s] = append(out[s], addr)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !nonzero {
		return nil, fmt.Errorf("every address in /proc/kallsyms reads 0: kernel.kptr_restrict hides them; run as root with sysctl kernel.kptr_restrict=0 or 1")
	}
	return out, nil
}

// entryWindow bounds how far past a function's first byte a probe's
// address may lie: a kprobe reports the byte after its breakpoint (+1),
// after the IBT landing pad (+5), or after the ftrace call (+9).
const entryWindow = 32

// addrIndex names the address a probe reported: the function that starts
// at most entryWindow bytes before it.
type addrIndex struct {
	starts []uint64
	funcs  []int // index into the run's functions, by starts
}

func newAddrIndex(addrs Addresses, index map[Symbol]int) *addrIndex {
	type pair struct {
		a uint64
		i int
	}
	var ps []pair
	for s, as := range addrs {
		i, ok := index[s]
		if !ok {
			continue
		}
		for _, a := range as {
			ps = append(ps, pair{a, i})
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].a < ps[j].a })
	x := &addrIndex{}
	for _, p := range ps {
		x.starts = append(x.starts, p.a)
		x.funcs = append(x.funcs, p.i)
	}
	return x
}

// lookup returns the function whose entry ip is, or false.
func (x *addrIndex) lookup(ip uint64) (int, bool) {
	i := sort.Search(len(x.starts), func(i int) bool { return x.starts[i] > ip }) - 1
	if i < 0 || ip-x.starts[i] > entryWindow {
		return 0, false
	}
	return x.funcs[i], true
}
