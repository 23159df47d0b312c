package report

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fusescope/fusescope/internal/golden"

	"github.com/fusescope/fusescope/internal/fuseproto"
	"github.com/fusescope/fusescope/internal/hist"
	"github.com/fusescope/fusescope/internal/profile"
)

// sampleRecord is a deterministic record shaped like a real trace of two
// mounts: fast metadata on one, slow reads with errors on the other.
func sampleRecord() *profile.Record {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	r := &profile.Record{Schema: profile.Schema, Meta: profile.Meta{
		Tool: "test", Source: "kernel:fuse_request", Kernel: "6.18.44", Host: "lab",
		Start: t0, End: t0.Add(10 * time.Second), Command: []string{"fusescope", "trace"},
		Mounts: []profile.Mount{
			{Conn: 45, MountPoint: "/cvmfs/sft.cern.ch", FSType: "fuse.cvmfs2", Source: "cvmfs2", Options: "ro,nodev",
				Connection: &profile.ConnInfo{Waiting: 0, MaxBackground: 12, CongestionThreshold: 9}},
			{Conn: 52, MountPoint: "/mnt/s3 <b>", FSType: "fuse.s3fs", Source: "s3fs"},
		},
	}}
	add := func(conn uint32, op fuseproto.Opcode, vals []uint64, errnos map[string]uint64, req, reply uint64) {
		s := profile.OpStats{Conn: conn, Op: op.String(), Opcode: uint32(op), Errnos: errnos, ReqBytes: req, ReplyBytes: reply}
		for _, v := range vals {
			s.Latency.Add(v)
		}
		s.Count = s.Latency.Count
		for _, n := range errnos {
			s.Errors += n
		}
		r.Profile.Ops = append(r.Profile.Ops, s)
	}
	var lookups, getattrs, reads []uint64
	for i := uint64(0); i < 200; i++ {
		lookups = append(lookups, 9_000+i*97)
		getattrs = append(getattrs, 4_000+i*31)
	}
	for i := uint64(0); i < 30; i++ {
		reads = append(reads, 1_500_000+i*90_000)
	}
	add(45, fuseproto.Lookup, lookups, map[string]uint64{"ENOENT": 12}, 200*58, 200*144)
	add(45, fuseproto.Getattr, getattrs, nil, 200*56, 200*120)
	add(52, fuseproto.Read, reads, map[string]uint64{"EIO": 2}, 30*80, 30*131072)
	r.Profile.Drops = profile.Drops{UnmatchedEnd: 3}
	return r
}

func TestTextGolden(t *testing.T) {
	r := sampleRecord()
	for name, o := range map[string]TextOptions{
		"text_usecs.golden":  {Unit: hist.Usecs},
		"text_msecs.golden":  {Unit: hist.Msecs, NoHists: true},
		"text_counts.golden": {CountsOnly: true},
	} {
		var buf bytes.Buffer
		if err := WriteText(&buf, r, o); err != nil {
			t.Fatal(err)
		}
		WriteConnections(&buf, r)
		golden.Check(t, name, buf.Bytes())
	}
}

// stagedRecord is sampleRecord split into stages, as trace --stages
// records it: READ's requests all timed in three stages, GETATTR's with
// ten never seen taken, LOOKUP without stages, and a daemon found three
// seconds into the trace; the kernel had FUSE over io_uring enabled, and
// READ's requests came over its ring.
func stagedRecord() *profile.Record {
	r := sampleRecord()
	for i := range r.Profile.Ops {
		s := &r.Profile.Ops[i]
		var q, d, rep hist.Hist
		switch s.Op {
		case "READ":
			s.URing = s.Count // its daemon's ring carried them
			for j := uint64(0); j < s.Count; j++ {
				q.Add(20_000 + j*100)
				d.Add(1_400_000 + j*89_000)
				rep.Add(80_000 + j*800)
			}
		case "GETATTR":
			for j := uint64(0); j < s.Count-10; j++ {
				q.Add(1_000 + j*3)
				d.Add(2_500 + j*25)
				rep.Add(500 + j*3)
			}
			s.StageGaps.NotTaken = 10
		default:
			continue
		}
		s.Stages = []profile.StageLatency{{Stage: profile.StageQueue, Latency: q}, {Stage: profile.StageDaemon, Latency: d}, {Stage: profile.StageReply, Latency: rep}}
	}
	r.Meta.Mounts[1].Daemons = []profile.Daemon{{PID: 4242, Comm: "s3fs", FDs: 1, Watched: r.Meta.Start.Add(3 * time.Second)}}
	r.Meta.Mounts[0].PassthroughOpens = 7
	r.Meta.FuseURing = true
	return r
}

// trace --stages: a histogram per stage after the total's, the stage
// columns of the table, and notes on what the stages leave out.
func TestTextStagesGolden(t *testing.T) {
	r := stagedRecord()
	var buf bytes.Buffer
	if err := WriteText(&buf, r, TextOptions{Unit: hist.Usecs}); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "text_stages.golden", buf.Bytes())
	buf.Reset()
	if err := WriteCSV(&buf, r, false, true); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "record_stages.csv.golden", buf.Bytes())
}

// trace --files: the files with the most FUSE time, named by their path in
// their mount, "?" where the name is not known.
func TestTextFilesGolden(t *testing.T) {
	r := sampleRecord()
	r.Files = []profile.FileStats{
		{Conn: 52, Node: 7, Path: "/bucket/big file.bin", Mount: "/mnt/s3 <b>", Count: 30, Errors: 2, Total: 84150 * time.Microsecond, Max: 4110 * time.Microsecond},
		{Conn: 45, Node: 1, Path: "/", Mount: "/cvmfs/sft.cern.ch", Count: 200, Total: 3730 * time.Microsecond, Max: 28 * time.Microsecond},
		{Conn: 45, Node: 9, Mount: "/cvmfs/sft.cern.ch", Count: 200, Total: 1417 * time.Microsecond, Max: 10 * time.Microsecond},
	}
	var buf bytes.Buffer
	if err := WriteText(&buf, r, TextOptions{Unit: hist.Usecs, NoHists: true}); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "text_files.golden", buf.Bytes())
}

// trace --calls: a histogram per call, then the table: calls served by the
// caches alone, requests per call, the share of time inside FUSE.
func TestTextCallsGolden(t *testing.T) {
	r := sampleRecord()
	stat := profile.CallStats{Syscall: "newfstatat", Count: 100, WithRequests: 0}
	for i := uint64(0); i < 100; i++ {
		stat.Latency.Add(1_500 + i*10)
	}
	open := profile.CallStats{Syscall: "openat", Count: 10, Errors: 1, WithRequests: 10, Requests: 30, FuseNs: 0}
	for i := uint64(0); i < 10; i++ {
		open.Latency.Add(90_000 + i*1_000)
	}
	open.FuseNs = open.Latency.Sum * 9 / 10
	r.Calls = []profile.CallStats{open, stat}
	var buf bytes.Buffer
	if err := WriteText(&buf, r, TextOptions{Unit: hist.Usecs}); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "text_calls.golden", buf.Bytes())
}

// A stuck daemon: nothing ended, and the requests in flight are listed,
// oldest first, with where they wait.
func TestTextHungGolden(t *testing.T) {
	r := sampleRecord()
	r.Profile = profile.Profile{}
	r.Hung = []profile.HungRequest{
		{Conn: 45, Op: "LOOKUP", Opcode: 1, Age: 12 * time.Second, PID: 8671, Comm: "ls", Stage: "daemon", Mount: "/cvmfs/sft.cern.ch"},
		{Conn: 45, Op: "GETATTR", Opcode: 3, Age: 1500 * time.Millisecond, PID: 8672, Comm: "stat", Stage: "queued", Mount: "/cvmfs/sft.cern.ch"},
		{Conn: 52, Op: "READ", Opcode: 15, Age: 1100 * time.Millisecond, Comm: "evil\x1b[31m", Mount: "/mnt/s3 <b>"},
	}
	var buf bytes.Buffer
	if err := WriteText(&buf, r, TextOptions{Unit: hist.Msecs}); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "text_hung.golden", buf.Bytes())
}

func TestCSVGolden(t *testing.T) {
	r := sampleRecord()
	var buf bytes.Buffer
	if err := WriteCSV(&buf, r, false, true); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "record.csv.golden", buf.Bytes())
	buf.Reset()
	if err := WriteCSV(&buf, r, true, true); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "counts.csv.golden", buf.Bytes())
}

func TestJSONGoldenRoundTrip(t *testing.T) {
	r := sampleRecord()
	var buf bytes.Buffer
	if err := r.Write(&buf); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "record.json.golden", buf.Bytes())
	back, err := profile.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := back.Write(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Error("a record does not survive a save and load unchanged")
	}
}

func TestEmptyRecord(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteText(&buf, &profile.Record{Schema: profile.Schema}, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "No FUSE requests were traced.\n" {
		t.Errorf("%q", buf.String())
	}
	buf.Reset()
	daemon := &profile.Record{Schema: profile.Schema, Meta: profile.Meta{FS: &profile.FSInfo{}}}
	if err := WriteText(&buf, daemon, TextOptions{}); err != nil || buf.String() != "No requests reached the daemon.\n" {
		t.Errorf("the lab daemon's empty record: %q, %v", buf.String(), err)
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0", 1023: "1023", 1024: "1.0K", 1536: "1.5K", 3 << 30: "3.0G"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// The lab file system's configuration reads as mount flags, also after a
// record's round trip through JSON; the default preset needs none, and a
// record from before flags were saved shows its JSON.
func TestFSInfoConfig(t *testing.T) {
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{}, "  config: the default preset\n"},
		{[]string{"--passthrough"}, "  config: the default preset with --passthrough\n"},
		{[]string{"--preset=nocache"}, "  config: the nocache preset\n"},
		{[]string{"--preset=nocache", "--read-pipeline=4"}, "  config: the nocache preset with --read-pipeline=4\n"},
		{nil, `  config: {"attr_timeout":1}` + "\n"},
	} {
		rec := &profile.Record{Schema: profile.Schema, Meta: profile.Meta{
			FS: &profile.FSInfo{Config: []byte(`{"attr_timeout": 1}`), Flags: c.flags},
		}}
		var buf bytes.Buffer
		if err := rec.Write(&buf); err != nil {
			t.Fatal(err)
		}
		back, err := profile.Parse(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		WriteFSInfo(&out, back)
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("flags %#v: got\n%s\nwant a line %q", c.flags, out.String(), c.want)
		}
	}
}

// Any record Parse accepts renders in every view without a crash, however
// odd its numbers (a saved file may have been edited, or written by a later
// v2 fusescope).
func FuzzRenderRecord(f *testing.F) {
	for _, path := range []string{"testdata/record.json.golden", "testdata/sample.json.golden",
		"../profile/testdata/v1/trace-slow.json", "../profile/testdata/v1/fs-stats.json", "../profile/testdata/v1/syscalls.json"} {
		if b, err := os.ReadFile(path); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := profile.ParseAll(b)
		if err != nil {
			return
		}
		for _, r := range recs {
			for _, u := range []hist.Unit{hist.Usecs, hist.Nsecs} {
				if err := WriteText(io.Discard, r, TextOptions{Unit: u}); err != nil {
					t.Fatal(err)
				}
			}
			WriteCSV(io.Discard, r, false, true)
			WriteCSV(io.Discard, r, true, true)
			WriteSlowCSV(io.Discard, true, r.Slow...)
			if r.Syscalls != nil {
				WriteSyscallsText(io.Discard, r.Syscalls, 10)
				WriteSyscallsCSV(io.Discard, r.Syscalls)
			}
		}
	})
}

// The connections' lines name the daemons serving them, escaped as every
// string from a trace is.
func TestWriteConnectionsNamesDaemons(t *testing.T) {
	ci := &profile.ConnInfo{MaxBackground: 12, CongestionThreshold: 9}
	r := &profile.Record{Meta: profile.Meta{Mounts: []profile.Mount{
		{Conn: 40, MountPoint: "/mnt/a", FSType: "fuse.sshfs", Connection: ci, Daemons: []profile.Daemon{{PID: 4242, Comm: "sshfs", FDs: 1}}},
		{Conn: 41, MountPoint: "/mnt/b", FSType: "fuse", Connection: ci, Daemons: []profile.Daemon{{PID: 7, Comm: "passthrough_hp", FDs: 4}, {PID: 9, Comm: "odd\nname", FDs: 1}}},
		{Conn: 42, MountPoint: "/mnt/c", FSType: "fuse", Connection: ci},
	}}}
	var b strings.Builder
	WriteConnections(&b, r)
	want := `conn 40 /mnt/a (fuse.sshfs): waiting 0, max_background 12, congestion_threshold 9; daemon 4242 sshfs
conn 41 /mnt/b (fuse): waiting 0, max_background 12, congestion_threshold 9; daemons 7 passthrough_hp (4 fds), 9 "odd\nname"
conn 42 /mnt/c (fuse): waiting 0, max_background 12, congestion_threshold 9
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// The connections' lines say which transport carried the requests where
// the kernel had FUSE over io_uring enabled: the ring, /dev/fuse (a daemon
// that did not ask for the ring, or fell back from it), or both; and
// nothing where it had not, or for a connection without requests.
func TestWriteConnectionsNamesTransport(t *testing.T) {
	ci := &profile.ConnInfo{MaxBackground: 12, CongestionThreshold: 9}
	r := &profile.Record{Meta: profile.Meta{FuseURing: true, Mounts: []profile.Mount{
		{Conn: 40, MountPoint: "/mnt/ring", FSType: "fuse", Connection: ci},
		{Conn: 41, MountPoint: "/mnt/dev", FSType: "fuse", Connection: ci},
		{Conn: 42, MountPoint: "/mnt/both", FSType: "fuse", Connection: ci},
		{Conn: 43, MountPoint: "/mnt/idle", FSType: "fuse", Connection: ci},
	}}, Profile: profile.Profile{Ops: []profile.OpStats{
		{Conn: 40, Op: "LOOKUP", Count: 30, URing: 30}, {Conn: 40, Op: "READ", Count: 7, URing: 7},
		{Conn: 41, Op: "LOOKUP", Count: 5},
		{Conn: 42, Op: "INIT", Count: 1}, {Conn: 42, Op: "GETATTR", Count: 9, URing: 9},
	}}}
	var b strings.Builder
	WriteConnections(&b, r)
	want := `conn 40 /mnt/ring (fuse): waiting 0, max_background 12, congestion_threshold 9; transport io_uring (37 of 37 requests over the ring)
conn 41 /mnt/dev (fuse): waiting 0, max_background 12, congestion_threshold 9; transport /dev/fuse
conn 42 /mnt/both (fuse): waiting 0, max_background 12, congestion_threshold 9; transport io_uring and /dev/fuse (9 of 10 requests over the ring)
conn 43 /mnt/idle (fuse): waiting 0, max_background 12, congestion_threshold 9
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	r.Meta.FuseURing = false // the ring off: every request was /dev/fuse's, as always
	b.Reset()
	WriteConnections(&b, r)
	if strings.Contains(b.String(), "transport /dev/fuse") {
		t.Errorf("the ring off, a connection's line names /dev/fuse:\n%s", b.String())
	}
}
