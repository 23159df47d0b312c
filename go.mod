module github.com/fusescope/fusescope

go 1.26.8

require (
	github.com/cilium/ebpf v0.22.0
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/klauspost/compress v1.18.0
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.10
	golang.org/x/sys v0.49.0
	gonum.org/v1/gonum v0.17.0
)

require github.com/inconshreveable/mousetrap v1.1.0 // indirect

// go-fuse v2.12.1 with a fix to its splice path (third_party/go-fuse/PATCHES.md).
replace github.com/hanwen/go-fuse/v2 => ./third_party/go-fuse
