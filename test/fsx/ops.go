// Package fsx is a model-checking file system tester in the spirit of
// xfstests' fsx: a seeded random sequence of operations on one file (reads
// and writes at unaligned offsets and sizes up to several MiB, reads and
// writes through shared mappings, truncates up and down, fallocate's
// modes, copy_file_range, fsync, close and reopen), done by one process or
// two, each result compared with a model of what the file must hold. A
// failure names the seed and the shortest prefix of the sequence that
// fails, so it can be replayed.
package fsx

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Kind is an operation.
type Kind uint8

const (
	Read       Kind = iota // lseek and read
	Pread                  // pread
	Write                  // lseek and write
	Pwrite                 // pwrite
	MapRead                // mmap, copy out, munmap
	MapWrite               // mmap (extending the file first), copy in, msync, munmap
	Truncate               // ftruncate, up or down
	Falloc                 // fallocate, mode 0: allocates, may extend
	FallocKeep             // FALLOC_FL_KEEP_SIZE
	PunchHole              // FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
	ZeroRange              // FALLOC_FL_ZERO_RANGE
	CopyRange              // copy_file_range within the file
	Fsync                  // fsync
	Reopen                 // close and open again
	numKinds
)

var kindNames = [...]string{"read", "pread", "write", "pwrite", "mapread", "mapwrite", "truncate",
	"fallocate", "fallocate-keep-size", "punch-hole", "zero-range", "copy-range", "fsync", "reopen"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// ParseKinds reads a comma-separated list of operation names.
func ParseKinds(s string) ([]Kind, error) {
	var out []Kind
	for _, name := range splitComma(s) {
		k, ok := kindByName(name)
		if !ok {
			return nil, fmt.Errorf("unknown fsx operation %q (known: %v)", name, kindNames)
		}
		out = append(out, k)
	}
	return out, nil
}

func kindByName(name string) (Kind, bool) {
	for i, n := range kindNames {
		if n == name {
			return Kind(i), true
		}
	}
	return 0, false
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// Op is one operation of a sequence.
type Op struct {
	Index int   // position in the sequence; also what its written bytes say
	Kind  Kind  //
	Proc  int   // the process that does it: 0, or 1 with two processes
	Off   int64 // where it acts (a read's or write's offset, the new size of a truncate, a copy's source)
	Len   int64 // how many bytes
	Dst   int64 // a copy's destination
}

func (o Op) String() string {
	switch o.Kind {
	case Truncate:
		return fmt.Sprintf("#%d p%d truncate to %#x", o.Index, o.Proc, o.Off)
	case Fsync, Reopen:
		return fmt.Sprintf("#%d p%d %s", o.Index, o.Proc, o.Kind)
	case CopyRange:
		return fmt.Sprintf("#%d p%d copy-range %#x bytes from %#x to %#x", o.Index, o.Proc, o.Len, o.Off, o.Dst)
	}
	return fmt.Sprintf("#%d p%d %s %#x bytes at %#x", o.Index, o.Proc, o.Kind, o.Len, o.Off)
}

// Pattern is the byte op index writes at file offset off: a write is
// recognisable by where its bytes sit and which op it was, and never 0, so
// a hole or a lost write shows.
func Pattern(index int, off int64) byte {
	return byte((int64(index)*131+off)%251) + 1
}

// fill writes op's pattern for [off, off+len(b)) into b. The pattern
// repeats every 251 bytes, so it is copied from a repetition of one period
// (a byte loop costs ~5 ns a byte under the race detector).
func fill(b []byte, index int, off int64) {
	for len(b) > 0 {
		phase := (int64(index)*131 + off) % 251
		n := copy(b, periods[phase:])
		b, off = b[n:], off+int64(n)
	}
}

// periods is the pattern from phase 0 on, 1 MiB of it.
var periods = func() []byte {
	b := make([]byte, 1<<20+251)
	for i := range b {
		b[i] = byte(i%251) + 1
	}
	return b
}()

// Limits bound a sequence.
type Limits struct {
	MaxLen   int64 // the file's largest size
	MaxOpLen int64 // an operation's largest length
}

// DefaultLimits: files of up to 8 MiB, operations of up to 4 MiB (1 MiB
// READs and WRITEs are a FUSE mount's largest; these span several).
var DefaultLimits = Limits{MaxLen: 8 << 20, MaxOpLen: 4 << 20}

// weights are the kinds' relative frequencies, fsx's in spirit: mostly
// reads and writes, with the operations that change a file's shape often
// enough to meet every state.
var weights = [numKinds]int{
	Read: 10, Pread: 14, Write: 8, Pwrite: 12, MapRead: 8, MapWrite: 6, Truncate: 6,
	Falloc: 3, FallocKeep: 3, PunchHole: 4, ZeroRange: 4, CopyRange: 6, Fsync: 3, Reopen: 3,
}

// Generate returns the sequence of n operations of a seed. It depends on
// the seed alone, not on results, so any prefix can be replayed. A model
// of the size is kept to aim operations at and around the file's end.
func Generate(seed uint64, n, procs int, lim Limits, kinds []Kind) []Op {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	allowed := weights
	if len(kinds) > 0 {
		allowed = [numKinds]int{}
		for _, k := range kinds {
			allowed[k] = weights[k]
		}
	}
	total := 0
	for _, w := range allowed {
		total += w
	}
	length := func() int64 {
		// Log-uniform from 1 byte to MaxOpLen: small and large alike.
		return max(1, int64(math.Exp(rng.Float64()*math.Log(float64(lim.MaxOpLen)))))
	}
	offset := func(size int64) int64 {
		// Mostly inside the file, sometimes across or past its end.
		switch r := rng.IntN(10); {
		case r < 7 && size > 0:
			return rng.Int64N(size)
		case r < 9 && size > 0:
			return max(0, size-rng.Int64N(min(size, 1<<16)+1))
		}
		return rng.Int64N(lim.MaxLen)
	}
	var size int64
	ops := make([]Op, 0, n)
	for i := 0; i < n; i++ {
		op := Op{Index: i}
		if procs > 1 {
			op.Proc = rng.IntN(procs)
		}
		pick := rng.IntN(total)
		for k, w := range allowed {
			if pick < w {
				op.Kind = Kind(k)
				break
			}
			pick -= w
		}
		switch op.Kind {
		case Read, Pread:
			op.Off, op.Len = offset(size), length()
		case Write, Pwrite, Falloc, ZeroRange, MapWrite:
			op.Off = offset(size)
			op.Len = min(length(), lim.MaxLen-op.Off)
			if op.Len <= 0 {
				op.Off, op.Len = 0, min(length(), lim.MaxLen)
			}
			size = max(size, op.Off+op.Len)
		case FallocKeep, PunchHole:
			op.Off, op.Len = offset(size), length()
		case MapRead:
			if size == 0 {
				op.Kind = Fsync // nothing to map
				break
			}
			op.Off = rng.Int64N(size)
			op.Len = min(length(), size-op.Off)
		case Truncate:
			if rng.IntN(2) == 0 && size > 0 {
				op.Off = rng.Int64N(size) // down
			} else {
				op.Off = rng.Int64N(lim.MaxLen) // up, mostly
			}
			size = op.Off
		case CopyRange:
			if size < 2 {
				op.Kind = Fsync
				break
			}
			// Source and destination may not overlap in one file.
			op.Len = min(length(), size/2)
			op.Off = rng.Int64N(size - op.Len + 1)
			for tries := 0; ; tries++ {
				op.Dst = rng.Int64N(min(lim.MaxLen-op.Len, size+1<<16) + 1)
				if op.Dst+op.Len <= op.Off || op.Off+op.Len <= op.Dst {
					break
				}
				if tries == 8 { // the file's first half to its second
					op.Off, op.Dst = 0, op.Len
					break
				}
			}
			size = max(size, op.Dst+op.Len)
		}
		ops = append(ops, op)
	}
	return ops
}
