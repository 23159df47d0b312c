package fuseproto

// INIT flags of include/uapi/linux/fuse.h (bits of the 64-bit flags word;
// bits 32 and up travel in flags2).
var initFlagNames = []struct {
	bit  uint
	name string
}{
	{0, "ASYNC_READ"}, {1, "POSIX_LOCKS"}, {2, "FILE_OPS"}, {3, "ATOMIC_O_TRUNC"},
	{4, "EXPORT_SUPPORT"}, {5, "BIG_WRITES"}, {6, "DONT_MASK"}, {7, "SPLICE_WRITE"},
	{8, "SPLICE_MOVE"}, {9, "SPLICE_READ"}, {10, "FLOCK_LOCKS"}, {11, "HAS_IOCTL_DIR"},
	{12, "AUTO_INVAL_DATA"}, {13, "DO_READDIRPLUS"}, {14, "READDIRPLUS_AUTO"}, {15, "ASYNC_DIO"},
	{16, "WRITEBACK_CACHE"}, {17, "NO_OPEN_SUPPORT"}, {18, "PARALLEL_DIROPS"}, {19, "HANDLE_KILLPRIV"},
	{20, "POSIX_ACL"}, {21, "ABORT_ERROR"}, {22, "MAX_PAGES"}, {23, "CACHE_SYMLINKS"},
	{24, "NO_OPENDIR_SUPPORT"}, {25, "EXPLICIT_INVAL_DATA"}, {26, "MAP_ALIGNMENT"}, {27, "SUBMOUNTS"},
	{28, "HANDLE_KILLPRIV_V2"}, {29, "SETXATTR_EXT"}, {30, "INIT_EXT"}, {31, "INIT_RESERVED"},
	{32, "SECURITY_CTX"}, {33, "HAS_INODE_DAX"}, {34, "CREATE_SUPP_GROUP"}, {35, "HAS_EXPIRE_ONLY"},
	{36, "DIRECT_IO_ALLOW_MMAP"}, {37, "PASSTHROUGH"}, {38, "NO_EXPORT_SUPPORT"}, {39, "HAS_RESEND"},
	{40, "ALLOW_IDMAP"}, {41, "OVER_IO_URING"}, {42, "REQUEST_TIMEOUT"},
}

// InitFlagNames names the set bits of an INIT flags word, in bit order;
// unknown bits appear as BIT_n.
func InitFlagNames(flags uint64) []string {
	var out []string
	known := uint64(0)
	for _, f := range initFlagNames {
		known |= 1 << f.bit
		if flags&(1<<f.bit) != 0 {
			out = append(out, f.name)
		}
	}
	for b := uint(0); b < 64; b++ {
		if flags&(1<<b) != 0 && known&(1<<b) == 0 {
			out = append(out, "BIT_"+itoa(b))
		}
	}
	return out
}

func itoa(b uint) string {
	if b < 10 {
		return string(rune('0' + b))
	}
	return string(rune('0'+b/10)) + string(rune('0'+b%10))
}
