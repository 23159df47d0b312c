#!/usr/bin/env bash
# Builds libfuse's example daemons passthrough_hp and passthrough_ll from
# Debian sid's fuse3 source package (3.18: clone_fd, splice, FUSE passthrough
# and FUSE over io_uring) into .cache/libfuse, for the end-to-end tests of
# trace --stages, with libfuse's USDT probes (request_receive,
# request_process, request_reply: -Denable-usdt, its own usdt.h) for ufunc's. Debian's sid is added only to a scratch apt configuration,
# to fetch the source; nothing is installed from it.
# Usage: libfuse-examples.sh [DIR]  (default .cache/libfuse)
set -euo pipefail
dir=${1:-.cache/libfuse}
out=$dir/build/example
if [[ -x $out/passthrough_hp && -x $out/passthrough_ll && -e $dir/build/.usdt ]]; then exit 0; fi
if [[ -x $out/passthrough_hp && -d $dir/src ]]; then
  # Built before the USDT probes were asked for: configure them in.
  echo "libfuse: rebuilding with its USDT probes" >&2
  meson configure "$dir/build" -Denable-usdt=true >/dev/null
  ninja -C "$dir/build" example/passthrough_hp example/passthrough_ll >/dev/null
  touch "$dir/build/.usdt"
  exit 0
fi
scripts/deps.sh meson:meson ninja:ninja-build g++:g++ pkg-config:pkg-config \
  /usr/include/liburing.h:liburing-dev /usr/include/numa.h:libnuma-dev /usr/include/libudev.h:libudev-dev
mkdir -p "$dir/apt/lists/partial"
echo "deb-src http://deb.debian.org/debian sid main" >"$dir/apt/sources.list"
apt=(-o "Dir::Etc::SourceList=$PWD/$dir/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$PWD/$dir/apt/lists" -o Debug::NoDropPrivs=true -o APT::Sandbox::User=root)
echo "libfuse: fetching fuse3's source from Debian sid" >&2
apt-get "${apt[@]}" update -qq
(cd "$dir" && apt-get "${apt[@]}" source --download-only -qq fuse3)
tarball=$(ls "$dir"/fuse3_*.orig.tar.gz | head -1)
rm -rf "$dir/src" && mkdir -p "$dir/src"
tar -xzf "$tarball" -C "$dir/src" --strip-components=1
echo "libfuse: building passthrough_hp and passthrough_ll" >&2
meson setup "$dir/build" "$dir/src" -Dutils=false -Dtests=false -Dexamples=true -Duseroot=false -Dinitscriptdir= -Denable-usdt=true >/dev/null
ninja -C "$dir/build" example/passthrough_hp example/passthrough_ll >/dev/null
touch "$dir/build/.usdt"
echo "libfuse: built $out/passthrough_hp and $out/passthrough_ll" >&2
