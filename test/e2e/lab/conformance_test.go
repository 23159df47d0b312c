package lab

// The lab file system against a native directory, as a careful user checks
// a file system: permissions as another user for every mode, unaligned
// direct reads, and real tools' round trips. The nine modes' matrices and
// round trips are served by daemons of their own built without the race
// detector (mountPlain), as the model checker's are: under it they were
// half the lab package's CPU, and their subject is what the file system
// answers, not how its goroutines meet (TestLabFSModelCheckRace).

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/fusescope/fusescope/test/e2e"
	"github.com/fusescope/fusescope/test/labmodes"
	"golang.org/x/sys/unix"
)

// owners are the ownerships the permission matrix gives its files and
// directories, seen from user nobody (uid and gid 65534): the other bits
// apply, the group bits, the owner bits.
var owners = []struct {
	name     string
	uid, gid int
}{{"root", 0, 0}, {"group", 0, 65534}, {"nobody", 65534, 65534}}

// permissionMatrix makes, as root, a file and a directory (holding a file)
// for each mode from 0000 to 0777 and each of owners. The modes are set
// last, through the path under test.
func permissionMatrix(t *testing.T, dir string) {
	t.Helper()
	os.Chmod(filepath.Dir(dir), 0o755) // the test's own temp dir is 0700
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := []byte("#!/bin/sh\nexit 0\n")
	make := func(o int, mode uint32) error {
		own := owners[o]
		f := filepath.Join(dir, fmt.Sprintf("f-%s-%03o", own.name, mode))
		d := filepath.Join(dir, fmt.Sprintf("d-%s-%03o", own.name, mode))
		for _, err := range []error{
			os.WriteFile(f, script, 0o600), os.Chown(f, own.uid, own.gid), unix.Chmod(f, mode),
			os.Mkdir(d, 0o700), os.WriteFile(filepath.Join(d, "x"), script, 0o644),
			os.Chown(d, own.uid, own.gid), unix.Chmod(d, mode),
		} {
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := parallel(len(owners)*0o1000, func(i int) error { return make(i/0o1000, uint32(i%0o1000)) }); err != nil {
		t.Fatal(err)
	}
}

// parallel runs do(0) to do(n-1) on a few goroutines and returns the
// first error: requests to a FUSE daemon overlap, as a user's would.
func parallel(n int, do func(i int) error) error {
	const workers = 6
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				if err := do(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// checkPermissions is what nobody tries on each entry of a permission
// matrix, one line per entry: files are opened for reading and for
// writing (without changing them) and executed; directories are listed,
// searched (stat of the file in them) and written (a file made and
// removed). The mode and owner as stat shows them come first.
func checkPermissions(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	outcome := func(err error) string {
		var errno syscall.Errno
		switch {
		case err == nil:
			return "ok"
		case errors.As(err, &errno):
			return unix.ErrnoName(errno)
		}
		return err.Error()
	}
	lines := make([]string, len(ents))
	err = parallel(len(ents), func(i int) error {
		p := filepath.Join(dir, ents[i].Name())
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		line := fmt.Sprintf("%s mode=%o uid=%d gid=%d", ents[i].Name(), st.Mode, st.Uid, st.Gid)
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			_, lerr := os.ReadDir(p)
			var x unix.Stat_t
			serr := unix.Stat(filepath.Join(p, "x"), &x)
			fd, cerr := unix.Open(filepath.Join(p, "new"), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
			if cerr == nil {
				unix.Close(fd)
				unix.Unlink(filepath.Join(p, "new"))
			}
			lines[i] = fmt.Sprintf("%s list=%s search=%s create=%s\n", line, outcome(lerr), outcome(serr), outcome(cerr))
			return nil
		}
		var res [2]string
		for k, flags := range []int{unix.O_RDONLY, unix.O_WRONLY} {
			fd, err := unix.Open(p, flags|unix.O_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
			}
			res[k] = outcome(err)
		}
		lines[i] = fmt.Sprintf("%s read=%s write=%s", line, res[0], res[1])
		return nil
	})
	if err != nil {
		return "", err
	}
	// Executed once no file is open for writing: a child forked while
	// another worker held one open would hold it too until its exec, and
	// make that file's exec fail with ETXTBSY.
	err = parallel(len(ents), func(i int) error {
		if ents[i].IsDir() {
			return nil
		}
		run := "ok"
		if err := exec.Command(filepath.Join(dir, ents[i].Name())).Run(); err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				run = ee.String()
			} else {
				run = outcome(err)
			}
		}
		lines[i] += " exec=" + run + "\n"
		return nil
	})
	return strings.Join(lines, ""), err
}

var (
	nobodyBinOnce sync.Once
	nobodyBin     string
)

// asNobodyHelper runs a helper of this test binary as user nobody, from a
// copy nobody may execute.
func asNobodyHelper(t *testing.T, name string, args ...string) string {
	t.Helper()
	e2e.Need(t, "setpriv")
	nobodyBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fusescope-e2e-nobody")
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o755)
		data, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		nobodyBin = filepath.Join(dir, "e2e.test")
		if err := os.WriteFile(nobodyBin, data, 0o755); err != nil {
			t.Fatal(err)
		}
	})
	cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", nobodyBin}, args...)...)
	cmd.Env = e2e.Helper(name).Env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper %s as nobody: %v\n%s", name, err, stderr.Bytes())
	}
	return string(out)
}

// Every mode from 0000 to 0777, on files and directories owned by root, by
// root with nobody's group, and by nobody, gives nobody what a native
// directory gives: reading, writing, executing, listing, searching and
// creating, and stat shows the mode and owner as they were set (go-fuse
// once showed a mode of 0000 as 0644 and let nobody read such a file).
func TestLabFSPermissionMatrix(t *testing.T) {
	t.Parallel()
	native := t.TempDir()
	permissionMatrix(t, native)
	want := asNobodyHelper(t, "check-permissions", native)
	for _, line := range []string{
		"f-root-000 mode=100000 uid=0 gid=0 read=EACCES write=EACCES exec=EACCES",
		"d-root-000 mode=40000 uid=0 gid=0 list=EACCES search=EACCES create=EACCES",
		"f-nobody-500 mode=100500 uid=65534 gid=65534 read=ok write=EACCES exec=ok",
		"d-group-050 mode=40050 uid=0 gid=65534 list=ok search=ok create=EACCES",
	} {
		if !strings.Contains(want, line+"\n") {
			t.Fatalf("the native directory did not behave as the test expects (%q)", line)
		}
	}
	for name, cfg := range labmodes.All() {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // a mount of its own
			_, mnt := mountPlain(t, cfg)
			permissionMatrix(t, mnt)
			got := asNobodyHelper(t, "check-permissions", mnt)
			if got != want {
				t.Errorf("as nobody, %d of %d entries differ from a native directory:\n%s", differing(got, want), strings.Count(want, "\n"), lineDiff(got, want, 20))
			}
		})
	}
}

// differing counts the lines of got that want does not have.
func differing(got, want string) int {
	w := map[string]bool{}
	for _, l := range strings.Split(want, "\n") {
		w[l] = true
	}
	n := 0
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			n++
		}
	}
	return n
}

// lineDiff shows up to max lines that only one of got and want has.
func lineDiff(got, want string, max int) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	g, w := in(got), in(want)
	var out []string
	for l := range g {
		if !w[l] {
			out = append(out, "+ "+l)
		}
	}
	for l := range w {
		if !g[l] {
			out = append(out, "- "+l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][2:] < out[j][2:] })
	if len(out) > max {
		out = append(out[:max], fmt.Sprintf("... and %d more", len(out)-max))
	}
	return "(+ labfs, - native)\n" + strings.Join(out, "\n")
}

// Reads that are not page-aligned under direct_io come back whole: a read
// of about 1 MiB spans one page more than its length, and go-fuse once
// sized its splice pipe for the length, replied with the pipe's worth and
// called it the end of the file (a quarter of such reads came back short).
func TestLabFSDirectIOUnalignedReads(t *testing.T) {
	t.Parallel()
	src, mnt, _ := e2e.MountLabFS(t, e2e.Preset(t, "nocache"))
	data := make([]byte, 8_500_000)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(filepath.Join(src, "big"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(filepath.Join(mnt, "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	reads := [][2]int{{0x5688d9, 0xfed8f}, {1, 1 << 20}, {4095, 1<<20 - 4095}, {len(data) - 1000, 4000}}
	for range 60 {
		n := 1<<20 - rng.IntN(8192)
		reads = append(reads, [2]int{rng.IntN(len(data) - n), n})
	}
	short := 0
	for _, r := range reads {
		off, n := r[0], r[1]
		buf := make([]byte, n)
		got, err := fh.ReadAt(buf, int64(off))
		want := min(n, len(data)-off)
		if got != want {
			short++
			t.Errorf("pread of %#x bytes at %#x: %d bytes (%v), want %d", n, off, got, err, want)
		} else if !bytes.Equal(buf[:got], data[off:off+got]) {
			t.Errorf("pread of %#x bytes at %#x: the data differs from the file's", n, off)
		}
	}
	if short > 0 {
		t.Errorf("%d of %d unaligned reads came back short", short, len(reads))
	}
}

// tarTree makes, natively, a tree with what archives carry: hard links,
// symlinks (relative, absolute, dangling), a FIFO, sparse files, set-ID
// and sticky bits, modes 0000, 0700 and 1777, files of another owner,
// extended attributes, access and default ACLs, and fixed times.
func tarTree(t *testing.T, dir string) {
	t.Helper()
	// The modes below are made under umask 022, whatever the process has
	// (a lab file system mounted in this process sets it to 0).
	defer unix.Umask(unix.Umask(0o022))
	p := func(name string) string { return filepath.Join(dir, name) }
	big := make([]byte, 300_000)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	sparse := func(name string, at ...int64) error {
		f, err := os.Create(p(name))
		if err != nil {
			return err
		}
		defer f.Close()
		for _, off := range at {
			if _, err := f.WriteAt([]byte("data in a sparse file\n"), off); err != nil {
				return err
			}
		}
		return f.Truncate(at[len(at)-1] + 1<<20)
	}
	for _, err := range []error{
		os.MkdirAll(p("dir/sub"), 0o755),
		os.WriteFile(p("small"), []byte("hello\n"), 0o644),
		os.WriteFile(p("big"), big, 0o640),
		os.WriteFile(p("empty"), nil, 0o600),
		os.Link(p("big"), p("dir/big-link")),
		os.Link(p("big"), p("dir/sub/big-link2")),
		os.Symlink("../small", p("dir/rel-link")),
		os.Symlink("/etc/hostname", p("abs-link")),
		os.Symlink("nowhere", p("dangling")),
		// The umask is the process's, and parallel tests change it (a lab
		// fs mounted in this process sets 0): the mode is set outright.
		unix.Mkfifo(p("fifo"), 0o600), unix.Chmod(p("fifo"), 0o600),
		sparse("sparse", 0, 5<<20, 9<<20+123),
		sparse("hole-first", 7<<20),
		os.WriteFile(p("suid"), []byte("#!/bin/sh\n"), 0o755), unix.Chmod(p("suid"), 0o4755),
		os.WriteFile(p("sgid"), []byte("#!/bin/sh\n"), 0o755), unix.Chmod(p("sgid"), 0o2711),
		os.Mkdir(p("sgid-dir"), 0o755), unix.Chmod(p("sgid-dir"), 0o2775),
		os.Mkdir(p("sticky"), 0o755), unix.Chmod(p("sticky"), 0o1777),
		os.WriteFile(p("sticky/theirs"), []byte("nobody's\n"), 0o644), os.Lchown(p("sticky/theirs"), 65534, 65534),
		os.WriteFile(p("mode-0000"), []byte("no one\n"), 0o644), unix.Chmod(p("mode-0000"), 0),
		os.Mkdir(p("dir-0700"), 0o700), os.WriteFile(p("dir-0700/inside"), []byte("x"), 0o644),
		os.Mkdir(p("dir-0000"), 0o755), unix.Chmod(p("dir-0000"), 0),
		unix.Setxattr(p("small"), "user.colour", []byte("blue"), 0),
		unix.Setxattr(p("dir"), "user.purpose", []byte("a directory's xattr"), 0),
		unix.Setxattr(p("big"), "user.binary", []byte{0, 1, 2, 255}, 0),
		setfacl("-m", "u:65534:r--,g:65534:rw-", p("small")),
		setfacl("-d", "-m", "u::rwx,g::r-x,o::---,u:65534:rwx", p("dir/sub")),
		setfacl("-m", "u:65534:rwx", p("dir/sub")),
		os.Lchown(p("dangling"), 65534, 65534),
		os.Chown(p("dir/sub"), 65534, 0),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Fixed times, deepest first: a directory's mtime changes as its
	// entries are made.
	var paths []string
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		paths = append(paths, path)
		return nil
	})
	for i := len(paths) - 1; i >= 0; i-- {
		ts := []unix.Timespec{{Sec: 1_600_000_000 + int64(i), Nsec: 123_456_789}, {Sec: 1_500_000_000 + int64(i), Nsec: 987_654_321}}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, paths[i], ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatal(err)
		}
	}
}

// manifest describes a tree, one line per entry: type and mode, owner,
// size, link count (and which entry it is a hard link of), mtime, extended
// attributes (ACLs among them) and a hash of the contents or the link's
// target.
func manifest(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	first := map[uint64]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			return err
		}
		line := fmt.Sprintf("%s mode=%o uid=%d gid=%d nlink=%d mtime=%d.%09d", rel, st.Mode, st.Uid, st.Gid, st.Nlink, st.Mtim.Sec, st.Mtim.Nsec)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" size=%d sha256=%x", st.Size, sha256.Sum256(data))
			if st.Nlink > 1 {
				if f, ok := first[st.Ino]; ok {
					line += " hardlink-of=" + f
				} else {
					first[st.Ino] = rel
				}
			}
		case unix.S_IFLNK:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			line += " -> " + target
		case unix.S_IFDIR:
			if rel == "." {
				line = "." // the extraction's top directory is not the archive's
			}
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			line += xattrs(t, path)
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n") + "\n"
}

// xattrs lists a file's extended attributes and their values, sorted.
func xattrs(t *testing.T, path string) string {
	t.Helper()
	buf := make([]byte, 64<<10)
	n, err := unix.Listxattr(path, buf)
	if err != nil {
		t.Fatalf("listxattr %s: %v", path, err)
	}
	names := strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00")
	sort.Strings(names)
	var out strings.Builder
	for _, name := range names {
		if name == "" {
			continue
		}
		v := make([]byte, 64<<10)
		k, err := unix.Getxattr(path, name, v)
		if err != nil {
			t.Fatalf("getxattr %s %s: %v", path, name, err)
		}
		fmt.Fprintf(&out, " %s=%x", name, v[:k])
	}
	return out.String()
}

// Extracting an archive through the mount gives what extracting it into a
// native directory gives, by tar's own comparison (tar -d) and by a
// manifest of modes, owners, sizes, links, times, xattrs, ACLs and
// contents, in every mode; so does copying the tree with rsync -aHAXS,
// after which a second rsync finds nothing to change (rsync -ani).
func TestLabFSRealToolsRoundTrip(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "tar", "rsync", "setfacl")
	tree, archive := t.TempDir(), filepath.Join(t.TempDir(), "tree.tar")
	tarTree(t, tree)
	flags := []string{"--xattrs", "--xattrs-include=*", "--acls", "--format=posix", "--numeric-owner"}
	if out, err := exec.Command("tar", append(flags, "--sparse", "-cpf", archive, "-C", tree, ".")...).CombinedOutput(); err != nil {
		t.Fatalf("tar -c: %v\n%s", err, out)
	}
	tools := map[string]func(dir string) error{
		"tar": func(dir string) error {
			out, err := exec.Command("tar", append(flags, "-xpf", archive, "-C", dir)...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("tar -x: %v\n%s", err, out)
			}
			if out, err := exec.Command("tar", append(flags, "-df", archive, "-C", dir)...).CombinedOutput(); err != nil {
				return fmt.Errorf("tar -d after extraction: %v\n%s", err, out)
			}
			return nil
		},
		"rsync": func(dir string) error {
			args := []string{"-aHAXS", "--numeric-ids", tree + "/", dir + "/"}
			if out, err := exec.Command("rsync", args...).CombinedOutput(); err != nil {
				return fmt.Errorf("rsync: %v\n%s", err, out)
			}
			out, err := exec.Command("rsync", append([]string{"-ni"}, args...)...).CombinedOutput()
			if err != nil || len(out) > 0 {
				return fmt.Errorf("a second rsync -ani would change: %v\n%s", err, out)
			}
			return nil
		},
	}
	for _, tool := range []string{"tar", "rsync"} {
		native := t.TempDir()
		if err := tools[tool](native); err != nil {
			t.Fatal(err)
		}
		want := manifest(t, native)
		for _, line := range []string{"fifo mode=10600", "suid mode=104755", "sticky mode=41777", "mode-0000 mode=100000",
			"dir/big-link", "hardlink-of=", "system.posix_acl_default=", "user.colour=626c7565", "mtime=15000000"} {
			if !strings.Contains(want, line) {
				t.Fatalf("the native %s copy lacks %q:\n%s", tool, line, want)
			}
		}
		for name, cfg := range labmodes.All() {
			t.Run(tool+"/"+name, func(t *testing.T) {
				t.Parallel() // a mount of its own
				_, mnt := mountPlain(t, cfg)
				if err := tools[tool](mnt); err != nil {
					t.Fatal(err)
				}
				if got := manifest(t, mnt); got != want {
					t.Errorf("%d of %d entries differ from the native copy:\n%s", differing(got, want), strings.Count(want, "\n"), lineDiff(got, want, 20))
				}
			})
		}
	}
}

// A database and a repository work through the mount as natively, in
// every mode: sqlite's random page I/O with transactions ends with an
// intact database holding what it holds natively (the read pipeline once
// fetched 1 MiB chunks ahead of each random page read), and git commits
// a tree, finds it clean and verifies every object.
func TestLabFSSqliteAndGit(t *testing.T) {
	t.Parallel()
	e2e.Need(t, "sqlite3", "git")
	const sql = `PRAGMA journal_mode=WAL;
CREATE TABLE kv(k INTEGER PRIMARY KEY, v TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 20000)
  INSERT INTO kv SELECT i, printf('%0100d', i*7919 % 100003) FROM n;
UPDATE kv SET v = upper(hex(randomblob(40))) WHERE k % 7 = 3;
DELETE FROM kv WHERE k % 11 = 5;
PRAGMA wal_checkpoint(TRUNCATE);
VACUUM;
SELECT count(*), sum(length(v)), sum(k) FROM kv;
PRAGMA integrity_check;`
	run := func(dir string) (string, error) {
		out, err := exec.Command("sqlite3", filepath.Join(dir, "db.sqlite"), sql).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("sqlite3: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		summary := strings.Join(lines[len(lines)-2:], " ")
		git := func(args ...string) (string, error) {
			cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
			cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example", "GIT_COMMITTER_NAME=t",
				"GIT_COMMITTER_EMAIL=t@example", "GIT_AUTHOR_DATE=2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z")
			out, err := cmd.CombinedOutput()
			if err != nil {
				return "", fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return strings.TrimSpace(string(out)), nil
		}
		for i := range 200 {
			os.MkdirAll(filepath.Join(dir, "src", fmt.Sprint(i%10)), 0o755)
			os.WriteFile(filepath.Join(dir, "src", fmt.Sprint(i%10), fmt.Sprintf("f%d.txt", i)), bytes.Repeat([]byte(fmt.Sprintf("line %d\n", i)), i+1), 0o644)
		}
		for _, args := range [][]string{{"init", "-q"}, {"add", "src"}, {"commit", "-q", "-m", "tree"}} {
			if _, err := git(args...); err != nil {
				return "", err
			}
		}
		head, err := git("rev-parse", "HEAD")
		if err != nil {
			return "", err
		}
		status, err := git("status", "--porcelain", "src")
		if err != nil {
			return "", err
		}
		if _, err := git("fsck", "--full", "--strict"); err != nil {
			return "", err
		}
		return fmt.Sprintf("sqlite: %s; git: %s, status %q", summary, head, status), nil
	}
	want, err := run(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(want, " ok;") {
		t.Fatalf("natively: %s", want)
	}
	for name, cfg := range labmodes.All() {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // a mount of its own
			_, mnt := mountPlain(t, cfg)
			got, err := run(mnt)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("through the mount: %s\nnatively: %s", got, want)
			}
		})
	}
}
