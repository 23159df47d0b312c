#!/usr/bin/env bash
# What trace's programs cost per FUSE request over FUSE over io_uring's ring
# against /dev/fuse, plain and with --stages: libfuse 3.18's passthrough_hp
# (scripts/libfuse-examples.sh) over a directory of 200 files, with and
# without -o io_uring, the same workload each time (5 x a stat of every
# file and 3 cats), rounds interleaved; the kernel's own accounting of each
# program (kernel.bpf_stats_enabled=1, the record's "programs") divided by
# the requests traced. Restores enable_uring and bpf_stats_enabled.
# Usage: scripts/ring-cost.sh [ROUNDS]  (after make build; root)
set -euo pipefail
rounds=${1:-3}
hp=$PWD/.cache/libfuse/build/example/passthrough_hp
fs=$PWD/bin/fusescope
[[ -x $hp && -x $fs ]] || { echo "ring-cost: run make build and scripts/libfuse-examples.sh first" >&2; exit 1; }
param=/sys/module/fuse/parameters/enable_uring
[[ -w $param ]] || { echo "ring-cost: this kernel has no FUSE over io_uring ($param)" >&2; exit 1; }
dir=$(mktemp -d /tmp/fusescope-ring-cost.XXXXXX)
src=$dir/src mnt=$dir/mnt
mkdir -p "$src" "$mnt"
for i in $(seq 1 200); do echo data >"$src/f$i"; done
was_uring=$(cat $param) was_stats=$(sysctl -n kernel.bpf_stats_enabled)
cleanup() {
  mountpoint -q "$mnt" && fusermount3 -u "$mnt"
  echo "$was_uring" >$param
  sysctl -q kernel.bpf_stats_enabled="$was_stats"
  rm -rf "$dir"
}
trap cleanup EXIT
sysctl -q kernel.bpf_stats_enabled=1
echo Y >$param
for round in $(seq 1 "$rounds"); do
  for transport in ring dev_fuse; do
    for mode in plain stages; do
      args=(--nocache --nopassthrough)
      [[ $transport == ring ]] && args+=(-o io_uring)
      "$hp" "${args[@]}" "$src" "$mnt" &
      for _ in $(seq 50); do mountpoint -q "$mnt" && break; sleep 0.1; done
      sleep 0.5 # the ring's queues register after the mount
      flags=()
      [[ $mode == stages ]] && flags=(--stages)
      "$fs" trace --mount "$mnt" "${flags[@]}" --no-hist -o "$dir/r.json" >/dev/null 2>&1 &
      tp=$!
      sleep 1.5 # attached
      for _ in 1 2 3 4 5; do
        for i in $(seq 1 200); do stat "$mnt/f$i" >/dev/null; done
        cat "$mnt/f1" "$mnt/f2" "$mnt/f3" >/dev/null
      done
      kill -INT $tp && wait $tp || true
      fusermount3 -u "$mnt"
      wait
      python3 - "$round" "$transport" "$mode" "$dir/r.json" <<'P'
import json, sys
r = json.load(open(sys.argv[4]))
ops = r["profile"]["ops"]
n = sum(o["count"] for o in ops)
ring = sum(o.get("uring", 0) for o in ops)
split = sum(s["latency"]["count"] for o in ops for s in o.get("stages", []) if s["stage"] == "queue")
progs = [p for p in r.get("programs", []) if p.get("runtime_ns")]
total = sum(p["runtime_ns"] for p in progs)
print(f"round {sys.argv[1]} {sys.argv[2]:8} {sys.argv[3]:6} requests {n}, over the ring {ring}, split {split}: "
      f"{total / max(n, 1):.0f} ns a request (" + ", ".join(f"{p['program']} {p['runtime_ns'] / max(n, 1):.0f}" for p in progs) + ")")
P
    done
  done
done
