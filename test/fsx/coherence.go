package fsx

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// CoherenceConfig is a coherence run: one writer and readers, each a
// process with an open of its own, for a while.
type CoherenceConfig struct {
	Path      string
	Readers   int           // default 2
	Duration  time.Duration // default 5 s
	Blocks    int           // default 256
	BlockSize int           // bytes, a multiple of 8; default 4096
	// WriterPath, if set, is where the writer writes the file: the
	// backing file of a FUSE mount, to measure how long the mount serves
	// data from before changes made behind its back.
	WriterPath string
	// WriteEvery paces the writer: one write each (0: as fast as it can).
	WriteEvery time.Duration
	// Reopen has the readers open the file anew for each read, as a shell
	// loop of cat does (an open without FOPEN_KEEP_CACHE drops the page
	// cache).
	Reopen bool
	// Process returns a command that runs ServeCoherence with the given
	// arguments: the writer and the readers.
	Process func(args ...string) *exec.Cmd `json:"-"`
}

// CoherenceResult counts what the readers saw.
type CoherenceResult struct {
	Writes uint64 // blocks written
	Reads  uint64 // blocks read
	// Stale counts reads that returned a block older than a write of it
	// that had completed (the writer's pwrite had returned) before the
	// read began.
	Stale uint64
	// StaleVersions counts the distinct (block, version) pairs the stale
	// reads returned, per reader: one page left stale in the page cache
	// is read many times until it is written again.
	StaleVersions uint64
	// Torn counts reads that returned parts of two writes of a block: a
	// read concurrent with a write may, on a native file system too.
	Torn uint64
	// MaxLag is the most writes (of any block) a stale read was behind
	// the write it missed.
	MaxLag uint64
	// MaxAge is the longest a write had been complete when a read
	// returned what it had replaced: how long a change can go unseen.
	MaxAge time.Duration
}

// Rate is stale reads per million reads.
func (r CoherenceResult) Rate() float64 {
	if r.Reads == 0 {
		return 0
	}
	return float64(r.Stale) / float64(r.Reads) * 1e6
}

// Coherence runs one writer and cfg.Readers readers on the file. The
// writer writes whole blocks with a sequence number that grows with each
// write, and publishes a block's number in memory shared with the readers
// once its pwrite has returned; a reader reads the published number of a
// block before it reads the block, so a block older than that is a read
// that missed a completed write.
func Coherence(cfg CoherenceConfig) (CoherenceResult, error) {
	if cfg.Readers <= 0 {
		cfg.Readers = 2
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 5 * time.Second
	}
	if cfg.Blocks <= 0 {
		cfg.Blocks = 256
	}
	if cfg.BlockSize <= 0 {
		cfg.BlockSize = 4096
	}
	if cfg.BlockSize%8 != 0 {
		return CoherenceResult{}, fmt.Errorf("fsx: a block size of %d is not a multiple of 8", cfg.BlockSize)
	}
	if err := os.WriteFile(cfg.Path, make([]byte, cfg.Blocks*cfg.BlockSize), 0o644); err != nil {
		return CoherenceResult{}, err
	}
	shm, err := os.CreateTemp("/dev/shm", "fsx-coherence-")
	if err != nil {
		return CoherenceResult{}, err
	}
	defer os.Remove(shm.Name())
	if err := shm.Truncate(int64(cfg.Blocks * blockRecord)); err != nil {
		return CoherenceResult{}, err
	}
	shm.Close()
	args := func(role string) []string {
		path := cfg.Path
		if role == "writer" && cfg.WriterPath != "" {
			path = cfg.WriterPath
		}
		return []string{role, path, shm.Name(), strconv.Itoa(cfg.Blocks), strconv.Itoa(cfg.BlockSize), cfg.Duration.String(), cfg.WriteEvery.String()}
	}
	var cmds []*exec.Cmd
	for i := 0; i <= cfg.Readers; i++ {
		role := "reader"
		if cfg.Reopen {
			role = "reopening-reader"
		}
		if i == 0 {
			role = "writer"
		}
		cmd := cfg.Process(args(role)...)
		cmd.Stderr = os.Stderr
		cmds = append(cmds, cmd)
	}
	outs := make([][]byte, len(cmds))
	errs := make(chan error, len(cmds))
	for i, cmd := range cmds {
		go func() {
			var err error
			outs[i], err = cmd.Output()
			errs <- err
		}()
	}
	var res CoherenceResult
	var first error
	for range cmds {
		if err := <-errs; err != nil && first == nil {
			first = fmt.Errorf("fsx coherence: a process failed: %w", err)
		}
	}
	if first != nil {
		return res, first
	}
	for _, out := range outs {
		var r CoherenceResult
		if err := json.Unmarshal(out, &r); err != nil {
			return res, fmt.Errorf("fsx coherence: a process answered %q", out)
		}
		res.Writes += r.Writes
		res.Reads += r.Reads
		res.Stale += r.Stale
		res.StaleVersions += r.StaleVersions
		res.Torn += r.Torn
		res.MaxLag = max(res.MaxLag, r.MaxLag)
		res.MaxAge = max(res.MaxAge, r.MaxAge)
	}
	return res, nil
}

// ServeCoherence is a writer or a reader of Coherence: args are its role,
// the file, the shared memory, the number of blocks, the block size, the
// duration and the writer's pace. It prints its counts as JSON.
func ServeCoherence(args []string) error {
	if len(args) != 7 {
		return fmt.Errorf("fsx coherence: want role, file, shared memory, blocks, block size, duration, pace")
	}
	blocks, err1 := strconv.Atoi(args[3])
	bs, err2 := strconv.Atoi(args[4])
	d, err3 := time.ParseDuration(args[5])
	every, err4 := time.ParseDuration(args[6])
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
		return fmt.Errorf("fsx coherence: bad arguments %q", args)
	}
	sfd, err := unix.Open(args[2], unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	shared, err := unix.Mmap(sfd, 0, blocks*blockRecord, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	unix.Close(sfd)
	if err != nil {
		return err
	}
	// Per block, in memory all the processes share: the number of the last
	// write that completed, how many writes there were, and the last
	// historyLen writes' numbers and completion times (CLOCK_MONOTONIC,
	// which all processes share), each stored before what points to it.
	word := func(b, i int) *uint64 { return (*uint64)(unsafe.Pointer(&shared[b*blockRecord+8*i])) }
	published := func(b int) *uint64 { return word(b, 0) }
	flags := unix.O_RDONLY
	if args[0] == "writer" {
		flags = unix.O_RDWR
	}
	fd, err := unix.Open(args[1], flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))
	buf := make([]byte, bs)
	var res CoherenceResult
	deadline := time.Now().Add(d)
	switch args[0] {
	case "writer":
		next := time.Now()
		for seq := uint64(1); time.Now().Before(deadline); seq++ {
			if every > 0 {
				time.Sleep(time.Until(next))
				next = next.Add(every)
			}
			b := rng.IntN(blocks)
			for i := 0; i < bs; i += 8 {
				binary.LittleEndian.PutUint64(buf[i:], seq)
			}
			if n, err := unix.Pwrite(fd, buf, int64(b*bs)); err != nil || n != bs {
				return fmt.Errorf("fsx coherence: writing block %d: %d bytes, %v", b, n, err)
			}
			n := atomic.LoadUint64(word(b, 1))
			slot := 2 + 2*int(n%historyLen)
			atomic.StoreUint64(word(b, slot+1), uint64(monotonicNs()))
			atomic.StoreUint64(word(b, slot), seq)
			atomic.StoreUint64(word(b, 1), n+1)
			atomic.StoreUint64(published(b), seq)
			res.Writes++
		}
	case "reader", "reopening-reader":
		type version struct{ block, seq uint64 }
		staleSeen := map[version]bool{}
		for time.Now().Before(deadline) {
			b := rng.IntN(blocks)
			done := atomic.LoadUint64(published(b)) // completed before the read begins
			begin := monotonicNs()
			if args[0] == "reopening-reader" {
				unix.Close(fd)
				if fd, err = unix.Open(args[1], unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
					return err
				}
			}
			if n, err := unix.Pread(fd, buf, int64(b*bs)); err != nil || n != bs {
				return fmt.Errorf("fsx coherence: reading block %d: %d bytes, %v", b, n, err)
			}
			res.Reads++
			oldest, newest := ^uint64(0), uint64(0)
			for i := 0; i < bs; i += 8 {
				v := binary.LittleEndian.Uint64(buf[i:])
				oldest, newest = min(oldest, v), max(newest, v)
			}
			if oldest != newest {
				res.Torn++
			}
			if oldest < done {
				res.Stale++
				if v := (version{uint64(b), oldest}); !staleSeen[v] {
					staleSeen[v] = true
					res.StaleVersions++
				}
				res.MaxLag = max(res.MaxLag, done-oldest)
				// The first write after the version read replaced it;
				// if the history no longer goes back that far, its
				// oldest entry is a bound.
				var replaced uint64
				for i := range historyLen {
					seq := atomic.LoadUint64(word(b, 2+2*i))
					at := atomic.LoadUint64(word(b, 3+2*i))
					if seq > oldest && seq <= done && at > 0 && (replaced == 0 || at < replaced) {
						replaced = at
					}
				}
				if replaced > 0 {
					res.MaxAge = max(res.MaxAge, time.Duration(begin-int64(replaced)))
				}
			}
		}
	default:
		return fmt.Errorf("fsx coherence: unknown role %q", args[0])
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// historyLen is how many of a block's writes the shared memory keeps;
// blockRecord is a block's bytes there.
const (
	historyLen  = 64
	blockRecord = 8 * (2 + 2*historyLen)
)

func monotonicNs() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}
