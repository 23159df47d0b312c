#!/usr/bin/env bash
# make demo: mount fusescope's lab file system over a generated tree with an
# emulated remote backend, run a metadata-and-read workload under
# `fusescope trace`, print what the kernel and the daemon each measured, trace
# a grep over the mount with the live system-call source, and clean
# everything up.
set -euo pipefail
bin=$(realpath "${1:-bin/fusescope}")
if [[ $(id -u) -ne 0 ]]; then
  echo "demo: tracing needs root (BPF) and mounting FUSE: run sudo make demo" >&2
  exit 1
fi
# A demo killed with SIGKILL (or a closed terminal) left its lab file
# system mounted and its directory behind: clean those whose demo is gone.
tmp=${TMPDIR:-/tmp}
for old in "$tmp"/fusescope-demo.*/; do
  old=${old%/}
  [[ -d $old ]] || continue
  # A finished demo removed its pid file and keeps its record; a running one is alive.
  pid=$(cat "$old/demo.pid" 2>/dev/null) || continue
  # A zombie (a killed demo its parent has not reaped yet) is gone too.
  state=$(sed -n 's/.*) \(.\).*/\1/p' "/proc/$pid/stat" 2>/dev/null || true)
  if [[ -n $pid && -n $state && $state != Z ]]; then continue; fi
  echo "== Cleaning up after an earlier demo that did not finish: $old"
  # Its tracer outlived it: stop it first, or it writes into the directory as it goes.
  pkill -TERM -f -- "trace --mount $old/mnt" 2>/dev/null || true
  for _ in $(seq 1 30); do pgrep -f -- "trace --mount $old/mnt" >/dev/null || break; sleep 0.1; done
  if grep -qF " $old/mnt " /proc/self/mountinfo; then
    "$bin" fs umount "$old/mnt" 2>/dev/null || umount -l "$old/mnt" 2>/dev/null || true
  fi
  grep -qF " $old/mnt " /proc/self/mountinfo || rm -rf "$old" || true
done
work=$(mktemp -d "$tmp/fusescope-demo.XXXXXX")
echo $$ >"$work/demo.pid"
src=$work/src mnt=$work/mnt out=$work/trace.txt rec=$work/record.json
mkdir -p "$src" "$mnt"
cleanup() {
  if mountpoint -q "$mnt"; then "$bin" fs umount "$mnt" 2>/dev/null || umount -l "$mnt"; fi
  rm -rf "$src" "$mnt" "$work/demo.pid"
}
trap cleanup EXIT INT TERM

echo "== Generating a data set: 40 directories x 25 files (4 KiB to 256 KiB) in $src"
for d in $(seq -w 1 40); do
  mkdir -p "$src/dir$d"
  for f in $(seq -w 1 25); do
    head -c $(( (RANDOM % 64 + 1) * 4096 )) /dev/urandom > "$src/dir$d/file$f.dat"
  done
done

latency='lookup=300us,getattr=200us,read=500us+-200us,*=50us'
echo "== Mounting the lab file system at $mnt: preset default, emulated backend --latency '$latency'"
"$bin" fs mount "$src" "$mnt" --background --latency "$latency"

echo "== Workload under: fusescope trace --mount $mnt -o $rec -- workload"
echo "   (find, stat every file twice, read every file, grep the tree)"
# The trace ends when the workload does. The report goes to $out; the
# workload writes its own lines to fd 3, the terminal.
workload='
  mnt=$1
  find "$mnt" -type f | wc -l | sed "s/^/   files found: /" >&3
  find "$mnt" -type f -exec stat -c %s {} + >/dev/null
  # The 1 s entry and attribute caches expire, but find lists each directory
  # again first (READDIRPLUS), which refreshes them: few LOOKUPs and GETATTRs.
  sleep 1.1
  find "$mnt" -type f -exec stat -c %s {} + >/dev/null
  cat "$mnt"/dir*/file*.dat | wc -c | sed "s/^/   bytes read: /" >&3
  grep -rc nosuchpattern "$mnt" >/dev/null || true
  ls "$mnt/does-not-exist" 2>/dev/null || true
'
"$bin" trace --mount "$mnt" -o "$rec" --no-hist -- bash -c "$workload" workload "$mnt" 3>&1 >"$out" 2>"$work/trace.err" ||
  { cat "$work/trace.err" >&2; exit 1; }
echo
echo "== The kernel's view (fusescope trace): each request from queueing to reply"
echo
cat "$out"
echo
echo "== The daemon's view (fusescope fs stats): each request from receipt to reply, injected latency included"
echo
"$bin" fs stats --no-hist "$mnt"
echo
echo "The kernel's time minus the daemon's is what a request spends queued and crossing"
echo "between kernel and daemon. One histogram, e.g. READ as the kernel saw it:"
"$bin" show "$rec" | sed -n '/op = READ$/,/^$/p'
echo "== The application's side (fusescope syscalls, live, no ptrace): grep over the mount"
echo
"$bin" syscalls --top 5 -o "$work/syscalls.txt" -- sh -c "grep -rc nosuchpattern '$mnt' >/dev/null" || true
cat "$work/syscalls.txt"
echo
echo "== The run was saved as a record; render it again with:"
echo "   $bin show $rec"
echo
echo "== Comparing configurations (fusescope bench --preset quick): the native directory against the lab"
echo "   file system with the kernel's caches on and off, 4 rounds in a shuffled order, caches dropped before each run"
echo
"$bin" bench --preset quick
