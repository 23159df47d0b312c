package syslive

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// procSocket names the socket with inode ino, as /proc/PID/fd shows a
// socket the trace did not see made (open when tracing began, or received
// from another process): its protocol, and the peer's address when it is
// connected, its own otherwise, as the live source names the sockets it
// sees connected or bound. The tables are pid's network namespace's.
func procSocket(pid int, ino uint64) (string, bool) {
	for _, t := range []struct{ file, proto string }{
		{"tcp", "TCP"}, {"tcp6", "TCPv6"}, {"udp", "UDP"}, {"udp6", "UDPv6"}, {"unix", "UNIX"},
	} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, t.file))
		if err != nil {
			continue
		}
		var addr string
		var ok bool
		if t.file == "unix" {
			addr, ok = unixSocket(f, ino)
		} else {
			addr, ok = inetSocket(f, ino)
		}
		f.Close()
		if ok {
			return strings.TrimSuffix(t.proto, "v6") + ":[" + addr + "]", true
		}
	}
	return "", false
}

// inetSocket finds ino in a /proc/net/{tcp,udp}[6] table:
// "sl local_address rem_address st ... uid timeout inode ...".
func inetSocket(r io.Reader, ino uint64) (string, bool) {
	f, ok := tableRow(r, 9, ino)
	if !ok {
		return "", false
	}
	local, lok := procAddr(f[1])
	remote, rok := procAddr(f[2])
	switch {
	case rok && remote.Port() != 0:
		return remote.String(), true
	case lok:
		return local.String(), true
	}
	return "", true
}

// tableRow returns the fields of the row of a /proc/net table whose column
// col is inode ino.
func tableRow(r io.Reader, col int, ino uint64) ([]string, bool) {
	sc := bufio.NewScanner(r)
	sc.Scan() // the header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) <= col {
			continue
		}
		if n, err := strconv.ParseUint(f[col], 10, 64); err == nil && n == ino {
			return f, true
		}
	}
	return nil, false
}

// procAddr reads "0100007F:1F90": the address as the kernel's 32-bit words
// in host (little-endian) order, the port in hexadecimal.
func procAddr(s string) (netip.AddrPort, bool) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, false
	}
	raw, err := hex.DecodeString(a)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, false
	}
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(raw[i:], binary.LittleEndian.Uint32(raw[i:]))
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	ip, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(ip.Unmap(), uint16(port)), true
}

// unixSocket finds ino in /proc/net/unix:
// "Num RefCount Protocol Flags Type St Inode [Path]".
func unixSocket(r io.Reader, ino uint64) (string, bool) {
	f, ok := tableRow(r, 6, ino)
	switch {
	case !ok:
		return "", false
	case len(f) > 7:
		// An abstract name starts with @, as the live source writes it.
		return strings.Join(f[7:], " "), true
	}
	return f[6], true // unnamed: its inode keeps it apart from the others
}

// Proc is what the live interpretation asks /proc about a process: the
// names of fds it did not see made, and where a process is. Tests replay
// recorded answers.
type Proc interface {
	// FD names fd of process pid as strace -y would: a path, a socket
	// with its addresses, pipe:[inode].
	FD(pid, fd int) (string, error)
	// FDs lists the fds process pid holds.
	FDs(pid int) ([]int, error)
	// Cwd is process pid's working directory.
	Cwd(pid int) (string, error)
	// HasFD tells whether process pid still holds fd; alive is false when
	// the process is gone (then nothing can be said).
	HasFD(pid, fd int) (has, alive bool)
}

// ProcFS is Proc on this machine's /proc.
type ProcFS struct{}

// FD reads the fd's link; a socket is named as procSocket does.
func (ProcFS) FD(pid, fd int) (string, error) {
	s, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
	if err != nil {
		return "", err
	}
	if ino, ok := strings.CutPrefix(s, "socket:["); ok {
		if n, err := strconv.ParseUint(strings.TrimSuffix(ino, "]"), 10, 64); err == nil {
			if name, ok := procSocket(pid, n); ok {
				return name, nil
			}
		}
	}
	return s, nil
}

// FDs lists /proc/PID/fd.
func (ProcFS) FDs(pid int) ([]int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil {
			fds = append(fds, fd)
		}
	}
	return fds, nil
}

// Cwd reads /proc/PID/cwd.
func (ProcFS) Cwd(pid int) (string, error) { return os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)) }

// HasFD looks for /proc/PID/fd/N.
func (ProcFS) HasFD(pid, fd int) (has, alive bool) {
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/fd", pid)); err != nil {
		return false, false
	}
	_, err := os.Lstat(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
	return err == nil, true
}
