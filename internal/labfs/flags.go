package labfs

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// DefaultReadChunk is the size of a pipelined read when --read-chunk is not
// given (Config.ReadChunk 0).
const DefaultReadChunk = 1 << 20

// Flags renders the configuration as the fusescope fs mount flags that
// produce it, over the preset that needs the fewest (the default preset on
// a tie, which needs no --preset): what stats shows, and what a user passes
// to mount the same file system again. Over another preset, the first flag
// is --preset=NAME. The flag names are the Config fields' flag tags.
func (c Config) Flags() []string {
	args := c.Args()
	for i, a := range args {
		if name, v, ok := strings.Cut(a, "="); ok {
			args[i] = name + "=" + shellQuote(v)
		}
	}
	return args
}

// Args is Flags as a command's arguments, for exec rather than a shell.
func (c Config) Args() []string {
	best := c.flagsOver("default")
	for _, name := range PresetNames() {
		if name == "default" {
			continue
		}
		if f := c.flagsOver(name); len(f)+1 < len(best) {
			best = append([]string{"--preset=" + name}, f...)
		}
	}
	return best
}

// flagsOver lists the flags that give c over the named preset.
func (c Config) flagsOver(preset string) []string {
	base, _ := Preset(preset)
	bv, cv := reflect.ValueOf(base), reflect.ValueOf(c)
	out := []string{} // not nil: a record then says "the default preset"
	for i := range cv.NumField() {
		f := cv.Type().Field(i)
		name := f.Tag.Get("flag")
		if name == "" {
			continue
		}
		was, is := flagValue(f, bv.Field(i)), flagValue(f, cv.Field(i))
		switch {
		case was == is:
		case is == "true":
			out = append(out, "--"+name)
		default:
			out = append(out, "--"+name+"="+is)
		}
	}
	return out
}

// Override sets the fields of c whose flags given reports as given on the
// command line to their values in src.
func (c *Config) Override(src *Config, given func(flag string) bool) {
	dst, from := reflect.ValueOf(c).Elem(), reflect.ValueOf(src).Elem()
	for i := range dst.NumField() {
		if name := dst.Type().Field(i).Tag.Get("flag"); name != "" && given(name) {
			dst.Field(i).Set(from.Field(i))
		}
	}
}

// zeroFlags are the values the zero Config stands for, in the flags'
// syntax, where they are not the type's zero.
var zeroFlags = map[string]string{"readdirplus": "auto", "invalidation": "none", "xattrs": "pass", "read-chunk": FormatSize(DefaultReadChunk)}

// FlagDefault is a flag's value in the zero Config (the default preset):
// what --help shows.
func FlagDefault(name string) string {
	var c Config
	v := reflect.ValueOf(c)
	for i := range v.NumField() {
		if f := v.Type().Field(i); f.Tag.Get("flag") == name {
			return flagValue(f, v.Field(i))
		}
	}
	return ""
}

// flagValue is a field's value in its flag's syntax: an inverted switch
// (NoAutoInvalData for --auto-inval-data) as the flag's truth, a nil
// timeout as the default's, a zero that stands for a default as it.
func flagValue(f reflect.StructField, v reflect.Value) string {
	name := f.Tag.Get("flag")
	if v.IsZero() {
		if z, ok := zeroFlags[name]; ok {
			return z
		}
	}
	switch x := v.Interface().(type) {
	case *time.Duration:
		return formatDuration(timeoutOr(x))
	case time.Duration:
		return formatDuration(x)
	case LatencySpec:
		return x.String()
	case bool:
		if f.Tag.Get("invert") == "true" {
			x = !x
		}
		return strconv.FormatBool(x)
	case string:
		return x
	case int:
		switch name {
		case "read-chunk", "max-read", "max-write", "max-readahead":
			if x > 0 {
				return FormatSize(uint64(x))
			}
		}
		return strconv.Itoa(x)
	case uint64:
		if name == "bandwidth" {
			return FormatSize(x) + "/s"
		}
		return strconv.FormatUint(x, 10)
	}
	panic(fmt.Sprintf("labfs: flag %s has no syntax for %s", name, v.Type()))
}

// FormatSize writes a size as ParseSize reads it, in the largest binary or
// decimal unit that divides it.
func FormatSize(n uint64) string {
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"GiB", 1 << 30}, {"GB", 1e9}, {"MiB", 1 << 20}, {"MB", 1e6}, {"KiB", 1 << 10}, {"KB", 1e3}} {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatUint(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatUint(n, 10) + "B"
}

// shellQuote quotes a flag's value for a POSIX shell when it needs it (the
// latency spec's * would glob).
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,=+-/:_") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
