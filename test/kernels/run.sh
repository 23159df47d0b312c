#!/usr/bin/env bash
# The kernel matrix: Debian's kernels from 5.10 to the newest, each booted
# under qemu's TCG (this machine's /dev/kvm is a nested-virtualisation
# module that is slower than emulation and crashes guests) with a minimal
# initramfs: busybox, the release binary (make release: the same file in
# every guest) and test/guest's test binary, which runs the end-to-end trace
# tests inside and holds the kernel to its row of test/guest/kernels.go.
# docs/kernels.md says what runs and how to add a kernel.
#
# Usage: test/kernels/run.sh [--quick] [--jobs N] [--show] [NAME...]
#   --quick   make test's pass: one workload per kernel (TestVersion and
#             TestTraceCounts), and one kernel per row (no 6.12-bpo)
#   --jobs N  guests at once (default 2; each is one emulated CPU)
#   --show    print every guest's console (a failing guest's always is)
#   NAME      only these kernels: 5.10 6.1 6.12 6.12-bpo 6.17 newest
#
# Kernels are downloaded into .cache/kernels (FUSESCOPE_KERNELS_CACHE
# overrides), once per package, unpacked there and never installed. The
# suites' indexes are refreshed every run, so "newest" follows
# trixie-backports' linux-image-amd64 as it moves. Run as root (make
# test-kernels, or make test for --quick).
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$SECONDS

# NAME SUITE PICK PASS: PICK is "default" (the package the suite's
# linux-image-amd64 depends on) or a series (its newest linux-image-X.Y.*);
# PASS "quick" puts the kernel in --quick too. SUITE "local" boots a kernel
# unpacked by hand into .cache/kernels/PICK (another distribution's:
# docs/kernels.md, "Adding a kernel").
matrix=(
  "5.10     bullseye           default quick"
  "6.1      bookworm           default quick"
  "6.12     trixie             default quick"
  "6.12-bpo bookworm-backports default full"
  "6.17     trixie-backports   6.17    quick"
  "newest   trixie-backports   default quick"
)

quick= jobs=2 show= only=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) quick=1 ;;
    --jobs) jobs=${2:-}; [[ $# -gt 1 ]] && shift ;;
    --show) show=1 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "test-kernels: unknown option $1: see test/kernels/run.sh --help" >&2; exit 2 ;;
    *) only+=("$1") ;;
  esac
  shift
done
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "test-kernels: --jobs takes a number of guests, e.g. --jobs 2" >&2; exit 2; }
known=$(printf '%s\n' "${matrix[@]}" | awk '{print $1}')
for name in "${only[@]}"; do
  grep -qxF -- "$name" <<<"$known" ||
    { echo "test-kernels: no kernel $name in the matrix: pick from" $known >&2; exit 2; }
done

work=${FUSESCOPE_KERNELS_CACHE:-$PWD/.cache/kernels}
run=$(mktemp -d "${TMPDIR:-/tmp}/fusescope-kernels.XXXXXX")
# Guests still running when this ends (Ctrl-C, a failure) end with it.
cleanup() {
  local p
  for p in "$run"/*/pid; do [[ -f $p ]] && kill "$(cat "$p")" 2>/dev/null; done
  wait # for the guests' jobs to end
  rm -rf "$run"
}
trap cleanup EXIT
mkdir -p "$work/logs"
# One run at a time per cache: runs share its indexes, packages and logs.
exec 9>"$work/.lock"
if ! flock -n 9; then
  echo "test-kernels: another run of the matrix holds $work: waiting for it" >&2
  flock 9
fi

die() { echo "test-kernels: $*" >&2; exit 1; }

# apt-get and apt-cache on one suite's lists under the cache; a connection
# that stalls for 15 s fails rather than hangs.
apt_opts() { # SUITE
  echo -o Dir::Etc::sourcelist=/dev/null -o Dir::Etc::sourceparts="$work/sources-$1" \
    -o Dir::State::lists="$work/lists-$1" -o Dir::Cache="$work/apt-cache" \
    -o Acquire::http::Timeout=15 -o Acquire::Retries=0 -o Debug::NoLocking=1
}

declare -A updated
# Refreshes a suite's index, once a run; offline, the cached index serves.
update() { # SUITE
  local suite=$1
  [[ -n ${updated[$suite]:-} ]] && return
  updated[$suite]=1
  mkdir -p "$work/lists-$suite/partial" "$work/sources-$suite" "$work/apt-cache/archives/partial"
  cat >"$work/sources-$suite/$suite.sources" <<EOF
Types: deb
URIs: http://deb.debian.org/debian
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  # shellcheck disable=SC2046
  if ! timeout 600 apt-get $(apt_opts "$suite") update -qq >"$run/update-$suite.log" 2>&1 ||
     grep -q '^[WE]: Failed to fetch' "$run/update-$suite.log"; then
    if compgen -G "$work/lists-$suite/*_Packages*" >/dev/null; then
      echo "test-kernels: could not refresh Debian's $suite index (offline?): using the one in $work" >&2
    else
      die "could not download Debian's $suite index from deb.debian.org: connect this machine to the network (or set http_proxy) and run it again"
    fi
  fi
}

# The kernel package to boot for a matrix entry.
resolve() { # SUITE PICK -> linux-image-X
  local suite=$1 pick=$2 pkg
  # shellcheck disable=SC2046
  if [[ $pick == default ]]; then
    pkg=$(apt-cache $(apt_opts "$suite") depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ && !n++ {print $2}')
  else
    pkg=$(apt-cache $(apt_opts "$suite") pkgnames "linux-image-$pick." 2>/dev/null |
      grep -E "^linux-image-${pick//./\\.}\.[0-9]+([-+][0-9a-z]+)?-amd64$" | sort -V | tail -1)
  fi
  [[ -n $pkg ]] || die "Debian's $suite has no linux-image package for $pick: see the matrix in test/kernels/run.sh"
  echo "$pkg"
}

# Downloads and unpacks a package once; prints its folder.
unpack() { # SUITE PACKAGE
  local suite=$1 pkg=$2 root=$work/$2
  if [[ ! -f $root/.unpacked ]]; then
    local deb
    deb=$(compgen -G "$work/${pkg}_*.deb" | head -1) || true
    if [[ -z $deb ]]; then
      echo "test-kernels: downloading $pkg from $suite" >&2
      # shellcheck disable=SC2046
      (cd "$work" && timeout 900 apt-get $(apt_opts "$suite") download "$pkg" >"$run/download-$pkg.log" 2>&1) ||
        die "could not download $pkg from deb.debian.org: connect this machine to the network (or set http_proxy), or put its .deb in $work, and run it again"
      deb=$(compgen -G "$work/${pkg}_*.deb" | head -1)
    fi
    rm -rf "$root" && dpkg-deb -x "$deb" "$root" && touch "$root/.unpacked"
  fi
  echo "$root"
}

# The uncompressed kernel inside vmlinuz (xz, zstd or gzip): qemu boots it
# through its PVH note, twice as fast as vmlinuz under emulation.
vmlinux() { # ROOT -> prints the path of vmlinux
  local root=$1 out=$1/vmlinux vmlinuz
  vmlinuz=$(compgen -G "$root/boot/vmlinuz-*" || compgen -G "$root/usr/lib/modules/*/vmlinuz" || compgen -G "$root/lib/modules/*/vmlinuz") ||
    die "no vmlinuz in $root"
  [[ -s $out ]] || python3 - "$vmlinuz" "$out" <<'EOF' || die "cannot extract the kernel from $vmlinuz"
import lzma, subprocess, sys, zlib
data = open(sys.argv[1], "rb").read()
out = b""
i = data.find(b"\xfd7zXZ\x00")  # Debian's
if i >= 0:
    out = lzma.LZMADecompressor().decompress(data[i:])
if not out.startswith(b"\x7fELF") and (i := data.find(b"\x28\xb5\x2f\xfd")) >= 0:
    out = subprocess.run(["zstd", "-dcq"], input=data[i:], capture_output=True).stdout
if not out.startswith(b"\x7fELF") and (i := data.find(b"\x1f\x8b\x08\x00")) >= 0:
    out = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data[i:])  # Enterprise Linux's
if not out.startswith(b"\x7fELF"):
    sys.exit("no xz, zstd or gzip kernel payload in " + sys.argv[1])
open(sys.argv[2] + ".tmp", "wb").write(out)
EOF
  [[ -s $out ]] || mv "$out.tmp" "$out"
  echo "$out"
}

# fuse.ko, uncompressed, where fuse is a module; nothing where built in.
fusemodule() { # ROOT...
  local ko
  ko=$(find "$@" -name 'fuse.ko*' -path '*/fs/fuse/*' 2>/dev/null | head -1)
  case $ko in
    '') ;;
    *.xz) xz -dc "$ko" >"$1/fuse.ko" && echo "$1/fuse.ko" ;;
    *.zst) zstd -dcq "$ko" >"$1/fuse.ko" && echo "$1/fuse.ko" ;;
    *) echo "$ko" ;;
  esac
}

# What every guest shares: busybox, the release binary, the test binary
# and /init, one cpio; each guest appends its own (/env, fuse.ko).
release=$(make -s --no-print-directory release | tail -1)
[[ -x $release ]] || die "make release made no binary"
(cd "$(dirname "$release")" && sha256sum --quiet -c "$(basename "$release").sha256") || die "$release does not match its checksum"
! ldd "$release" >/dev/null 2>&1 || die "$release is dynamically linked: build it with CGO_ENABLED=0 (make release)"
version=${release##*/fusescope-}
version=${version%-linux-amd64}
CGO_ENABLED=0 go test -c -o "$run/guest.test" ./test/guest
mkdir -p "$run/base/bin"
cp "$(command -v busybox)" "$run/base/bin/busybox"
cp "$release" "$run/base/fusescope"
cp "$run/guest.test" "$run/base/guest.test"
# libfuse's passthrough_hp where scripts/libfuse-examples.sh built it, with
# the libraries it loads at their paths (its own libfuse beside it, as its
# RUNPATH $ORIGIN/../lib finds it): the ring's daemon of TestStagesRing.
hp=.cache/libfuse/build/example/passthrough_hp
if [[ -x $hp ]]; then
  mkdir -p "$run/base/hp/example" "$run/base/hp/lib"
  cp "$hp" "$run/base/hp/example/"
  cp -L .cache/libfuse/build/lib/libfuse3.so.4 "$run/base/hp/lib/"
  ldd "$hp" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | while read -r lib; do
    [[ $lib == */libfuse3.so* ]] && continue
    mkdir -p "$run/base$(dirname "$lib")"
    cp -L "$lib" "$run/base$lib"
  done
fi
cat >"$run/base/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mkdir -p /proc /sys /dev /run /tmp
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
set -a; . /env; set +a
echo; echo "guest: kernel $(uname -r) up $(cut -d' ' -f1 /proc/uptime) s"
cd /tmp
/guest.test -test.v -test.timeout "$GUEST_TIMEOUT" ${GUEST_RUN:+-test.run "$GUEST_RUN"}
echo "guest: exit $? at $(cut -d' ' -f1 /proc/uptime) s"
poweroff -f
EOF
chmod +x "$run/base/init"
cpio_of() { # DIR OUT: a newc archive padded to 512 bytes, as the kernel wants concatenated ones
  (cd "$1" && find . | busybox cpio -o -H newc 2>/dev/null) >"$2"
  truncate -s %512 "$2"
}
cpio_of "$run/base" "$run/base.cpio"

# Fetch every kernel first (one at a time: they share the suites' lists),
# then boot them, --jobs at once.
names=()
for entry in "${matrix[@]}"; do
  read -r name suite pick pass <<<"$entry"
  [[ ${#only[@]} -gt 0 ]] && ! printf '%s\n' "${only[@]}" | grep -qxF "$name" && continue
  [[ -n $quick && $pass != quick && ${#only[@]} -eq 0 ]] && continue
  if [[ $suite == local ]]; then
    root=$work/$pick
    [[ -d $root ]] || die "no $root: unpack that kernel's package there (docs/kernels.md, Adding a kernel)"
    kernel=$(vmlinux "$root")
    ko=$(fusemodule "$root")
    img=$(compgen -G "$root/lib/modules/*/vmlinuz" | head -1) || true
    img=$(basename "$(dirname "${img:-$root/lib/modules/?/vmlinuz}")")
  else
    update "$suite"
    img=$(resolve "$suite" "$pick")
    # From trixie-backports' 7.x, linux-image-X holds almost nothing: the
    # kernel is linux-binary-X's, the modules linux-modules-X's.
    # shellcheck disable=SC2046
    deps=$(apt-cache $(apt_opts "$suite") depends "$img" 2>/dev/null)
    binary=$(awk '/Depends: linux-binary-/ {print $2; exit}' <<<"$deps")
    root=$(unpack "$suite" "${binary:-$img}")
    kernel=$(vmlinux "$root")
    ko=$(fusemodule "$root")
    modules=$(awk '/Depends: linux-modules-[0-9]/ {print $2; exit}' <<<"$deps")
    # fuse neither in the kernel's BTF nor a module of the image: the
    # modules package has it.
    if [[ -z $ko && -n $modules ]] && ! grep -qa fuse_dev_do_read "$kernel"; then
      mroot=$(unpack "$suite" "$modules")
      ko=$(fusemodule "$mroot")
      [[ -n $ko ]] || die "$img has fuse neither built in nor in $modules"
    fi
  fi
  row=$(sed -E 's/^(linux-image-)?([0-9]+\.[0-9]+).*/\2/' <<<"$img")
  [[ $row =~ ^[0-9]+\.[0-9]+$ ]] || die "cannot tell the kernel release of $img"
  mkdir -p "$run/$name"
  {
    echo "FUSESCOPE_GUEST=1"
    echo "FUSESCOPE_GUEST_KERNEL=$row"
    echo "FUSESCOPE_BIN=/fusescope"
    echo "FUSESCOPE_VERSION=$version"
    [[ -n $ko ]] && echo "FUSESCOPE_FUSE_MODULE=/fuse.ko"
    if [[ -n $quick ]]; then
      echo "GUEST_RUN='^(TestVersion|TestTraceCounts)\$'"
      echo "GUEST_TIMEOUT=4m"
    else
      echo "GUEST_TIMEOUT=9m"
    fi
  } >"$run/$name/env"
  [[ -n $ko ]] && cp "$ko" "$run/$name/fuse.ko"
  cpio_of "$run/$name" "$run/$name/own.cpio"
  cat "$run/base.cpio" "$run/$name/own.cpio" >"$run/$name/initramfs.cpio"
  echo "$kernel" >"$run/$name/kernel"
  echo "$suite: $img" >"$run/$name/what"
  names+=("$name")
done
fetched=$SECONDS

boot() { # NAME: the guest's console in logs/NAME.log, its wall time in NAME/seconds
  local name=$1 t0=$SECONDS limit=300
  [[ -z $quick ]] && limit=600
  timeout "$limit" qemu-system-x86_64 -accel tcg -m 1024 -smp 1 -nographic -no-reboot \
    -kernel "$(cat "$run/$name/kernel")" -initrd "$run/$name/initramfs.cpio" \
    -append "console=ttyS0 quiet panic=-1" </dev/null >"$run/$name/console" 2>&1 &
  echo $! >"$run/$name/pid"
  wait $! || true
  rm "$run/$name/pid"
  tr -d '\r' <"$run/$name/console" >"$work/logs/$name.log"
  echo $((SECONDS - t0)) >"$run/$name/seconds"
}
running=0
for name in "${names[@]}"; do
  if ((running >= jobs)); then wait -n; running=$((running - 1)); fi
  boot "$name" &
  running=$((running + 1))
done
wait

fail=0
for name in "${names[@]}"; do
  log=$work/logs/$name.log
  up=$(sed -n 's/^guest: kernel .* up \([0-9.]*\) s$/\1/p' "$log")
  kernel=$(sed -n 's/^guest: kernel \(.*\) up .*/\1/p' "$log")
  exit=$(sed -n 's/^guest: exit \([0-9]*\) at .*/\1/p' "$log")
  end=$(sed -n 's/^guest: exit [0-9]* at \([0-9.]*\) s$/\1/p' "$log")
  passed=$(grep -c '^--- PASS' "$log" || true)
  skipped=$(grep -c '^--- SKIP' "$log" || true)
  echo "== $name ($(cat "$run/$name/what")): kernel ${kernel:-?}, user space at ${up:-?} s, tests done at ${end:-?} s, $(cat "$run/$name/seconds") s in all"
  grep -E '^\s*--- (PASS|FAIL|SKIP)' "$log" | sed -E 's/^(\s*)--- PASS: /\1ok    /; s/^(\s*)--- FAIL: /\1FAIL  /; s/^(\s*)--- SKIP: /\1skip  /' || true
  if [[ $exit != 0 ]]; then
    fail=1
    echo "FAIL  $name: the guest's tests $( [[ -n $exit ]] && echo "exited $exit" || echo "did not finish")$( [[ -z $kernel ]] && echo ", or it never booted"); its console ($log):"
    sed 's/^/    /' "$log" | tail -150
  elif [[ -n $show ]]; then
    sed 's/^/    /' "$log"
  else
    echo "ok    $name: $passed passed, $skipped skipped"
  fi
done
echo "test-kernels: ${#names[@]} kernels$( [[ -n $quick ]] && echo " (quick)"), $((fetched - started)) s to build and fetch, $((SECONDS - fetched)) s to boot and test ($jobs at once), $((SECONDS - started)) s in all: $( ((fail)) && echo FAILED || echo passed)"
exit $fail
