package strace

import (
	"path"
	"strconv"
	"strings"
)

// firstArg returns the first top-level argument of an argument list.
func FirstArg(args string) string {
	if i := topLevelIndex(args, ','); i >= 0 {
		return args[:i]
	}
	return args
}

// fdTarget extracts "/etc/passwd" from "3</etc/passwd>" (strace -y).
func fdTarget(s string) string {
	s = strings.TrimSpace(s)
	i := strings.IndexByte(s, '<')
	if i <= 0 || !allDigits(s[:i]) || !strings.HasSuffix(s, ">") {
		return ""
	}
	return unescape(s[i+1 : len(s)-1])
}

// firstAnnotation is the first fd target anywhere in args, outside quoted
// strings, or "".
func firstAnnotation(args string) string {
	if i := scanArgs(args, -1); i >= 0 {
		if end := annotationEnd(args, i); end > 0 {
			return unescape(args[i+1 : end])
		}
	}
	return ""
}

// unescape undoes strace's escapes in a -y path: \" \\ \n \t \r \v \f,
// \xNN, and octal of one to three digits (strace prints '>' as \76).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		c := s[i+1]
		if r := simpleEscape(c); r != 0 {
			b.WriteByte(r)
			i++
			continue
		}
		if c == 'x' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		if n := octalDigits(s[i+1:]); n > 0 {
			v, _ := strconv.ParseUint(s[i+1:i+1+n], 8, 16)
			b.WriteByte(byte(v))
			i += n
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// simpleEscape is the byte that \c stands for, or 0.
func simpleEscape(c byte) byte {
	switch c {
	case '"', '\\':
		return c
	case 'n':
		return '\n'
	case 't':
		return '\t'
	case 'r':
		return '\r'
	case 'v':
		return '\v'
	case 'f':
		return '\f'
	}
	return 0
}

// octalDigits is how many octal digits (at most 3) s starts with.
func octalDigits(s string) int {
	n := 0
	for n < 3 && n < len(s) && s[n] >= '0' && s[n] <= '7' {
		n++
	}
	return n
}

func TargetKind(t string) string {
	switch {
	case strings.HasPrefix(t, "/dev/"):
		return "device"
	case strings.HasPrefix(t, "/"):
		return "file"
	case strings.HasPrefix(t, "TCP"):
		return "tcp"
	case strings.HasPrefix(t, "UDP"):
		return "udp"
	case strings.HasPrefix(t, "UNIX"):
		return "unix"
	case strings.HasPrefix(t, "pipe:"):
		return "pipe"
	case strings.HasPrefix(t, "socket:"):
		return "socket"
	}
	return "other"
}

// lookupArgs: 1 + the argument holding the path a lookup was given.
var lookupArgs = map[string]int{"open": 1, "creat": 1, "stat": 1, "lstat": 1, "access": 1, "readlink": 1, "execve": 1,
	"openat": 2, "openat2": 2, "newfstatat": 2, "statx": 2, "faccessat": 2, "faccessat2": 2, "readlinkat": 2, "execveat": 2}

// missingPath is the path a lookup that failed with ENOENT was given,
// made absolute when the log says from where (-y's AT_FDCWD</dir>), or "".
func (e *Event) MissingPath() string {
	if e.Kind != Syscall || e.Errno != "ENOENT" || e.Calls > 0 {
		return ""
	}
	if e.Path != "" {
		return e.Path
	}
	i := lookupArgs[e.Name]
	if i == 0 {
		return ""
	}
	args := leadingArgs(e.Args, i)
	p, ok := Quoted(args[i-1])
	if !ok || p == "" {
		return ""
	}
	if !strings.HasPrefix(p, "/") && i == 2 {
		if dir := fdTarget(args[0]); strings.HasPrefix(dir, "/") {
			p = path.Join(dir, p)
		} else if rest, ok := strings.CutPrefix(strings.TrimSpace(args[0]), "AT_FDCWD<"); ok && strings.HasSuffix(rest, ">") {
			p = path.Join(unescape(rest[:len(rest)-1]), p)
		}
	}
	return p
}

// quoted reads one of strace's quoted strings, "..." (a cut one keeps
// its "..." mark).
func Quoted(s string) (string, bool) {
	s = strings.TrimSpace(s)
	cut := strings.HasSuffix(s, `"...`)
	s = strings.TrimSuffix(s, "...")
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", false
	}
	v := unescape(s[1 : len(s)-1])
	if cut {
		v += "..."
	}
	return v, true
}

// execArgv reads the argument array of an execve line:
// execve("/usr/bin/cc", ["cc", "-c", "a.c"], 0x7ffd... /* 20 vars */).
func ExecArgv(e *Event) []string {
	if e.Argv != nil {
		return e.Argv
	}
	args := leadingArgs(e.Args, 2)
	a := strings.TrimSpace(args[1])
	if len(a) < 2 || a[0] != '[' || a[len(a)-1] != ']' {
		return nil
	}
	a = a[1 : len(a)-1]
	var out []string
	for a != "" {
		item := a
		if i := topLevelIndex(a, ','); i >= 0 {
			item, a = a[:i], strings.TrimSpace(a[i+1:])
		} else {
			a = ""
		}
		if v, ok := Quoted(item); ok {
			out = append(out, v)
		} else if strings.TrimSpace(item) == "..." {
			out = append(out, "...")
		}
	}
	return out
}
