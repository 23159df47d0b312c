package doctor

import (
	"fmt"
	"sort"
	"strings"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/profile"
)

// The thresholds, each in docs/doctor.md: below them a pattern is too
// small to name, or too close to what a healthy mount does.
const (
	// killpriv: GETXATTR per write call (per WRITE where the record has
	// no calls), over at least this many writes.
	killprivMinWrites = 64
	killprivPerWrite  = 0.9
	// small-writes: WRITEs of at most this payload on average, at least
	// this many of them.
	smallWriteMax      = 8 << 10
	smallWriteMinCount = 256
	// split-writes: WRITEs whose payload is, on average, within this
	// fraction of one of the kernel's caps (max_pages), at least this many,
	// and at least splitWritesPerCall of them per write call.
	splitWriteTolerance = 0.01
	splitWriteMinCount  = 64
	splitWritesPerCall  = 1.9
	// direct-io: reads that each sent a READ, at least this many calls.
	directMinCalls   = 256
	directSentShare  = 0.9
	directReadPerHit = 0.9
	// attr-storm: stat-like calls, at least stormCallsPerNode a file, that
	// sent requests.
	stormMinCalls     = 256
	stormSentShare    = 0.8
	stormCallsPerNode = 2
	// readdir-lookups: LOOKUPs per READDIR with no READDIRPLUS.
	readdirMinLookups   = 100
	readdirLookupsPerRd = 10
	// serial-dirops: the share of the stat-like calls' time spent outside
	// their requests, and that time per call, over at least this much time
	// in the calls: a single caller on a loaded machine waits outside FUSE
	// too (about 0.2 ms a call on this 2-vCPU VM under make test), for the
	// processor.
	serialOutsideShare = 0.5
	serialMinCallNs    = 100e6
	serialMinFuseNs    = 200e3 // per call that sent requests: slow enough for queueing to matter
	serialMinOutsideNs = 500e3 // per such call: more than a loaded machine's scheduling delays
	// max-background: the share of fusectl's samples at max_background.
	backgroundAtLimit    = 0.25
	backgroundMinSamples = 10
	// daemon-stage: the daemon's share of the requests' time, with a mean
	// hold of at least daemonMinMeanNs, over at least daemonMinNs.
	daemonShare     = 0.75
	daemonMinMeanNs = 100e3
	daemonMinNs     = 50e6
	daemonMinRate   = 10 << 20 // bytes/s: READ and WRITE faster than this are the data's time, not the daemon's (a loaded 2-vCPU machine wrote 1 MiB to tmpfs at 23 MiB/s; a backend slower than 10 MiB/s, a 100 Mbit/s link, is the daemon's)
	// enosys: repeated answers that an opcode is not supported.
	enosysRepeats = 2
	notsupRepeats = 64
	// keep-cache: opens, and the pages dropped against those added.
	keepCacheMinOpens    = 8
	keepCacheMinPages    = 256
	keepCacheDroppedPart = 0.5
	// no-forget: nodes looked up, none forgotten.
	noForgetMinLookups = 5000
	// forget-storm: nodes forgotten, against the LOOKUPs, which came back
	// for the same files.
	stormMinForgotten   = 1000
	stormForgottenShare = 0.5
	stormLookupsPerNode = 1.5
	// passthrough and io_uring: requests that could have used them.
	passthroughMinIO    = 256
	passthroughMinBytes = 32 << 20
	uringMinRequests    = 256
)

// The FUSE headers a WRITE carries before its data: fuse_in_header and
// fuse_write_in.
const writeHeaderBytes = 40 + 40

var rules = []rule{
	{"killpriv", killpriv},
	{"small-writes", smallWrites},
	{"split-writes", splitWrites},
	{"direct-io", directIO},
	{"attr-storm", attrStorm},
	{"readdir-lookups", readdirLookups},
	{"serial-dirops", serialDirops},
	{"max-background", maxBackground},
	{"daemon-stage", daemonStage},
	{"enosys", enosys},
	{"keep-cache", keepCache},
	{"no-forget", noForget},
	{"forget-storm", forgetStorm},
	{"hung", hung},
	{"passthrough", passthrough},
	{"io-uring", ioURing},
}

func killpriv(in *input) ([]profile.Finding, *profile.Undecided) {
	var out []profile.Finding
	// The kernel asks at each write() call, before the data reaches the
	// page cache: with write-back caching many calls make one WRITE, so
	// the calls are the measure where the record has them.
	calls, _ := in.calls(writeCalls...)
	for _, c := range in.conns {
		writes, getx := c.count(fuseproto.Write), c.count(fuseproto.Getxattr)
		per, what := writes, "WRITE"
		if calls.Count > 0 && c == in.busiest(fuseproto.Getxattr) {
			per, what = calls.Count, "write calls"
		}
		if per < killprivMinWrites || ratio(getx, per) < killprivPerWrite {
			continue
		}
		out = append(out, profile.Finding{
			Conn:  c.id,
			Title: "a GETXATTR before every write",
			Evidence: []string{
				fmt.Sprintf("%s GETXATTR for %s %s (%.2f per write), %s of FUSE time", n(getx), n(per), what, ratio(getx, per), dur(float64(c.time(fuseproto.Getxattr)))),
			},
			Cause: "the daemon does not negotiate FUSE_HANDLE_KILLPRIV_V2, so before each write the kernel asks for security.capability to know whether to remove it, and a \"no such attribute\" answer is not cached",
			Fix: []string{
				"libfuse: in init(), fuse_set_feature_flag(conn, FUSE_CAP_HANDLE_KILLPRIV_V2), and clear suid/sgid and security.capability when a WRITE carries FUSE_WRITE_KILL_SUIDGID",
				"go-fuse: MountOptions.ExtraCapabilities |= fuse.CAP_HANDLE_KILLPRIV_V2, clearing them in Write when WriteIn.WriteFlags has WRITE_KILL_SUIDGID",
				"a daemon without extended attributes: answer GETXATTR with ENOSYS once (the kernel stops asking)",
				"lab fs: --killpriv-v2 (the default)",
			},
			Gain: "one GETXATTR per file instead of one per write: 64 writes made 64 GETXATTR without it and 1 with it (TestLabFSKillprivV2); passthrough_hp's 4 KiB write runs made 16,397 requests where the lab fs made 18 (docs/performance.md, passthrough preset)",
			Cost: c.time(fuseproto.Getxattr),
		})
	}
	return out, nil
}

// writePayload is the mean data a connection's WRITEs carried.
func writePayload(c *conn) float64 {
	o := c.ops[fuseproto.Write.String()]
	if o == nil || o.Count == 0 || o.ReqBytes < o.Count*writeHeaderBytes {
		return 0
	}
	return float64(o.ReqBytes-o.Count*writeHeaderBytes) / float64(o.Count)
}

func smallWrites(in *input) ([]profile.Finding, *profile.Undecided) {
	var out []profile.Finding
	for _, c := range in.conns {
		writes := c.count(fuseproto.Write)
		mean := writePayload(c)
		if writes < smallWriteMinCount || mean == 0 || mean > smallWriteMax {
			continue
		}
		out = append(out, profile.Finding{
			Conn:  c.id,
			Title: "writes sent one small request each",
			Evidence: []string{
				fmt.Sprintf("%s WRITE of %s on average, %s of FUSE time", n(writes), bytesOf(mean), dur(float64(c.time(fuseproto.Write)))),
			},
			Cause: "without write-back caching each write() is a WRITE of its own size, sent and waited for (or max_write is this small)",
			Fix: []string{
				"libfuse: -o writeback_cache (FUSE_CAP_WRITEBACK_CACHE), or fuse_set_feature_flag(conn, FUSE_CAP_WRITEBACK_CACHE) in init()",
				"go-fuse: MountOptions.ExtraCapabilities |= fuse.CAP_WRITEBACK_CACHE",
				"a max_write of at least 128 KiB (libfuse -o max_write=1048576 with max_pages, go-fuse MountOptions.MaxWrite)",
				"lab fs: --writeback-cache",
			},
			Gain: "fio 4 KiB sequential writes 4.58x faster with write-back [95% CI 3.91, 5.37], 16,402 WRITEs a run becoming 87 (bench --preset writeback, docs/performance.md)",
			Cost: c.time(fuseproto.Write),
		})
	}
	return out, nil
}

// The sizes at which the kernel splits writes when the daemon does not
// raise max_pages (32 pages) or when it does, up to fs.fuse.max_pages_limit.
var splitSizes = []float64{32 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10}

var writeCalls = []string{"write", "pwrite64", "writev", "pwritev", "pwritev2"}

func splitWrites(in *input) ([]profile.Finding, *profile.Undecided) {
	if !in.callsRecorded() {
		return nil, needCalls
	}
	calls, _ := in.calls(writeCalls...)
	c := in.busiest(fuseproto.Write)
	if c == nil || c.count(fuseproto.Write) < splitWriteMinCount || calls.Count == 0 {
		return nil, nil
	}
	writes, mean := c.count(fuseproto.Write), writePayload(c)
	perCall := ratio(writes, calls.Count)
	if perCall < splitWritesPerCall {
		return nil, nil
	}
	for _, size := range splitSizes {
		if mean < size*(1-splitWriteTolerance) || mean > size*(1+splitWriteTolerance) {
			continue
		}
		return []profile.Finding{{
			Conn:  c.id,
			Title: fmt.Sprintf("large writes split into %s requests", bytesOf(size)),
			Evidence: []string{
				fmt.Sprintf("%s write calls sent %s WRITE (%.1f per call) of %s on average, %s of FUSE time",
					n(calls.Count), n(writes), perCall, bytesOf(mean), dur(float64(c.time(fuseproto.Write)))),
			},
			Cause: fmt.Sprintf("the application writes more than %s at a time, but max_write, or max_pages (%d pages), caps each WRITE at that", bytesOf(size), int(size/4096)),
			Fix: []string{
				"libfuse: -o max_write=1048576, and conn->max_pages (FUSE_CAP_MAX_PAGES) of 256 in init()",
				"go-fuse: MountOptions.MaxWrite = 1 << 20 (max_pages follows)",
				"raise sysctl fs.fuse.max_pages_limit where the daemon asks for more than 256 pages",
				"lab fs: --max-write 1MiB (the default)",
			},
			Gain: "fewer, larger WRITEs: the lab fs optimised (max_write 1 MiB, write-back) against unoptimised (4 KiB) wrote 1 MiB sequentially 1.75x faster (bench --preset fast17: 0.35 against 0.20 of native, docs/performance.md)",
			Cost: uint64(float64(c.time(fuseproto.Write)) * (1 - 1/perCall)),
		}}, nil
	}
	return nil, nil
}

var readCalls = []string{"read", "pread64", "readv", "preadv", "preadv2"}

// busiest is the connection with the most requests of op: where the
// application's calls, which the record does not split by mount, went.
func (in *input) busiest(op fuseproto.Opcode) *conn {
	var best *conn
	for _, c := range in.conns {
		if best == nil || c.count(op) > best.count(op) {
			best = c
		}
	}
	return best
}

func directIO(in *input) ([]profile.Finding, *profile.Undecided) {
	if !in.callsRecorded() {
		return nil, needCalls
	}
	calls, _ := in.calls(readCalls...)
	c := in.busiest(fuseproto.Read)
	if c == nil || calls.Count < directMinCalls || ratio(calls.WithRequests, calls.Count) < directSentShare ||
		ratio(c.count(fuseproto.Read), calls.Count) < directReadPerHit {
		return nil, nil
	}
	ev := []string{
		fmt.Sprintf("%s of %s read calls sent a request (%s), %s READ on %s: one READ per read()", n(calls.WithRequests), n(calls.Count),
			pct(ratio(calls.WithRequests, calls.Count)), n(c.count(fuseproto.Read)), c.label),
		fmt.Sprintf("%s of the calls' time in FUSE", dur(float64(calls.FuseNs))),
	}
	if c.cache != nil {
		ev = append(ev, fmt.Sprintf("page cache: %s pages added, %s read through it", n(c.cache.Added), n(c.cache.ReadPages)))
	}
	return []profile.Finding{{
		Conn:     c.id,
		Title:    "a READ for every read()",
		Evidence: ev,
		Cause:    "the files are opened with direct_io (FOPEN_DIRECT_IO), or read with O_DIRECT, so the page cache and read-ahead never serve a read",
		Fix: []string{
			"libfuse: leave fi->direct_io unset in open() (high-level: no -o direct_io), and set fi->keep_cache where the data does not change behind the mount",
			"go-fuse: leave fuse.FOPEN_DIRECT_IO out of Open's fuseFlags",
			"lab fs: leave out --direct-io",
		},
		Gain: "a file read twice through the page cache: walk and cat figures of bench --preset quick and kernel-cache (default against nocache: 0.083x the walk's rate with the caches off, docs/performance.md)",
		Cost: calls.FuseNs,
	}}, nil
}

var statCalls = []string{"stat", "lstat", "fstat", "newfstatat", "statx", "access", "faccessat", "faccessat2"}

func attrStorm(in *input) ([]profile.Finding, *profile.Undecided) {
	if !in.callsRecorded() {
		return nil, needCalls
	}
	if !in.rec.Meta.Measures(profile.MeasuredFiles) {
		return nil, &profile.Undecided{Missing: "the number of files the requests were about", Record: "run fusescope doctor, or trace --files N with --calls"}
	}
	calls, _ := in.calls(statCalls...)
	c := in.busiest(fuseproto.Lookup)
	if c == nil || c.mount == nil || c.mount.Nodes == 0 || calls.Count < stormMinCalls || ratio(calls.WithRequests, calls.Count) < stormSentShare {
		return nil, nil
	}
	perNode := ratio(calls.Count, c.mount.Nodes)
	if perNode < stormCallsPerNode {
		return nil, nil
	}
	if ratio(c.mount.ForgetNodes, c.count(fuseproto.Lookup)) >= stormForgottenShare {
		return nil, nil // the kernel forgot the files: forget-storm's finding, not the timeouts'
	}
	lookups, getattrs := c.count(fuseproto.Lookup), c.count(fuseproto.Getattr)+c.count(fuseproto.Statx)
	return []profile.Finding{{
		Conn:  c.id,
		Title: "LOOKUP and GETATTR for every stat",
		Evidence: []string{
			fmt.Sprintf("%s stat-like calls on %s files (%.1f a file), and %s of them sent requests (%s): %s LOOKUP, %s GETATTR and STATX",
				n(calls.Count), n(c.mount.Nodes), perNode, n(calls.WithRequests), pct(ratio(calls.WithRequests, calls.Count)), n(lookups), n(getattrs)),
			fmt.Sprintf("%s of the calls' time in FUSE", dur(float64(calls.FuseNs))),
		},
		Cause: "entry and attribute timeouts of 0 (or shorter than the time between calls): the kernel looks every path component up again and asks for attributes at every call, though the files were just looked up",
		Fix: []string{
			"libfuse: -o entry_timeout=1,attr_timeout=1 (high-level), or the timeouts in fuse_reply_entry and fuse_reply_attr (low-level); longer for data that does not change",
			"go-fuse: fs.Options{EntryTimeout: &d, AttrTimeout: &d} with d = time.Second",
			"sshfs: -o cache_timeout; mergerfs: cache.entry, cache.attr; CernVM-FS: read-only data can take long timeouts",
			"lab fs: --entry-timeout 1s --attr-timeout 1s (the default)",
		},
		Gain: "a walk of 2,000 files twice: 12,326 LOOKUPs a run with the timeouts at 0 against 41 with 1 s, the walk 12x faster (bench --preset kernel-cache, docs/performance.md); the price in stale reads: bench --preset coherence",
		Cost: calls.FuseNs,
	}}, nil
}

func readdirLookups(in *input) ([]profile.Finding, *profile.Undecided) {
	var out []profile.Finding
	for _, c := range in.conns {
		rd, plus, lookups := c.count(fuseproto.Readdir), c.count(fuseproto.Readdirplus), c.count(fuseproto.Lookup)
		if rd == 0 || plus > 0 || lookups < readdirMinLookups || ratio(lookups, rd) < readdirLookupsPerRd {
			continue
		}
		out = append(out, profile.Finding{
			Conn:  c.id,
			Title: "READDIR, then a LOOKUP per entry",
			Evidence: []string{
				fmt.Sprintf("%s READDIR and no READDIRPLUS, then %s LOOKUP (%.0f per READDIR), %s of FUSE time in LOOKUP",
					n(rd), n(lookups), ratio(lookups, rd), dur(float64(c.time(fuseproto.Lookup)))),
			},
			Cause: "the daemon does not offer READDIRPLUS, so a listing that needs each entry's attributes (ls -l, find, a build) looks every name up on its own",
			Fix: []string{
				"libfuse: implement readdirplus (low-level) or fill_dir with FUSE_FILL_DIR_PLUS (high-level), with FUSE_CAP_READDIRPLUS (and FUSE_CAP_READDIRPLUS_AUTO)",
				"go-fuse: leave MountOptions.DisableReadDirPlus false (the default)",
				"lab fs: --readdirplus auto (the default)",
			},
			Gain: "a walk of 2,000 files in 400 directories at 200 us a request: 2.01x faster with readdirplus [95% CI 1.85, 2.18], LOOKUPs 2,402 -> 352 (bench --preset readdir, docs/performance.md)",
			Cost: c.time(fuseproto.Lookup),
		})
	}
	return out, nil
}

func serialDirops(in *input) ([]profile.Finding, *profile.Undecided) {
	if !in.callsRecorded() {
		return nil, needCalls
	}
	calls, callNs := in.calls(statCalls...)
	c := in.busiest(fuseproto.Lookup)
	if c == nil || c.count(fuseproto.Lookup) == 0 || float64(callNs) < serialMinCallNs || ratio(calls.WithRequests, calls.Count) < stormSentShare {
		return nil, nil
	}
	// All the attribute requests the mount saw: more than the calls
	// waited for (FuseNs counts only each call's last request), so what
	// is left of the calls' time was surely spent outside FUSE.
	fuseNs := c.time(fuseproto.Lookup) + c.time(fuseproto.Getattr) + c.time(fuseproto.Statx)
	if fuseNs > callNs || float64(fuseNs)/float64(calls.WithRequests) < serialMinFuseNs {
		return nil, nil
	}
	outside := 1 - ratio(fuseNs, callNs)
	if outside < serialOutsideShare || float64(callNs-fuseNs)/float64(calls.WithRequests) < serialMinOutsideNs {
		return nil, nil
	}
	return []profile.Finding{{
		Conn:  c.id,
		Title: "directory operations serialised",
		Evidence: []string{
			fmt.Sprintf("%s stat-like calls took %s, all the mount's LOOKUP, GETATTR and STATX requests %s: %s of the calls' time waited outside FUSE",
				n(calls.Count), dur(float64(callNs)), dur(float64(fuseNs)), pct(outside)),
		},
		Cause: "without FUSE_PARALLEL_DIROPS the kernel sends one LOOKUP or READDIR at a time per directory, so concurrent callers queue on the directory's lock before their requests are sent",
		Fix: []string{
			"libfuse: FUSE_CAP_PARALLEL_DIROPS (on by default since 3.0; do not clear it in init() unless the daemon cannot take concurrent lookups in one directory)",
			"go-fuse: on by default (leave fuse.CAP_PARALLEL_DIROPS out of MountOptions.DisabledCapabilities)",
			"lab fs: --parallel-dirops (the default)",
		},
		Gain: "the waiting outside FUSE, as measured here: concurrent lookups in one directory then overlap in the daemon",
		Cost: callNs - fuseNs,
	}}, nil
}

func maxBackground(in *input) ([]profile.Finding, *profile.Undecided) {
	var out []profile.Finding
	sampled := false
	for _, c := range in.conns {
		if c.mount == nil || c.mount.Connection == nil || c.mount.Connection.Samples == 0 {
			continue
		}
		sampled = true
		ci := c.mount.Connection
		if ci.Samples < backgroundMinSamples || ratio(ci.AboveBackground, ci.Samples) < backgroundAtLimit {
			continue
		}
		next := max(4*ci.MaxBackground, 64)
		fusectl := fmt.Sprintf("/sys/fs/fuse/connections/%d", c.id)
		bg := c.time(fuseproto.Read) + c.time(fuseproto.Write)
		out = append(out, profile.Finding{
			Conn:  c.id,
			Title: "requests held back at max_background",
			Evidence: []string{
				fmt.Sprintf("%s waiting in %s of %s samples of %s/waiting (at most %s) with max_background %s and congestion_threshold %s",
					"more than max_background", pct(ratio(ci.AboveBackground, ci.Samples)), n(ci.Samples), fusectl, n(ci.WaitingPeak), n(ci.MaxBackground), n(ci.CongestionThreshold)),
				fmt.Sprintf("READ and WRITE (read-ahead and write-back are background requests): %s of FUSE time", dur(float64(bg))),
			},
			Cause: "the kernel lets at most max_background background requests (read-ahead, write-back, asynchronous direct I/O) reach the daemon at once and holds the rest in its own queue, where readers stall past the congestion threshold",
			Fix: []string{
				fmt.Sprintf("now: echo %d > %s/max_background; echo %d > %s/congestion_threshold", next, fusectl, next*3/4, fusectl),
				fmt.Sprintf("for every mount: the daemon asks for it at INIT: libfuse -o max_background=%d (fuse_parse_conn_info_opts, or conn->max_background in init()), go-fuse MountOptions.MaxBackground = %d, lab fs --max-background %d", next, next, next),
				"across reboots: put the option in the mount's fstab or unit; a daemon run by an unprivileged user is capped by sysctl fs.fuse.max_user_bgreq: raise it in /etc/sysctl.d/",
			},
			Gain: "mountpoint-s3 raised max_background from 16 to 64 and went from 65 to 99 Gbps (its PR #1137); here, the background requests' time above",
			Cost: bg,
		})
	}
	if !sampled {
		return nil, &profile.Undecided{
			Missing: "samples of fusectl's waiting count during the run",
			Record:  "run fusescope doctor on the live mount (it samples /sys/fs/fuse/connections/N/waiting)",
		}
	}
	return out, nil
}

func daemonStage(in *input) ([]profile.Finding, *profile.Undecided) {
	if !in.stages {
		return nil, needStages
	}
	var out []profile.Finding
	for _, c := range in.conns {
		var daemonNs, totalNs, held uint64
		type opHold struct {
			op   string
			mean float64
			sum  uint64
			p99  float64
		}
		var holds []opHold
		for name, o := range c.ops {
			d := o.Stage(profile.StageDaemon)
			if d == nil || d.Count == 0 {
				continue
			}
			// Data requests take the daemon time in proportion to their
			// size: only where it moves them slower than daemonMinRate
			// does their time count against it.
			if bytes := dataBytes(o); bytes > 0 && float64(bytes)/(float64(d.Sum)/1e9) >= daemonMinRate {
				continue
			}
			daemonNs += d.Sum
			totalNs += o.Latency.Sum
			held += d.Count
			holds = append(holds, opHold{name, d.Mean(), d.Sum, d.Quantile(0.99)})
		}
		if held == 0 || float64(daemonNs) < daemonMinNs || ratio(daemonNs, totalNs) < daemonShare || float64(daemonNs)/float64(held) < daemonMinMeanNs {
			continue
		}
		sort.Slice(holds, func(i, j int) bool { return holds[i].sum > holds[j].sum })
		ev := []string{fmt.Sprintf("the daemon held the requests %s of their %s (%s), %s a request on average",
			dur(float64(daemonNs)), dur(float64(totalNs)), pct(ratio(daemonNs, totalNs)), dur(float64(daemonNs)/float64(held)))}
		for i, h := range holds {
			if i == 3 {
				break
			}
			ev = append(ev, fmt.Sprintf("%s: %s in the daemon, %s mean, p99 %s", h.op, dur(float64(h.sum)), dur(h.mean), dur(h.p99)))
		}
		daemons := []string{}
		if c.mount != nil {
			for _, d := range c.mount.Daemons {
				daemons = append(daemons, fmt.Sprintf("%s (pid %d)", d.Comm, d.PID))
			}
		}
		who := "the daemon"
		if len(daemons) > 0 {
			who = strings.Join(daemons, ", ")
		}
		out = append(out, profile.Finding{
			Conn:     c.id,
			Title:    "the daemon's own time dominates",
			Evidence: ev,
			Cause:    fmt.Sprintf("%s spends the requests' time itself (its backend, locks or computation): nothing the kernel's settings can take away", who),
			Fix: []string{
				"profile the daemon: perf record -g -p PID, or uprobes on its handlers; fusescope trace --stages --slower D names the slow requests and their files",
				"for a remote backend: cache in the daemon (the lab fs's --md-cache), pipeline reads (--read-pipeline), write behind (--write-behind)",
			},
			Gain: "not from a setting: bench --preset pipelining shows 4.52x for pipelined reads over an emulated WAN, readdir 2.08x for a metadata cache (docs/performance.md)",
			Cost: daemonNs,
		})
	}
	return out, nil
}

// dataBytes is the data a READ's or WRITE's requests carried; 0 for
// other opcodes.
func dataBytes(o *profile.OpStats) uint64 {
	switch o.Op {
	case "READ":
		if o.ReplyBytes > o.Count*16 {
			return o.ReplyBytes - o.Count*16
		}
	case "WRITE":
		if o.ReqBytes > o.Count*writeHeaderBytes {
			return o.ReqBytes - o.Count*writeHeaderBytes
		}
	}
	return 0
}

// The opcodes whose ENOSYS the kernel remembers for the connection's life,
// sending none again.
var enosysRemembered = map[string]bool{
	"FLUSH": true, "FSYNC": true, "FSYNCDIR": true, "GETXATTR": true, "SETXATTR": true, "LISTXATTR": true,
	"REMOVEXATTR": true, "ACCESS": true, "CREATE": true, "LSEEK": true, "COPY_FILE_RANGE": true,
	"FALLOCATE": true, "OPEN": true, "OPENDIR": true, "POLL": true, "TMPFILE": true, "STATX": true,
	"RENAME2": true, "SYNCFS": true, "BMAP": true, "COPY_FILE_RANGE_64": true,
}

func enosys(in *input) ([]profile.Finding, *profile.Undecided) {
	var out []profile.Finding
	for _, c := range in.conns {
		for name, o := range c.ops {
			nosys := o.Errnos["ENOSYS"]
			notsup := o.Errnos["EOPNOTSUPP"] + o.Errnos["ENOTSUP"]
			var f profile.Finding
			switch {
			case nosys >= enosysRepeats && !enosysRemembered[name]:
				f = profile.Finding{
					Title:    name + " answered ENOSYS again and again",
					Evidence: []string{fmt.Sprintf("%s of %s %s failed with ENOSYS, %s of FUSE time", n(nosys), n(o.Count), name, dur(float64(o.Latency.Sum)*ratio(nosys, o.Count)))},
					Cause:    "the kernel does not remember ENOSYS for " + name + ", so every call that needs it makes a round trip to be told again",
					Fix:      []string{"implement " + name + " in the daemon, or have the application stop asking (an ENOSYS is final for this opcode)"},
				}
			case nosys >= enosysRepeats:
				f = profile.Finding{
					Title:    name + " answered ENOSYS more than once",
					Evidence: []string{fmt.Sprintf("%s of %s %s failed with ENOSYS", n(nosys), n(o.Count), name)},
					Cause:    "the kernel stops sending " + name + " after its first ENOSYS on a connection: several mean several connections, or a daemon that answers ENOSYS to some requests only",
					Fix:      []string{"answer " + name + " the same way every time: ENOSYS once for good, or implement it"},
				}
			case notsup >= notsupRepeats:
				f = profile.Finding{
					Title:    name + " answered EOPNOTSUPP at every call",
					Evidence: []string{fmt.Sprintf("%s of %s %s failed with EOPNOTSUPP, %s of FUSE time", n(notsup), n(o.Count), name, dur(float64(o.Latency.Sum)*ratio(notsup, o.Count)))},
					Cause:    "EOPNOTSUPP is an answer about one request, so the kernel keeps asking; an ENOSYS would stop it after one" + map[bool]string{true: "", false: " (for opcodes whose ENOSYS it remembers)"}[enosysRemembered[name]],
					Fix: []string{
						"a daemon that supports no " + name + ": reply ENOSYS (libfuse: leave the operation out, or fuse_reply_err(req, ENOSYS); go-fuse: return syscall.ENOSYS, or MountOptions.DisableXAttrs for xattrs)",
						"lab fs: --xattrs enosys against --xattrs eopnotsupp",
					},
				}
			default:
				continue
			}
			f.Conn = c.id
			f.Gain = "every such request saved: one round trip each, the time above"
			f.Cost = uint64(float64(o.Latency.Sum) * ratio(nosys+notsup, o.Count))
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Title < out[j].Title })
	return out, nil
}

func keepCache(in *input) ([]profile.Finding, *profile.Undecided) {
	recorded := in.rec.Meta.Measures(profile.MeasuredPageCache)
	var out []profile.Finding
	for _, c := range in.conns {
		if c.cache == nil {
			continue
		}
		recorded = true
		opens, changed := c.count(fuseproto.Open), c.count(fuseproto.Write)+c.count(fuseproto.Setattr)
		pc := c.cache
		if opens < keepCacheMinOpens || pc.Added < keepCacheMinPages || ratio(pc.Removed, pc.Added) < keepCacheDroppedPart || changed > 0 {
			continue
		}
		out = append(out, profile.Finding{
			Conn:  c.id,
			Title: "the page cache dropped at every open",
			Evidence: []string{
				fmt.Sprintf("%s pages added to the page cache and %s removed (%s) over %s OPEN, with no WRITE or SETATTR through the mount",
					n(pc.Added), n(pc.Removed), pct(ratio(pc.Removed, pc.Added)), n(opens)),
				fmt.Sprintf("%s READ, %s of FUSE time", n(c.count(fuseproto.Read)), dur(float64(c.time(fuseproto.Read)))),
			},
			Cause: "the daemon opens files without keep_cache, so the kernel drops a file's cached pages at each open and reads them again, though nothing changed through the mount",
			Fix: []string{
				"libfuse: fi->keep_cache = 1 in open() for files that do not change behind the mount (-o kernel_cache in the high-level API); with FUSE_CAP_AUTO_INVAL_DATA a change of size or mtime still drops them",
				"go-fuse: fuse.FOPEN_KEEP_CACHE in Open's fuseFlags",
				"lab fs: --keep-cache, or --invalidation cto (drops only files that changed since their last close)",
			},
			Gain: "the second and later reads from the page cache: pages added once instead of at each open; the price in stale reads: bench --preset coherence",
			Cost: c.time(fuseproto.Read),
		})
	}
	if !recorded {
		return nil, &profile.Undecided{Missing: "the mounts' page cache", Record: "run fusescope doctor (it counts the page cache where the kernel allows), or trace --page-cache"}
	}
	return out, nil
}

func hung(in *input) ([]profile.Finding, *profile.Undecided) {
	var out []profile.Finding
	for _, c := range in.conns {
		if len(c.hung) == 0 {
			continue
		}
		oldest := c.hung[0]
		for _, h := range c.hung {
			if h.Age > oldest.Age {
				oldest = h
			}
		}
		ev := []string{fmt.Sprintf("%s requests in flight for longer than the hung threshold, the oldest a %s for %s", n(uint64(len(c.hung))), oldest.Op, dur(float64(oldest.Age)))}
		seen := map[uint32]bool{}
		for _, h := range c.hung {
			if h.PID != 0 && !seen[h.PID] && len(seen) < 5 {
				seen[h.PID] = true
				state := ""
				switch h.ThreadState {
				case "D":
					state = ", in state D (uninterruptible: not even SIGKILL ends it)"
				case "":
				default:
					state = ", in state " + h.ThreadState
				}
				ev = append(ev, fmt.Sprintf("%s (thread %d) waits for its %s%s", h.Comm, h.PID, h.Op, state))
			}
		}
		fusectl := fmt.Sprintf("/sys/fs/fuse/connections/%d", c.id)
		out = append(out, profile.Finding{
			Conn:     c.id,
			Title:    "requests the daemon does not answer",
			Evidence: ev,
			Cause:    "the daemon has stopped answering (stuck on its backend, deadlocked, or stopped), and the threads waiting for it cannot be killed until it answers",
			Fix: []string{
				"look at the daemon first: its threads' stacks (cat /proc/PID/task/*/stack, gdb, or SIGQUIT for a Go daemon)",
				fmt.Sprintf("to free the waiting threads: echo 1 > %s/abort (every request fails with ENOTCONN), then umount -l %s and restart the daemon", fusectl, c.label),
			},
			Gain: "the waiting threads are freed",
			Cost: uint64(oldest.Age) * uint64(len(c.hung)),
		})
	}
	return out, nil
}

func passthrough(in *input) ([]profile.Finding, *profile.Undecided) {
	if !in.stages {
		return nil, &profile.Undecided{Missing: "the opens answered with passthrough", Record: "run fusescope doctor, or trace --stages"}
	}
	if !in.kernelAtLeast(6, 9) {
		return nil, nil
	}
	var out []profile.Finding
	for _, c := range in.conns {
		io := c.count(fuseproto.Read) + c.count(fuseproto.Write)
		data := c.bytes(fuseproto.Read) + c.bytes(fuseproto.Write)
		if (io < passthroughMinIO && data < passthroughMinBytes) || c.mount == nil || c.mount.PassthroughOpens > 0 {
			continue
		}
		var backing []string
		for _, d := range c.mount.Daemons {
			if d.Backing != "" {
				backing = append(backing, fmt.Sprintf("%s (pid %d) holds files on %s", d.Comm, d.PID, d.Backing))
			}
		}
		if len(backing) == 0 {
			continue
		}
		ioNs := c.time(fuseproto.Read) + c.time(fuseproto.Write)
		out = append(out, profile.Finding{
			Conn:  c.id,
			Title: "reads and writes not passed through",
			Evidence: append([]string{
				fmt.Sprintf("%s READ and WRITE through the daemon (%s), %s of FUSE time, and no open answered with passthrough", n(io), bytesOf(float64(data)), dur(float64(ioNs))),
			}, backing...),
			Cause: "the daemon serves plain files from a local file system but copies their data through /dev/fuse; since Linux 6.9 the kernel can send the reads and writes of such a file to the backing file itself",
			Fix: []string{
				"libfuse 3.17+: FUSE_CAP_PASSTHROUGH in init(), fuse_passthrough_open(req, backing_fd) in open(), fi->backing_id (passthrough_hp --passthrough); needs CAP_SYS_ADMIN, and no write-back cache",
				"go-fuse: fs.FileHandle with a backing fd (fs.NewLoopbackFile) on a server with passthrough (root)",
				"lab fs: --passthrough",
			},
			Gain: "fio 4 KiB reads, writes, random reads and writes at 1.11, 0.97, 1.04 and 0.94 of native with the lab fs's passthrough, against 0.61, 0.22, 0.52 and 0.22 without (bench --preset passthrough, docs/performance.md)",
			Cost: ioNs,
		})
	}
	return out, nil
}

// asksURing says whether a daemon's command line asks for FUSE over
// io_uring (libfuse's -o io_uring).
func asksURing(m *profile.Mount) (string, bool) {
	if m == nil {
		return "", false
	}
	for _, d := range m.Daemons {
		for _, a := range d.Args {
			for _, o := range strings.Split(a, ",") {
				if o == "io_uring" {
					return fmt.Sprintf("%s (pid %d) was started with %s", d.Comm, d.PID, strings.Join(d.Args, " ")), true
				}
			}
		}
	}
	return "", false
}

func ioURing(in *input) ([]profile.Finding, *profile.Undecided) {
	if !in.kernelAtLeast(6, 14) {
		return nil, nil
	}
	var out []profile.Finding
	for _, c := range in.conns {
		var ring uint64
		for _, o := range c.ops {
			ring += o.URing
		}
		if ring > 0 || c.requests < uringMinRequests {
			continue
		}
		asked, asks := asksURing(c.mount)
		f := profile.Finding{
			Conn: c.id,
			Gain: "passthrough_hp over its ring against /dev/fuse on 2 vCPUs: creates 1.95x, 4 KiB writes 1.30x, 1 MiB O_DIRECT reads 1.42x, nothing for buffered reads (bench --preset io_uring, docs/performance.md)",
			Cost: c.fuseNs / 3,
		}
		switch {
		case asks && !in.rec.Meta.FuseURing:
			f.Title = "FUSE over io_uring asked for, not offered"
			f.Evidence = []string{asked, fmt.Sprintf("%s requests, all through /dev/fuse: the kernel's enable_uring is off", n(c.requests))}
			f.Cause = "the kernel offers the ring at INIT only while fuse's enable_uring parameter is on, so the daemon fell back to /dev/fuse"
			f.Fix = []string{"echo Y > /sys/module/fuse/parameters/enable_uring before mounting (or fuse.enable_uring=1 on the kernel's command line), then mount again"}
		case asks:
			f.Title = "FUSE over io_uring asked for, fallen back to /dev/fuse"
			f.Evidence = []string{asked, fmt.Sprintf("%s requests, none over the ring, while the kernel offered it", n(c.requests))}
			f.Cause = "the daemon's ring set-up failed (liburing missing from its build, RLIMIT_MEMLOCK, the queue depth) and it went on over /dev/fuse"
			f.Fix = []string{"read the daemon's log for its io_uring error; libfuse 3.18 needs to be built with liburing; raise RLIMIT_MEMLOCK (ulimit -l) for its rings"}
		case in.rec.Meta.FuseURing:
			f.Title = "FUSE over io_uring enabled but not used"
			f.Evidence = []string{fmt.Sprintf("%s requests, none over the ring, while the kernel offered it (enable_uring is on)", n(c.requests))}
			f.Cause = "the daemon reads requests from /dev/fuse: it does not ask for the ring at INIT"
			f.Fix = []string{"libfuse 3.18+: -o io_uring (built with liburing); fusescope trace then shows `transport io_uring`", "go-fuse and the lab fs: no ring support yet"}
		default:
			continue
		}
		out = append(out, f)
	}
	return out, nil
}

// needForgets is what the FORGET rules say when the record has no counts
// of them.
var needForgets = &profile.Undecided{
	Missing: "the FORGET and BATCH_FORGET requests the daemons read (no fuse tracepoint sees them)",
	Record:  "run fusescope doctor, or trace --stages, on a kernel where the daemons' reads of /dev/fuse are timed (not over io_uring, not Linux 7.3's fuse_request_sent)",
}

func noForget(in *input) ([]profile.Finding, *profile.Undecided) {
	if !in.rec.Meta.Measures(profile.MeasuredForgets) {
		return nil, needForgets
	}
	var out []profile.Finding
	for _, c := range in.conns {
		o := c.ops[fuseproto.Lookup.String()]
		if o == nil || o.Count-o.Errors < noForgetMinLookups || c.mount == nil || c.mount.ForgetNodes > 0 {
			continue
		}
		out = append(out, profile.Finding{
			Conn:  c.id,
			Title: "nodes looked up and never forgotten",
			Evidence: []string{
				fmt.Sprintf("%s successful LOOKUP (%s files), and not one FORGET or BATCH_FORGET: the daemon keeps a node for every one", n(o.Count-o.Errors), n(c.mount.Nodes)),
			},
			Cause: "the kernel forgets a node only when it evicts the inode (memory pressure, drop_caches), so a daemon that keeps its own state per node grows with every file ever looked up",
			Fix: []string{
				"bound the daemon's node table: past a limit, ask the kernel to drop the least recently used entries (FUSE_NOTIFY_PRUNE on Linux 6.16+, FUSE_NOTIFY_INVAL_ENTRY before: libfuse fuse_lowlevel_notify_inval_entry, go-fuse Inode.NotifyEntry), and free each node at its FORGET, as GlusterFS's lru-limit does",
				"lab fs: --max-inodes N",
			},
			Gain: "memory, not speed: the lab fs with --max-inodes 50 over 300 files keeps 50 nodes (docs/labfs.md); set the limit above the working set, or forget-storm follows",
			Cost: 0,
		})
	}
	return out, nil
}

func forgetStorm(in *input) ([]profile.Finding, *profile.Undecided) {
	if !in.rec.Meta.Measures(profile.MeasuredForgets) {
		return nil, needForgets
	}
	if !in.rec.Meta.Measures(profile.MeasuredFiles) {
		return nil, &profile.Undecided{Missing: "the number of files the requests were about", Record: "run fusescope doctor, or trace --files N --stages"}
	}
	var out []profile.Finding
	for _, c := range in.conns {
		lookups := c.count(fuseproto.Lookup)
		if c.mount == nil || c.mount.Nodes == 0 || c.mount.ForgetNodes < stormMinForgotten ||
			ratio(c.mount.ForgetNodes, lookups) < stormForgottenShare || ratio(lookups, c.mount.Nodes) < stormLookupsPerNode {
			continue
		}
		again := 1 - 1/ratio(lookups, c.mount.Nodes)
		out = append(out, profile.Finding{
			Conn:  c.id,
			Title: "nodes forgotten and looked up again",
			Evidence: []string{
				fmt.Sprintf("%s nodes forgotten in %s FORGET and BATCH_FORGET, against %s LOOKUP on %s files (%.1f a file)",
					n(c.mount.ForgetNodes), n(c.mount.Forgets), n(lookups), n(c.mount.Nodes), ratio(lookups, c.mount.Nodes)),
				fmt.Sprintf("%s of FUSE time in LOOKUP", dur(float64(c.time(fuseproto.Lookup)))),
			},
			Cause: "the kernel forgets nodes the application comes back to: a daemon's node limit (NOTIFY_PRUNE, INVAL_ENTRY) below the working set, memory pressure on the inode cache, or drop_caches",
			Fix: []string{
				"raise the daemon's node limit above the working set (GlusterFS lru-limit; lab fs --max-inodes)",
				"under memory pressure: vm.vfs_cache_pressure below 100 keeps inodes longer; do not drop caches during work",
			},
			Gain: "the LOOKUPs of files already known: about " + pct(again) + " of them here",
			Cost: uint64(float64(c.time(fuseproto.Lookup)) * again),
		})
	}
	return out, nil
}
