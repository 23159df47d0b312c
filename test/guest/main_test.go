package guest

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The environment test/kernels/run.sh gives the test binary in a guest.
const (
	// envGuest: running in a guest of the matrix, where nothing may be
	// skipped (not being root, a missing /dev/fuse are failures).
	envGuest = "FUSESCOPE_GUEST"
	// envKernel: the row of Kernels the guest was booted for ("7.3"); the
	// kernel running must be that one.
	envKernel = "FUSESCOPE_GUEST_KERNEL"
	// envBin: the fusescope binary to test (the release binary in a
	// guest); unset, the tests build one.
	envBin = "FUSESCOPE_BIN"
	// envVersion: the version that binary must print.
	envVersion = "FUSESCOPE_VERSION"
	// envFuseModule: fuse.ko to insert where fuse is a module.
	envFuseModule = "FUSESCOPE_FUSE_MODULE"
	// envHelper: this binary runs a workload step list instead of tests.
	envHelper = "FUSESCOPE_GUEST_HELPER"
)

var (
	fusescopeBin string
	wantVersion  string
	inGuest      bool
	// release is uname -r; row and rowKey its row of Kernels.
	release string
	rowKey  string
	row     Kernel
	// noFuse is what fusescope trace said before fuse.ko was inserted,
	// where this run inserted it.
	noFuse *result
)

func TestMain(m *testing.M) {
	if steps := os.Getenv(envHelper); steps != "" {
		if err := runWorkload(strings.Split(steps, " ")); err != nil {
			fmt.Fprintln(os.Stderr, "guest workload:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	inGuest = os.Getenv(envGuest) != ""
	if why := cannotRun(); why != "" {
		if inGuest {
			fmt.Fprintln(os.Stderr, "guest: "+why)
			os.Exit(1)
		}
		// Only the table's agreement with the docs needs neither.
		fmt.Fprintln(os.Stderr, "guest: skipped but for the table's tests (TestTable*): "+why)
		onlyDocs = true
		flag.Parse()
		if run := flag.Lookup("test.run"); run.Value.String() == "" {
			run.Value.Set("^TestTable")
		}
		os.Exit(m.Run())
	}
	cleanup, err := setUp()
	if err != nil {
		cleanup()
		fmt.Fprintln(os.Stderr, "guest:", err)
		os.Exit(1)
	}
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// onlyDocs: not root or no FUSE here, so only the table's tests run.
var onlyDocs bool

// cannotRun says why this machine cannot run the tests, or "".
func cannotRun() string {
	if os.Geteuid() != 0 {
		return "these tests mount FUSE file systems and load BPF programs: run as root"
	}
	if _, err := os.Stat("/dev/fuse"); err != nil && os.Getenv(envFuseModule) == "" {
		return "no /dev/fuse: load the fuse module (modprobe fuse)"
	}
	return ""
}

// setUp finds the binary and the kernel's row, and inserts fuse.ko where
// the guest has one (after asking fusescope what it makes of a kernel
// without fuse).
func setUp() (cleanup func(), err error) {
	cleanup = func() {}
	var uts unix.Utsname
	unix.Uname(&uts)
	release = unix.ByteSliceToString(uts.Release[:])
	if rowKey, row, err = Row(release); err != nil {
		return cleanup, err
	}
	if mm, _ := majorMinor(release); mm != rowKey {
		fmt.Fprintf(os.Stderr, "guest: kernel %s has no row in test/guest/kernels.go: held to %s's (add one if it differs)\n", release, rowKey)
	}
	if want := os.Getenv(envKernel); want != "" {
		if mm, _ := majorMinor(release); mm != want {
			return cleanup, fmt.Errorf("booted for kernel %s, running %s", want, release)
		}
	}
	fusescopeBin, wantVersion = os.Getenv(envBin), os.Getenv(envVersion)
	if fusescopeBin == "" {
		dir, err := os.MkdirTemp("", "fusescope-guest-")
		if err != nil {
			return cleanup, err
		}
		cleanup = func() { os.RemoveAll(dir) }
		fusescopeBin, wantVersion = filepath.Join(dir, "fusescope"), "guest-test"
		build := exec.Command("go", "build", "-ldflags", "-X main.version="+wantVersion, "-o", fusescopeBin, "github.com/fusescope/fusescope/cmd/fusescope")
		if out, err := build.CombinedOutput(); err != nil {
			return cleanup, fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	if ko := os.Getenv(envFuseModule); ko != "" {
		if _, err := os.Stat("/sys/module/fuse"); err != nil {
			r := runFusescope("trace", "1", "1")
			noFuse = &r
			if out, err := exec.Command("insmod", ko).CombinedOutput(); err != nil {
				return cleanup, fmt.Errorf("insmod %s: %v %s", ko, err, out)
			}
		}
	}
	// The workloads wait for a connection's requests to end by its
	// fusectl counts; a guest's /init cannot mount it before fuse.ko.
	if _, err := os.Stat("/sys/fs/fuse/connections"); err == nil && !isMount("/sys/fs/fuse/connections") {
		if err := unix.Mount("fusectl", "/sys/fs/fuse/connections", "fusectl", 0, ""); err != nil {
			return cleanup, fmt.Errorf("mounting fusectl: %v", err)
		}
	}
	return cleanup, nil
}
