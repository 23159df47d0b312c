package syslive

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const tcpTable = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0000000000000000 100 0 0 10 0
   1: 0100007F:A1B2 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 1002 1 0000000000000000 20 4 30 10 -1
`

const tcp6Table = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:01BB 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2001 1 0000000000000000 100 0 0 10 0
   1: 0000000000000000FFFF00000200000A:C350 0000000000000000FFFF00000100000A:0035 01 00000000:00000000 00:00000000 00000000     0        0 2002 1 0000000000000000 100 0 0 10 0
`

const unixTable = `Num       RefCount strace.Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 3001 /run/app.sock
0000000000000000: 00000002 00000000 00000000 0001 03 3002
0000000000000000: 00000002 00000000 00010000 0001 01 3003 @abstract
`

func TestProcNetTables(t *testing.T) {
	for _, c := range []struct {
		table string
		ino   uint64
		want  string
		found bool
	}{
		{tcpTable, 1001, "127.0.0.1:8080", true}, // listening: its own address
		{tcpTable, 1002, "127.0.0.1:8080", true}, // connected: the peer's
		{tcpTable, 9999, "", false},
		{tcp6Table, 2001, "[::1]:443", true},
		{tcp6Table, 2002, "10.0.0.1:53", true}, // v4-mapped
		{unixTable, 3001, "/run/app.sock", true},
		{unixTable, 3002, "3002", true}, // unnamed: by inode
		{unixTable, 3003, "@abstract", true},
		{"", 1, "", false},
		{"header only\n", 1, "", false},
		{"h\n 0: zz:zz yy:yy 0A 0 0 0 0 0 5\n", 5, "", true}, // unreadable addresses
	} {
		find := inetSocket
		if strings.HasPrefix(c.table, "Num") {
			find = unixSocket
		}
		got, found := find(strings.NewReader(c.table), c.ino)
		if got != c.want || found != c.found {
			t.Errorf("inode %d: got %q, %v; want %q, %v", c.ino, got, found, c.want, c.found)
		}
	}
}

// The oracle is the socket itself: what the net package says its
// addresses are.
func TestProcSocketNamesOwnSockets(t *testing.T) {
	inode := func(c syscall.Conn) uint64 {
		raw, err := c.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		raw.Control(func(fd uintptr) { syscall.Fstat(int(fd), &st) })
		return st.Ino
	}
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	path := filepath.Join(t.TempDir(), "s.sock")
	ul, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	for _, c := range []struct {
		conn syscall.Conn
		want string
	}{
		{udp, "UDP:[" + udp.LocalAddr().String() + "]"},
		{ln.(*net.TCPListener), "TCP:[" + ln.Addr().String() + "]"},
		{client.(*net.TCPConn), "TCP:[" + ln.Addr().String() + "]"},
		{ul.(*net.UnixListener), "UNIX:[" + path + "]"},
	} {
		if got, ok := procSocket(os.Getpid(), inode(c.conn)); !ok || got != c.want {
			t.Errorf("got %q, %v; want %q", got, ok, c.want)
		}
	}
}

func FuzzProcNetTables(f *testing.F) {
	for _, s := range []string{tcpTable, tcp6Table, unixTable} {
		f.Add(s, uint64(1002))
	}
	f.Fuzz(func(t *testing.T, table string, ino uint64) {
		inetSocket(strings.NewReader(table), ino)
		unixSocket(strings.NewReader(table), ino)
	})
}
