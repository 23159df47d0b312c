package strace

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// targets runs a log through the parser and nameFDs, and returns each
// event's line and target.
func targets(t *testing.T, log string) map[int]string {
	t.Helper()
	p := NewParser()
	got := map[int]string{}
	src := nameFDs(func(emit func(*Event)) error { return p.Parse(strings.NewReader(log), emit) }, newFDNamer())
	if err := src(func(e *Event) { got[e.Line] = e.Target() }); err != nil {
		t.Fatal(err)
	}
	if p.Bad != 0 {
		t.Fatalf("malformed: %+v", p.Malformed)
	}
	return got
}

func TestNameFDsWithoutY(t *testing.T) {
	// Line numbers matter: the wanted targets below are by line.
	log := strings.TrimPrefix(`
100 chdir("/srv") = 0
100 openat(AT_FDCWD, "data/a.bin", O_RDONLY) = 3
100 read(3, ""..., 4096) = 4096
100 openat(3, "sub", O_RDONLY|O_DIRECTORY) = -1 ENOTDIR (Not a directory)
100 fcntl(3, F_DUPFD_CLOEXEC, 3) = 4
100 fcntl(4, F_GETFL) = 0x8000 (flags O_RDONLY|O_LARGEFILE)
100 dup2(4, 7) = 7
100 write(7, "x", 1) = -1 EBADF (Bad file descriptor)
100 socket(AF_INET, SOCK_DGRAM|SOCK_CLOEXEC|SOCK_NONBLOCK, IPPROTO_IP) = 5
100 connect(5, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.0.0.2")}, 16) = 0
100 poll([{fd=5, events=POLLIN}], 1, 5000) = 0 (Timeout)
100 recvfrom(5, ""..., 512, 0, NULL, NULL) = -1 EAGAIN (Resource temporarily unavailable)
100 pipe2([8, 9], O_CLOEXEC) = 0
100 write(9, "hi", 2) = 2
100 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM, child_tid=0x7f, parent_tid=0x7f, exit_signal=0, stack=0x7f, stack_size=0x7fff00, tls=0x7f} <unfinished ...>
101 openat(AT_FDCWD, "/etc/hosts", O_RDONLY) = 10
100 <... clone3 resumed> => {parent_tid=[101]}, 88) = 101
100 read(10, ""..., 100) = 100
101 read(8, "hi", 2) = 2
100 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x7f) = 200
200 close(3) = 0
200 openat(AT_FDCWD, "b.bin", O_RDONLY) = 3
100 read(3, ""..., 10) = 10
200 read(3, ""..., 10) = 10
200 fstat(6, {st_mode=S_IFREG|0644, st_size=0, ...}) = 0
200 newfstatat(3, "", {st_mode=S_IFREG|0644, st_size=5, ...}, AT_EMPTY_PATH) = 0
100 socket(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC, 0) = 11
100 connect(11, {sa_family=AF_UNIX, sun_path="/run/nscd/socket"}, 110) = -1 ENOENT (No such file or directory)
100 socket(AF_INET6, SOCK_STREAM, IPPROTO_TCP) = 12
100 bind(12, {sa_family=AF_INET6, sin6_port=htons(8080), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}, 28) = 0
100 accept4(12, {sa_family=AF_INET6, sin6_port=htons(40000), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}, [28], SOCK_CLOEXEC) = 13
100 read(13, ""..., 10) = 10
100 close_range(3, 4294967295, 0) = 0
100 read(3, ""..., 10) = -1 EBADF (Bad file descriptor)
100 read(13, ""..., 10) = -1 EBADF (Bad file descriptor)
100 socket(AF_UNIX, SOCK_STREAM, 0) = 3
100 connect(3, {sa_family=AF_UNIX, sun_path="/run/x"}, 110) = -1 ECONNREFUSED (Connection refused)
100 write(3, "x", 1) = -1 ENOTCONN (Transport endpoint is not connected)
100 poll([{fd=12, events=POLLIN}, {fd=3, events=POLLIN}], 2, 10) = 0 (Timeout)
`, "\n")
	want := map[int]string{
		1:  "",
		2:  "/srv/data/a.bin",
		3:  "/srv/data/a.bin",
		4:  "",
		5:  "/srv/data/a.bin",
		6:  "/srv/data/a.bin",
		7:  "/srv/data/a.bin",
		8:  "/srv/data/a.bin",
		9:  "",
		10: "UDP:[10.0.0.2:53]",
		11: "", // poll's fds are inside its array: Target names first arguments
		12: "UDP:[10.0.0.2:53]",
		13: "",
		14: "pipe:[#1]",
		16: "/etc/hosts",
		17: "",                // the clone
		18: "/etc/hosts",      // the thread opened it before its clone returned: the table is shared
		19: "pipe:[#1]",       // the thread sees its creator's pipe
		20: "",                // the fork
		21: "/srv/data/a.bin", // the child closes its copy of 3...
		22: "/srv/b.bin",      // ...and opens another file as 3 (the cwd is inherited)
		23: "/srv/data/a.bin", // the parent's 3 is unchanged
		24: "/srv/b.bin",
		25: "fd:6", // an fd the log never saw created
		26: "/srv/b.bin",
		28: "UNIX:[/run/nscd/socket]", // a failed connect: the address it tried...
		30: "TCP:[[::1]:8080]",
		31: "TCP:[[::1]:8080]",
		32: "TCP:[[::1]:40000]",
		33: "",
		34: "fd:3",
		35: "fd:13",
		37: "UNIX:[/run/x]",
		38: "UNIX:[]", // ...while the fd stays unnamed
	}
	got := targets(t, log)
	for line, w := range want {
		if got[line] != w {
			t.Errorf("line %d: target %q, want %q", line, got[line], w)
		}
	}
	if p := polled(t, log); p[11] != "UDP:[10.0.0.2:53]" || p[39] != "fd:12" {
		t.Errorf("polled FDs: %v", p)
	}
}

// polled runs log through the parser and Named and returns, by line, the fd
// each poll waited on first.
func polled(t *testing.T, log string) map[int]string {
	t.Helper()
	p := NewParser()
	got := map[int]string{}
	err := Named(func(emit func(*Event)) error { return p.Parse(strings.NewReader(log), emit) }, p)(func(e *Event) {
		if e.polled != "" {
			got[e.Line] = e.polled
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// In a -y log, sockets take the protocol of their socket call and the
// address of their connect, bind or accept, as in the live source.
func TestNameSocketsInYLogs(t *testing.T) {
	log := strings.TrimPrefix(`
socket(AF_INET, SOCK_STREAM|SOCK_CLOEXEC, IPPROTO_IP) = 3<socket:[100]>
connect(3<socket:[100]>, {sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr("10.0.0.9")}, 16) = -1 EINPROGRESS (Operation now in progress)
poll([{fd=3<socket:[100]>, events=POLLOUT}], 1, 1000) = 1 ([{fd=3, revents=POLLOUT}])
write(3<socket:[100]>, "GET", 3) = 3
socket(AF_UNIX, SOCK_STREAM, 0) = 4<socket:[200]>
connect(4<socket:[200]>, {sa_family=AF_UNIX, sun_path="/run/nscd/socket"}, 110) = -1 ENOENT (No such file or directory)
getpeername(4<socket:[200]>, 0x7ffe, [110]) = -1 ENOTCONN (Transport endpoint is not connected)
socket(AF_INET6, SOCK_STREAM, IPPROTO_TCP) = 5<socket:[300]>
bind(5<socket:[300]>, {sa_family=AF_INET6, sin6_port=htons(8080), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}, 28) = 0
accept4(5<socket:[300]>, {sa_family=AF_INET6, sin6_port=htons(40000), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}, [28], SOCK_CLOEXEC) = 6<socket:[301]>
read(6<socket:[301]>, "x", 1) = 1
close(3<socket:[100]>) = 0
socket(AF_INET, SOCK_DGRAM, IPPROTO_IP) = 3<socket:[100]>
read(7<TCP:[500]>, "", 1) = 0
connect(8<TCP:[10.0.0.2:50000]>, {sa_family=AF_INET, sin_port=htons(1093), sin_addr=inet_addr("10.0.0.9")}, 16) = -1 ECONNREFUSED (Connection refused)
sendto(3<socket:[100]>, "x", 1, 0, NULL, 0) = 1
`, "\n")
	// The socket calls themselves have no target, as in the live source.
	want := map[int]string{
		1:  "",
		2:  "TCP:[10.0.0.9:80]",
		4:  "TCP:[10.0.0.9:80]",
		6:  "UNIX:[/run/nscd/socket]", // the address a failed connect tried...
		7:  "UNIX:[200]",              // ...while the socket stays unnamed
		9:  "TCP:[[::1]:8080]",
		10: "TCP:[[::1]:8080]", // the listener
		11: "TCP:[[::1]:40000]",
		12: "TCP:[10.0.0.9:80]",
		14: "TCP:[500]",           // a socket the log never saw made
		16: "UDP:[100]",           // the inode reused after close
		15: "TCP:[10.0.0.9:1093]", // -yy: a failed connect's address, not the local one
	}
	got := targets(t, log)
	for line, w := range want {
		if got[line] != w {
			t.Errorf("line %d: target %q, want %q", line, got[line], w)
		}
	}
	if p := polled(t, log); p[3] != "TCP:[10.0.0.9:80]" {
		t.Errorf("polled FDs: %v", p)
	}
}

// A log with strace -y targets keeps them; nothing is followed.
func TestNameFDsKeepsYTargets(t *testing.T) {
	log := `openat(AT_FDCWD</srv>, "a", O_RDONLY) = 3</srv/a>
dup2(3</srv/a>, 7</dev/null>) = 7</srv/a>
read(7</srv/a>, "", 1) = 0
close(9) = -1 EBADF (Bad file descriptor)
`
	got := targets(t, log)
	for line, w := range map[int]string{1: "/srv/a", 2: "/srv/a", 3: "/srv/a", 4: ""} {
		if got[line] != w {
			t.Errorf("line %d: target %q, want %q", line, got[line], w)
		}
	}
}

// An strace -ff set without -y, strace-analyzer's format: the child's file
// (PID 10) sorts before its parent's (PID 9) by name, as a shell's glob
// gives them, but is read after it, so the child knows the fd it inherited
// at the fork.
func TestLogsFollowFDsAcrossAnFFSet(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"set.9": `openat(AT_FDCWD, "/data/x", O_RDONLY) = 3
clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x7f) = 10
close(3) = 0
openat(AT_FDCWD, "/data/y", O_RDONLY) = 3
read(3, ""..., 100) = 100
`,
		"set.10": `read(3, ""..., 4096) = 4096
read(3, ""..., 4096) = 17
bogus line
`,
	}
	var paths []string
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	p := NewParser()
	sort.Strings(paths)
	read := map[string]int64{}
	err := Logs(paths, p)(func(e *Event) {
		if e.Name == "read" {
			read[e.Target()] += e.Moved()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if read["/data/x"] != 4113 || read["/data/y"] != 100 || !p.FollowedFDs {
		t.Errorf("bytes read %v (fds followed: %v), want /data/x 4113 (the child), /data/y 100 (the parent)", read, p.FollowedFDs)
	}
	// Malformed lines are numbered within their file, and name it.
	if p.Bad != 1 || p.Malformed[0].Line != 3 || p.Malformed[0].File != filepath.Join(dir, "set.10") {
		t.Errorf("malformed %d, first %+v: want line 3 of set.10", p.Bad, p.Malformed)
	}
}

func TestSockaddrText(t *testing.T) {
	for in, want := range map[string]string{
		`{sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("127.0.0.53")}`:                                                           "127.0.0.53:53",
		`{sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "2001:db8::1", &sin6_addr), sin6_scope_id=0}`: "[2001:db8::1]:443",
		`{sa_family=AF_UNIX, sun_path="/run/a \"b\".sock"}`:                                                                                   `/run/a "b".sock`,
		`{sa_family=AF_UNIX, sun_path=@"/tmp/.X11-unix/X0"}`:                                                                                  "@/tmp/.X11-unix/X0",
		`{sa_family=AF_NETLINK, nl_pid=0, nl_groups=00000000}`:                                                                                "",
		`0x7ffd1234`: "",
		`{sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("nonsense")}`: "",
	} {
		if got := sockaddrText(in); got != want {
			t.Errorf("sockaddrText(%s) = %q, want %q", in, got, want)
		}
	}
}

// nextArgEnd's quick path finds the comma topLevelIndex finds.
func FuzzNextArgEnd(f *testing.F) {
	for _, s := range []string{"3, \"a\", 1", "AT_FDCWD, \"/a,b\", O_RDONLY", "3</a,b>, 1", "{fd=3, events=POLLIN}, 1, 5", "a), b", "x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := nextArgEnd(s), topLevelIndex(s, ','); got != want {
			t.Errorf("nextArgEnd(%q) = %d, topLevelIndex %d", s, got, want)
		}
	})
}
