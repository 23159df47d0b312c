package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/fusescope/fusescope/test/proctest"
)

// MountSshfs mounts src over sshfs at mnt, through an sshd of its own on
// 127.0.0.1 (root, a key made for the test), with sshfs's -o options opts
// ("" for none); both go when the test ends.
func MountSshfs(t testing.TB, src, mnt, opts string) {
	t.Helper()
	port, key := StartSshd(t)
	MountDaemon(t, mnt, "sshfs", SshfsArgs(port, key, opts, src, mnt)...)
}

// SshfsArgs are sshfs's arguments to mount src at mnt through StartSshd's
// sshd, with sshfs's -o options opts added.
func SshfsArgs(port int, key, opts, src, mnt string) []string {
	o := "IdentityFile=" + key + ",StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,LogLevel=ERROR"
	if opts != "" {
		o += "," + opts
	}
	return []string{"-p", strconv.Itoa(port), "-o", o, "root@127.0.0.1:" + src, mnt}
}

// StartSshd starts an sshd of the test's own on 127.0.0.1 that lets root
// in with the key it returns; it ends with the test.
func StartSshd(t testing.TB) (port int, key string) {
	t.Helper()
	Need(t, "sshfs", "ssh-keygen")
	sshd := "/usr/sbin/sshd"
	if _, err := os.Stat(sshd); err != nil {
		t.Fatalf("sshd is not installed: run make test, which installs openssh-server")
	}
	dir := t.TempDir()
	hostKey, userKey := filepath.Join(dir, "host"), filepath.Join(dir, "user")
	Run(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hostKey)
	Run(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", userKey)
	pub, err := os.ReadFile(userKey + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	auth := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(auth, pub, 0o600); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll("/run/sshd", 0o755) // sshd's privilege separation directory
	port = FreePort(t)
	cfg := filepath.Join(dir, "sshd_config")
	os.WriteFile(cfg, []byte(fmt.Sprintf("Port %d\nListenAddress 127.0.0.1\nHostKey %s\nAuthorizedKeysFile %s\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nUsePAM no\nStrictModes no\nSubsystem sftp internal-sftp\nPidFile none\n",
		port, hostKey, auth)), 0o600)
	proctest.Start(t, exec.Command(sshd, "-D", "-e", "-f", cfg), "Server listening on 127.0.0.1", 20*time.Second)
	return port, userKey
}

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
