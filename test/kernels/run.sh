#!/usr/bin/env bash
# fusescope on kernels older than the one it needs, booted under qemu (TCG:
# this machine's /dev/kvm is a nested-virtualisation module that is slower
# than emulation and crashes guests). Each guest runs `fusescope trace` before
# and after a lab file system is mounted and must refuse in one line that
# names its kernel release and what to boot; the 6.12 guest also prints the
# fuse tracepoints' own records, the oracle for "unique is 0 at send".
#
# Kernels: Debian bookworm's (6.1: no fuse tracepoints) and bookworm-backports'
# (6.12: the tracepoints, without request ids at send), downloaded and
# unpacked under .cache/kernels, never installed. Run as root: make test-kernels.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$PWD/.cache/kernels
mkdir -p "$work"

# Download the image package the suite's linux-image-amd64 depends on.
fetch() { # SUITE -> prints the unpacked root
  local suite=$1 lists=$work/lists-$1 parts=$work/sources-$1
  mkdir -p "$lists/partial" "$parts"
  cat >"$parts/$suite.sources" <<EOF
Types: deb
URIs: http://deb.debian.org/debian
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  local apt=(-o Dir::Etc::sourcelist=/dev/null -o Dir::Etc::sourceparts="$parts" -o Dir::State::lists="$lists")
  apt-get "${apt[@]}" update -qq >/dev/null 2>&1
  local pkg
  pkg=$(apt-cache "${apt[@]}" depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
  [[ -n $pkg ]] || { echo "test-kernels: no linux-image package in $suite" >&2; exit 1; }
  local root=$work/$pkg
  if [[ ! -d $root/boot ]]; then
    (cd "$work" && apt-get "${apt[@]}" download "$pkg" >/dev/null 2>&1)
    dpkg -x "$work/${pkg}"_*.deb "$root"
  fi
  echo "$root"
}

# The uncompressed kernel inside vmlinuz (xz or zstd): qemu boots it through
# its PVH note, twice as fast as vmlinuz under emulation.
vmlinux() { # ROOT -> prints the path of vmlinux
  local root=$1 out=$1/vmlinux
  [[ -s $out ]] || python3 - "$root"/boot/vmlinuz-* "$out" <<'EOF'
import lzma, subprocess, sys
data = open(sys.argv[1], "rb").read()
i = data.find(b"\xfd7zXZ\x00")
if i >= 0:
    out = lzma.LZMADecompressor().decompress(data[i:])
else:
    i = data.find(b"\x28\xb5\x2f\xfd")
    out = subprocess.run(["zstd", "-dcq"], input=data[i:], capture_output=True).stdout if i >= 0 else b""
if not out.startswith(b"\x7fELF"):
    sys.exit("no xz or zstd kernel payload in " + sys.argv[1])
open(sys.argv[2], "wb").write(out)
EOF
  echo "$out"
}

CGO_ENABLED=0 go build -o "$work/fusescope" ./cmd/fusescope

boot() { # ROOT -> the guest's console output
  local root=$1 ir=$work/initramfs
  rm -rf "$ir" && mkdir -p "$ir/bin"
  cp /bin/busybox "$ir/bin/" && cp "$work/fusescope" "$ir/"
  find "$root/lib/modules" -name fuse.ko -exec cp {} "$ir/" \;
  cat >"$ir/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mkdir -p /proc /sys /dev /run /tmp /src /mnt
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
echo hi >/src/a
echo; echo "kernel $(uname -r)"
msg=$(/fusescope trace 1 1 2>&1); echo "before mount: $msg (exit $?)"
[ -f /fuse.ko ] && insmod /fuse.ko
/fusescope fs mount /src /mnt --background >/dev/null 2>&1 && echo "mounted"
msg=$(/fusescope trace --mount /mnt 1 1 2>&1); echo "with mount: $msg (exit $?)"
ev=/sys/kernel/tracing/events/fuse
if [ -d $ev ]; then
  echo 1 >$ev/enable; cat /mnt/a >/dev/null; echo 0 >$ev/enable
  grep -E 'fuse_request_(send|end):' /sys/kernel/tracing/trace | sed 's/^/record: /'
fi
/fusescope fs umount /mnt && echo "unmounted"
poweroff -f
EOF
  chmod +x "$ir/init"
  (cd "$ir" && find . | busybox cpio -o -H newc 2>/dev/null) >"$work/initramfs.cpio"
  timeout 300 qemu-system-x86_64 -accel tcg -m 1024 -smp 1 -nographic -no-reboot \
    -kernel "$(vmlinux "$root")" -initrd "$work/initramfs.cpio" -append "console=ttyS0 quiet panic=-1" 2>&1 | tr -d '\r'
}

fail=0
show=${SHOW:-}
check() { # OUTPUT DESCRIPTION PATTERN
  if grep -qE -- "$3" <<<"$1"; then echo "ok    $2"; else echo "FAIL  $2 (no line matching: $3)"; fail=1; fi
}

out=$(boot "$(fetch bookworm)")
[[ -n $show ]] && echo "$out"
release=$(sed -n 's/^kernel //p' <<<"$out")
rel=$(sed 's/[.+]/\\&/g' <<<"$release") # as a regular expression
echo "== Debian bookworm: $release"
check "$out" "6.1, fuse not loaded: one line asking to load it" "^before mount: fusescope: .*modprobe fuse\) \(exit 1\)$"
check "$out" "6.1: the lab file system mounts" "^mounted$"
check "$out" "6.1: one line naming the release, no tracepoint, boot 6.18" "^with mount: fusescope: kernel $rel has no fuse:fuse_request_send tracepoint.*boot Linux 6.18 or later \(exit 1\)$"
check "$out" "6.1: nothing left mounted" "^unmounted$"

out=$(boot "$(fetch bookworm-backports)")
[[ -n $show ]] && echo "$out"
release=$(sed -n 's/^kernel //p' <<<"$out")
rel=$(sed 's/[.+]/\\&/g' <<<"$release")
echo "== Debian bookworm-backports: $release"
check "$out" "6.12: one line naming the release, unique 0, boot 6.18" "^with mount: fusescope: kernel $rel fires fuse:fuse_request_send before the request has its id.*boot Linux 6.18 or later \(exit 1\)$"
check "$out" "6.12: the tracepoint's own send records carry req 0" "^record: .*fuse_request_send: connection [0-9]+ req 0 opcode"
if grep -qE "fuse_request_send: connection [0-9]+ req [1-9]" <<<"$out"; then
  echo "FAIL  6.12: a send record carries an id: the version check refuses a kernel that works"; fail=1
else
  echo "ok    6.12: no send record carries an id"
fi
check "$out" "6.12: the end records carry the ids" "^record: .*fuse_request_end: connection [0-9]+ req [1-9][0-9]* len"
check "$out" "6.12: nothing left mounted" "^unmounted$"
exit $fail
