package doctor

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/fusescope/fusescope/test/e2e"
	"github.com/fusescope/fusescope/test/proctest"
)

// A daemon that is not ours, mounted with an option that makes an
// anti-pattern (bad) and without it (good).
type daemonCase struct {
	name      string
	mount     func(t *testing.T, src, mnt string, opts []string)
	setup     string
	work      string
	rule      string
	bad, good []string
	uring     [2]string // enable_uring for the bad side and the good ("": left as it is)
	noFix     bool      // the daemon has no option that fixes it: the bad side alone
}

func bindfs(t *testing.T, src, mnt string, opts []string) {
	e2e.Need(t, "bindfs")
	e2e.MountDaemon(t, mnt, "bindfs", append(opts, src, mnt)...)
}

func passthroughHP(t *testing.T, src, mnt string, opts []string) {
	e2e.MountDaemon(t, mnt, e2e.LibfuseExample(t, "passthrough_hp"), append(opts, src, mnt)...)
}

func sshfs(t *testing.T, src, mnt string, opts []string) {
	o := ""
	if len(opts) > 0 {
		o = opts[0]
	}
	e2e.MountSshfs(t, src, mnt, o)
}

func gofuseLoopback(t *testing.T, src, mnt string, _ []string) {
	bin := t.TempDir() + "/loopback"
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/fusescope/fusescope/test/bench/loopback").CombinedOutput(); err != nil {
		t.Fatalf("building go-fuse's loopback: %v\n%s", err, out)
	}
	proctest.Start(t, exec.Command(bin, mnt, src), "Mounted!", 20*time.Second)
	t.Cleanup(func() { e2e.Unmount(t, mnt, func() error { return exec.Command("umount", mnt).Run() }) })
}

const (
	files100  = `mkdir $SRC/d; cd $SRC/d && seq 100 | sed 's/^/f/' | xargs touch`
	stat5     = `for r in 1 2 3 4 5; do stat $MNT/d/f* > /dev/null; done`
	file4M    = `head -c 4M /dev/urandom > $SRC/f`
	read4k    = `dd if=$MNT/f of=/dev/null bs=4k status=none`
	file40M   = `head -c 40M /dev/zero > $SRC/f`
	read64k   = `dd if=$MNT/f of=/dev/null bs=64k status=none`
	create300 = `for i in $(seq 300); do : > $MNT/c$i; done`
	write4k1k = `dd if=/dev/zero of=$MNT/w bs=4k count=1000 status=none`
)

var daemonCases = []daemonCase{
	{name: "bindfs", mount: bindfs, setup: files100, work: stat5, rule: "attr-storm", bad: []string{"-o", "entry_timeout=0,attr_timeout=0"}},
	{name: "bindfs", mount: bindfs, setup: file4M, work: read4k, rule: "direct-io", bad: []string{"-o", "direct_io"}},
	{name: "passthrough_hp", mount: passthroughHP, setup: files100, work: stat5, rule: "attr-storm", bad: []string{"--nocache"}},
	{name: "passthrough_hp", mount: passthroughHP, setup: file40M, work: read64k, rule: "passthrough", bad: []string{"--nopassthrough"}},
	{name: "passthrough_hp", mount: passthroughHP, work: create300, rule: "io-uring", bad: []string{"--nopassthrough"},
		good: []string{"--nopassthrough", "-o", "io_uring"}, uring: [2]string{"Y", "Y"}},
	{name: "passthrough_hp", mount: passthroughHP, work: create300, rule: "io-uring", bad: []string{"--nopassthrough", "-o", "io_uring"},
		good: []string{"--nopassthrough", "-o", "io_uring"}, uring: [2]string{"N", "Y"}},
	{name: "passthrough_hp", mount: passthroughHP, work: write4k1k, rule: "killpriv", bad: []string{"--nopassthrough"}, noFix: true},
	{name: "sshfs", mount: sshfs, setup: file4M, work: read4k, rule: "direct-io", bad: []string{"direct_io"}},
	{name: "gofuse-loopback", mount: gofuseLoopback, work: write4k1k, rule: "killpriv", noFix: true},
}

// Daemons no one here wrote: doctor names the anti-pattern an option of
// theirs makes, and not without the option (where the daemon has none
// that fixes it, only the bad side is run). The gains of the fixes are
// measured by test/bench's TestBenchDoctorFixes (docs/performance.md).
func TestDoctorIndependentDaemons(t *testing.T) {
	for _, c := range daemonCases {
		t.Run(c.name+"/"+c.rule, func(t *testing.T) {
			// enable_uring's lock before the caches' (as every test takes
			// them), for one case at a time.
			if c.uring[0] != "" {
				e2e.HoldURing(t)
			}
			e2e.KeepsCaches(t)
			type side struct {
				opts  []string
				want  bool
				uring string
			}
			sides := []side{{c.bad, true, c.uring[0]}}
			if !c.noFix {
				sides = append(sides, side{c.good, false, c.uring[1]})
			}
			for _, side := range sides {
				if side.uring != "" {
					e2e.SetURing(t, side.uring)
				}
				src, mnt := t.TempDir(), t.TempDir()
				env := append(os.Environ(), "SRC="+src, "MNT="+mnt)
				if c.setup != "" {
					sh := exec.Command("sh", "-c", c.setup)
					sh.Env = env
					if out, err := sh.CombinedOutput(); err != nil {
						t.Fatalf("setup: %v\n%s", err, out)
					}
				}
				c.mount(t, src, mnt, side.opts)
				got := doctorOn(t, mnt, env, c.work)
				if found := slices.Contains(got.rules, c.rule); found != side.want {
					t.Errorf("%s %v: %s reported %v, want %v; findings %v; %s", c.name, side.opts, c.rule, found, side.want, got.rules, got.figures)
				} else {
					t.Logf("%s %v: findings %v", c.name, side.opts, got.rules)
				}
			}
		})
	}
}
