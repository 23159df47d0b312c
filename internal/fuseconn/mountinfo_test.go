package fuseconn

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fusescope/fusescope/internal/profile"
)

func TestParseMountInfo(t *testing.T) {
	text := `22 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda rw
43 27 0:39 / /tmp/my\040mnt rw,nosuid,nodev,relatime shared:5 - fuse.sshfs user@host:/srv rw,user_id=0,group_id=0
44 27 0:1048577 / /mnt/big rw - fuse /src rw
45 27 8:17 / /mnt/ntfs rw - fuseblk /dev/sdb1 rw
garbage line
`
	ms, err := ParseMountInfo(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 4 {
		t.Fatalf("parsed %d mounts: %+v", len(ms), ms)
	}
	m := ms[1]
	if m.MountPoint != "/tmp/my mnt" || m.FSType != "fuse.sshfs" || m.Minor != 39 || !m.IsFUSE() || m.Source != "user@host:/srv" {
		t.Errorf("%+v", m)
	}
	if !strings.Contains(m.Options, "user_id=0") || !strings.HasPrefix(m.Options, "rw,nosuid") {
		t.Errorf("options %q", m.Options)
	}
	if ms[2].Minor != 1048577 || !ms[2].IsFUSE() {
		t.Errorf("large minor: %+v", ms[2])
	}
	if ms[0].IsFUSE() || ms[3].IsFUSE() {
		t.Error("ext4 and fuseblk are not FUSE connections by minor")
	}
}

func TestResolveMountNotFUSE(t *testing.T) {
	ms, err := ReadMountInfo()
	if err != nil {
		t.Skip(err)
	}
	if _, err := ResolveMount(t.TempDir(), ms); err == nil || !strings.Contains(err.Error(), "not FUSE") {
		t.Errorf("a temp dir resolved as FUSE: %v", err)
	}
	if _, err := ResolveMount("/nonexistent/path", ms); err == nil {
		t.Error("a missing path resolved")
	}
}

// A path beneath a FUSE mount point resolves from the path alone: the paths
// here do not exist, so a stat (a request to the daemon, which might hang)
// could not have resolved them. The deepest mount wins, by whole
// components, and the one on top among equals.
func TestResolveMountBeneathWithoutStat(t *testing.T) {
	mounts := []MountInfo{
		{Minor: 7, MountPoint: "/", FSType: "ext4"},
		{Minor: 40, MountPoint: "/fusescope-test/a", FSType: "fuse.sshfs"},
		{Minor: 9, MountPoint: "/fusescope-test/a/inner", FSType: "ext4"},
		{Minor: 41, MountPoint: "/fusescope-test/ab", FSType: "fuse"},
		{Minor: 42, MountPoint: "/fusescope-test/ab", FSType: "fuse.bindfs"},
	}
	for path, want := range map[string]uint32{
		"/fusescope-test/a":              40,
		"/fusescope-test/a/x/y/z":        40,
		"/fusescope-test/a/../ab/q":      42,
		"/fusescope-test/ab/deep/er/one": 42,
	} {
		m, err := ResolveMount(path, mounts)
		if err != nil || m.Minor != want {
			t.Errorf("%s: connection %d (%v), want %d", path, m.Minor, err, want)
		}
	}
	if _, err := ResolveMount("/fusescope-test/a/inner", mounts); err == nil || !strings.Contains(err.Error(), "not a FUSE") {
		t.Errorf("an ext4 mount point beneath a FUSE mount resolved: %v", err)
	}
	if _, err := ResolveMount("/fusescope-test/a/inner/f", mounts); err == nil {
		t.Error("a path on the ext4 mount beneath resolved as FUSE")
	}
}

// A connection mounted at two places is labelled with its first mount, or
// with the one the user named.
func TestDescribeMountsPrefersTheNamedMount(t *testing.T) {
	mounts := []MountInfo{
		{Minor: 40, MountPoint: "/mnt/a", FSType: "fuse.sshfs", Options: "rw"},
		{Minor: 7, MountPoint: "/", FSType: "ext4"},
		{Minor: 40, MountPoint: "/srv/bind", FSType: "fuse.sshfs", Options: "ro"},
		{Minor: 41, MountPoint: "/mnt/b", FSType: "fuse"},
	}
	for _, c := range []struct {
		prefer map[uint32]string
		want   string
	}{{nil, "/mnt/a rw"}, {map[uint32]string{40: "/srv/bind"}, "/srv/bind ro"}, {map[uint32]string{40: "/elsewhere"}, "/mnt/a rw"}} {
		got := DescribeMounts(mounts, c.prefer)
		if len(got) != 2 || got[0].Conn != 40 || got[1].Conn != 41 {
			t.Fatalf("prefer %v: %+v, want connections 40 and 41 once each", c.prefer, got)
		}
		if s := got[0].MountPoint + " " + got[0].Options; s != c.want {
			t.Errorf("prefer %v: connection 40 at %q, want %q", c.prefer, s, c.want)
		}
	}
}

func FuzzParseMountInfo(f *testing.F) {
	f.Add("43 27 0:39 / /tmp/my\\040mnt rw,nosuid shared:5 - fuse.sshfs u@h:/srv rw,user_id=0\n")
	f.Add("1 2 x:y / / rw - ext4 /dev/vda rw\n")
	f.Add("\\")
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := ParseMountInfo(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, m := range ms {
			if m.FSType == "" {
				t.Fatalf("mount without a type: %+v", m)
			}
		}
	})
}

func TestFdinfoConn(t *testing.T) {
	for info, want := range map[string]uint32{
		"pos:\t0\nflags:\t0100002\nmnt_id:\t24\nino:\t90\nfuse_connection:\t39\n": 39,
		"pos:\t0\nflags:\t0100002\nmnt_id:\t24\nino:\t90\n":                       0, // opened, not mounted; or an older kernel
		"fuse_connection:\tx\n": 0,
	} {
		if got := fdinfoConn([]byte(info)); got != want {
			t.Errorf("%q: conn %d, want %d", info, got, want)
		}
	}
}

// A fake /proc: process 7 holds /dev/fuse twice (clone_fd), once mounted
// on connection 41; process 8 holds a file named fuse that is not the
// device; process 9 cannot be read.
func TestHoldersIn(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse:", err)
	}
	proc := t.TempDir()
	mk := func(pid, fd, target, fdinfo string) {
		dir := filepath.Join(proc, pid)
		os.MkdirAll(filepath.Join(dir, "fd"), 0o755)
		os.MkdirAll(filepath.Join(dir, "fdinfo"), 0o755)
		os.WriteFile(filepath.Join(dir, "comm"), []byte("daemon"+pid+"\n"), 0o644)
		if err := os.Symlink(target, filepath.Join(dir, "fd", fd)); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "fdinfo", fd), []byte(fdinfo), 0o644)
	}
	mk("7", "9", "/dev/fuse", "pos:\t0\nfuse_connection:\t41\n")
	mk("7", "3", "/dev/fuse", "pos:\t0\n")
	notDevice := filepath.Join(t.TempDir(), "fuse")
	os.WriteFile(notDevice, nil, 0o644)
	mk("8", "4", notDevice, "")
	os.MkdirAll(filepath.Join(proc, "9"), 0o000)
	os.MkdirAll(filepath.Join(proc, "self"), 0o755)

	got, err := holdersIn(proc)
	if err != nil {
		t.Fatal(err)
	}
	want := []Holder{{PID: 7, FD: 3, Comm: "daemon7"}, {PID: 7, FD: 9, Comm: "daemon7", Conn: 41}}
	if !slices.Equal(got, want) {
		t.Errorf("holders %+v, want %+v", got, want)
	}
}

// A process whose cwd, or an open file, is under the mount keeps it busy;
// one whose files are beside it (a common prefix) does not.
func TestUsersIn(t *testing.T) {
	proc := t.TempDir()
	mk := func(pid, link, target string) {
		dir := filepath.Join(proc, pid)
		os.MkdirAll(filepath.Join(dir, "fd"), 0o755)
		os.WriteFile(filepath.Join(dir, "comm"), []byte("p"+pid+"\n"), 0o644)
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	mk("1", "cwd", "/")
	mk("2", "cwd", "/mnt/lab/sub")
	mk("3", "cwd", "/")
	mk("3", "fd/4", "/mnt/lab/file")
	mk("4", "cwd", "/")
	mk("4", "fd/5", "/mnt/lab2/file")
	got, err := usersIn(proc, "/mnt/lab")
	if err != nil {
		t.Fatal(err)
	}
	want := []User{{PID: 2, Comm: "p2", What: "cwd"}, {PID: 3, Comm: "p3", What: "/mnt/lab/file"}}
	if !slices.Equal(got, want) {
		t.Errorf("users %+v, want %+v", got, want)
	}
}

// Each mount gets the processes holding its connection, with their fds
// counted (clone_fd); others' holders and unmounted files are not its.
func TestAddDaemons(t *testing.T) {
	mounts := []profile.Mount{{Conn: 41}, {Conn: 42}}
	addDaemons(mounts, []Holder{{PID: 7, FD: 3, Comm: "passthrough_hp", Conn: 41}, {PID: 7, FD: 9, Comm: "passthrough_hp", Conn: 41},
		{PID: 8, FD: 4, Comm: "sshfs", Conn: 42}, {PID: 9, FD: 3, Comm: "fusermount3"}})
	want := [][]profile.Daemon{{{PID: 7, Comm: "passthrough_hp", FDs: 2}}, {{PID: 8, Comm: "sshfs", FDs: 1}}}
	for i, w := range want {
		if !reflect.DeepEqual(mounts[i].Daemons, w) {
			t.Errorf("conn %d: daemons %+v, want %+v", mounts[i].Conn, mounts[i].Daemons, w)
		}
	}
}
