package labfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The control directory must be the user's own and closed to others: one
// that another user made first in a shared /tmp could swap the sockets and
// logs in it for symlinks.
func TestPrivateDir(t *testing.T) {
	base := t.TempDir()
	fresh := filepath.Join(base, "fresh")
	if err := privateDir(fresh); err != nil {
		t.Fatalf("a new directory: %v", err)
	}
	if fi, _ := os.Stat(fresh); fi.Mode().Perm() != 0o700 {
		t.Errorf("made with mode %v, want 0700", fi.Mode().Perm())
	}
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777) // whatever the umask
	link := filepath.Join(base, "link")
	os.Symlink(fresh, link)
	bad := []string{open, link}
	if os.Geteuid() == 0 {
		other := filepath.Join(base, "other")
		os.Mkdir(other, 0o700)
		os.Chown(other, 4321, 4321)
		bad = append(bad, other)
	}
	for _, dir := range bad {
		if err := privateDir(dir); err == nil || !strings.Contains(err.Error(), "not a private directory of yours") {
			t.Errorf("%s: %v, want a refusal", dir, err)
		}
	}
}

// Sockets left by killed daemons go; a socket a daemon still listens on
// stays.
func TestRemoveStaleSockets(t *testing.T) {
	dir := t.TempDir()
	listen := func(name string) int {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Bind(fd, &unix.SockaddrUnix{Name: filepath.Join(dir, name)}); err != nil {
			t.Fatal(err)
		}
		if err := unix.Listen(fd, 1); err != nil {
			t.Fatal(err)
		}
		return fd
	}
	live := listen("live.sock")
	defer unix.Close(live)
	unix.Close(listen("dead.sock")) // the file stays, as after SIGKILL
	unix.Close(listen("quiet.sock"))
	os.WriteFile(filepath.Join(dir, "dead.log"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(dir, "quiet.log"), nil, 0o600)
	os.WriteFile(filepath.Join(dir, "live.log"), nil, 0o600)
	removeStaleSockets(dir)
	// A dead daemon's empty log goes with its socket; one that says
	// something stays, as does a live daemon's.
	for name, want := range map[string]bool{"live.sock": true, "dead.sock": false, "dead.log": true,
		"quiet.sock": false, "quiet.log": false, "live.log": true} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", name, err == nil, want)
		}
	}
}

// A control socket is at its path only once it listens: a daemon starting
// meanwhile, which removes the sockets that refuse connections as dead
// daemons', never removes one being set up (it did, under make test:
// "chmod ...sock: no such file or directory").
func TestControlSocketListensBeforeItAppears(t *testing.T) {
	dir := t.TempDir()
	stop := make(chan struct{})
	defer close(stop)
	go func() { // another daemon's start, again and again
		for {
			select {
			case <-stop:
				return
			default:
				removeStaleSockets(dir)
			}
		}
	}()
	for i := range 200 {
		path := filepath.Join(dir, fmt.Sprintf("s%d.sock", i))
		fd, err := listenControl(path)
		if err != nil {
			t.Fatalf("socket %d: %v", i, err)
		}
		fi, err := os.Stat(path)
		unix.Close(fd)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("socket %d: %v, mode %v; want it there, 0600", i, err, fi.Mode().Perm())
		}
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(tmps) > 0 {
		t.Errorf("left behind: %v", tmps)
	}
	// A dead process's half-made socket goes.
	dead := filepath.Join(dir, "x.sock.999999999.tmp")
	os.WriteFile(dead, nil, 0o600)
	removeStaleSockets(dir)
	if _, err := os.Stat(dead); err == nil {
		t.Errorf("%s (no such process) was left", dead)
	}
}
