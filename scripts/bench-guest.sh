#!/usr/bin/env bash
# A benchmark of test/bench in a kernel of the matrix, booted under qemu:
# the ways of attaching fusescope's tracer compared in one run on one
# kernel (TestBenchMechanisms, docs/performance.md), where this machine's
# own kernel has neither fentry nor kprobes.
#
# Usage: scripts/bench-guest.sh VMLINUX [FUSE_KO] [ROUNDS] [TEST]
#   VMLINUX  an uncompressed kernel, as test/kernels/run.sh leaves them in
#            .cache/kernels/*/vmlinux (or the .vmlinux of a kernel it fetched)
#   FUSE_KO  fuse.ko where fuse is a module ("-" where it is built in)
#   ROUNDS   rounds of blocks (default 16); TEST the benchmark (default
#            TestBenchMechanisms)
#   FUSESCOPE_BENCH_ATTACH=tp_btf,fentry limits TestBenchMechanisms to
#            those ways of attaching (default: all four)
#
# qemu runs with -icount shift=0,sleep=off: the guest's clock counts the
# instructions it executes (1 ns each) and skips its idle time, so the
# programs' run time that kernel.bpf_stats_enabled reports is an
# instruction count, the same whatever else this machine runs. Debian's
# 6.1 does not boot that way (it hangs before its first line): set
# BENCH_ICOUNT= to run it on the host's clock, whose figures follow the
# host's load. Run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
vmlinux=${1:?usage: scripts/bench-guest.sh VMLINUX [FUSE_KO] [ROUNDS] [TEST]}
ko=${2:--} rounds=${3:-16} test=${4:-TestBenchMechanisms}
icount=${BENCH_ICOUNT-"-icount shift=0,sleep=off"}
scripts/deps.sh qemu-system-x86_64:qemu-system-x86 busybox:busybox-static
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/root/bin"
CGO_ENABLED=0 go build -o "$dir/root/fusescope" ./cmd/fusescope
CGO_ENABLED=0 go test -c -o "$dir/root/bench.test" ./test/bench
cp "$(command -v busybox)" "$dir/root/bin/busybox"
[[ $ko != - ]] && cp "$ko" "$dir/root/fuse.ko"
cat >"$dir/root/init" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
mkdir -p /proc /sys /dev /tmp
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mount -t tracefs tracefs /sys/kernel/tracing; mount -t bpf bpf /sys/fs/bpf
[ -f /fuse.ko ] && insmod /fuse.ko
cd /tmp
FUSESCOPE_BENCH=1 FUSESCOPE_BIN=/fusescope FUSESCOPE_BENCH_ROUNDS=$rounds FUSESCOPE_BENCH_ATTACH=${FUSESCOPE_BENCH_ATTACH:-} /bench.test -test.run '^$test\$' -test.v -test.timeout 30m
poweroff -f
EOF
chmod +x "$dir/root/init"
(cd "$dir/root" && find . | busybox cpio -o -H newc 2>/dev/null) >"$dir/initramfs.cpio"
# shellcheck disable=SC2086
timeout 1800 qemu-system-x86_64 $icount -accel tcg -m 2048 -smp 2 -nographic -no-reboot \
  -kernel "$vmlinux" -initrd "$dir/initramfs.cpio" -append "console=ttyS0 quiet panic=-1" </dev/null |
  tr -d '\r' | sed -n '/^Kernel /,/^--- /p'
