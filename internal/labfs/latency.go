package labfs

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fusescope/fusescope/internal/fuseproto"
)

// Delay is a fixed delay with optional uniform jitter: Base ± Jitter.
type Delay struct {
	Base   time.Duration `json:"base"`
	Jitter time.Duration `json:"jitter,omitempty"`
}

// LatencySpec maps opcodes to delays; the "*" entry applies to the rest.
type LatencySpec map[string]Delay

// ParseLatency reads 'lookup=1ms,getattr=500us,read=2ms+-0.5ms,*=100us'
// (getattr= covers STATX too, unless statx= is given).
func ParseLatency(s string) (LatencySpec, error) {
	spec := LatencySpec{}
	if strings.TrimSpace(s) == "" {
		return spec, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, optionErr("latency", "%q: want OP=DURATION[+-JITTER], e.g. lookup=1ms,read=2ms+-0.5ms,*=100us", part)
		}
		key := "*"
		if name = strings.TrimSpace(name); name != "*" {
			op, err := fuseproto.ParseOpcode(name)
			if err != nil {
				return nil, optionErr("latency", ": %v", err)
			}
			key = op.String()
		}
		base, jitter, _ := strings.Cut(val, "+-")
		var d Delay
		var err error
		if d.Base, err = parseDuration(base); err != nil {
			return nil, optionErr("latency", "%s: %v", part, err)
		}
		if jitter != "" {
			if d.Jitter, err = parseDuration(jitter); err != nil {
				return nil, optionErr("latency", "%s: %v", part, err)
			}
			if d.Jitter > d.Base {
				return nil, optionErr("latency", "%s: jitter larger than the delay would make it negative", part)
			}
		}
		spec[key] = d
	}
	return spec, nil
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration like 500us or 2ms", s)
	}
	return d, nil
}

// formatDuration writes a duration as time.ParseDuration reads it, with us
// for microseconds: flags are typed, and µ is not on keyboards.
func formatDuration(d time.Duration) string {
	return strings.Replace(d.String(), "µs", "us", 1)
}

// String renders the spec back in the flag's syntax.
func (l LatencySpec) String() string {
	var parts []string
	for k, d := range l {
		p := strings.ToLower(k) + "=" + formatDuration(d.Base)
		if d.Jitter > 0 {
			p += "+-" + formatDuration(d.Jitter)
		}
		parts = append(parts, p)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// For returns the delay of one opcode. STATX has GETATTR's unless it has
// one of its own: the kernel sends STATX where a caller asks for the birth
// time, as stat(1) does, and its user expects getattr= to slow stat.
func (l LatencySpec) For(op fuseproto.Opcode) time.Duration {
	d, ok := l[op.String()]
	if !ok && op == fuseproto.Statx {
		d, ok = l[fuseproto.Getattr.String()]
	}
	if !ok {
		d, ok = l["*"]
	}
	if !ok || d.Base == 0 {
		return 0
	}
	if d.Jitter == 0 {
		return d.Base
	}
	return d.Base - d.Jitter + time.Duration(rand.Int64N(int64(2*d.Jitter)+1))
}

// ParseBandwidth reads 100MiB/s, 10MB/s, 1GiB/s, or a number of bytes/s.
func ParseBandwidth(s string) (uint64, error) {
	v, err := ParseSize(strings.TrimSuffix(strings.TrimSpace(s), "/s"))
	if err != nil {
		return 0, optionErr("bandwidth", "%q: give a rate like 100MiB/s", s)
	}
	return v, nil
}

// ParseSize reads 32MiB, 4KiB, 1GB, or a number of bytes.
func ParseSize(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return 0, nil
	}
	units := []struct {
		suffix string
		mult   uint64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"kB", 1e3}, {"B", 1}}
	mult := uint64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	// NaN and Inf parse as floats; a fraction of a byte would round to 0,
	// which means "no limit" to the flags that take sizes.
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return 0, fmt.Errorf("%q is not a size like 32MiB", s)
	}
	if b := v * float64(mult); b < 1 || b > maxSize {
		return 0, fmt.Errorf("%q is out of range: give 1 byte to 1TiB", s)
	}
	return uint64(v * float64(mult)), nil
}

const maxSize = 1 << 40

// sleeper waits precise short delays. Go's timers wake at least ~1 ms late
// on the kernels we run on, which would turn a 50 us emulated round trip
// into a millisecond; so the waiting thread sleeps in clock_nanosleep with a
// timer slack of 1 ns, for the delay less the expected wakeup lateness
// (about 30-45 us on the project's VMs). The expectation starts from a
// measurement at mount and follows every sleep's own lateness; a sleep that
// wakes before its delay is over (the expectation was too high, say from a
// mount on a busy machine) sleeps the rest. A waiting request holds its OS
// thread, as a synchronous RPC holds a daemon thread.
type sleeper struct {
	late atomic.Int64 // expected wakeup lateness, ns: a moving average
}

func newSleeper() *sleeper {
	s := &sleeper{}
	var lates []time.Duration
	for i := 0; i < 15; i++ {
		start := time.Now()
		s.nanosleep(100 * time.Microsecond)
		lates = append(lates, time.Since(start)-100*time.Microsecond)
	}
	sort.Slice(lates, func(i, j int) bool { return lates[i] < lates[j] })
	s.late.Store(int64(max(0, lates[len(lates)/2])))
	return s
}

func (s *sleeper) nanosleep(d time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

// sleep waits about d.
func (s *sleeper) sleep(d time.Duration) {
	if d <= 0 || s == nil {
		return
	}
	start := time.Now()
	late := time.Duration(s.late.Load())
	ask := max(0, d-late)
	s.nanosleep(ask)
	woke := time.Now()
	if ask > 0 {
		// Moving average over ~8 sleeps; concurrent updates may lose one.
		obs := woke.Sub(start) - ask
		s.late.Store(int64(late + (obs-late)/8))
	}
	if rest := d - woke.Sub(start); rest > 0 {
		s.nanosleep(rest)
	}
}

// link serialises data transfers on one emulated network link: each transfer
// of n bytes occupies the link for n/rate seconds after the previous one,
// and its request waits until its bytes have crossed.
type link struct {
	rate  uint64 // bytes/s
	sleep *sleeper
	mu    sync.Mutex
	free  time.Time // when the link is next idle
}

// wait blocks until n bytes have crossed the link.
func (l *link) wait(n int) {
	if l == nil || l.rate == 0 || n <= 0 {
		return
	}
	l.mu.Lock()
	now := time.Now()
	if l.free.Before(now) {
		l.free = now
	}
	l.free = l.free.Add(time.Duration(float64(n) / float64(l.rate) * float64(time.Second)))
	done := l.free
	l.mu.Unlock()
	l.sleep.sleep(time.Until(done))
}
