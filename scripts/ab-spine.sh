#!/usr/bin/env bash
# A/B of two fusescope binaries on the two paths a change to the run loop
# could slow: fusescope trace (per FUSE request) and the live system-call
# source (per call). Each pair runs the workload untraced, under binary A
# and under binary B, in random order; the workload times itself (its own
# run, not fusescope's start-up), and the script prints, per binary, the
# median of traced/untraced over the pairs, and A/B.
#   scripts/ab-spine.sh BIN_A BIN_B [PAIRS]     (as root; bindfs installed)
set -euo pipefail
a=$1 b=$2 pairs=${3:-15}
work=$(mktemp -d)
trap 'fusermount3 -u "$work/mnt" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/src" "$work/mnt"
for i in $(seq 1 2000); do : > "$work/src/f$i"; done
bindfs -o entry_timeout=0,attr_timeout=0,negative_timeout=0 "$work/src" "$work/mnt"
now() { date +%s%N; }
# The workloads write their own run time (ns) to $work/t.
fuse_load="s=\$(date +%s%N); for r in 1 2 3; do stat --format=%s $work/mnt/f* >/dev/null; done; echo \$((\$(date +%s%N)-s)) > $work/t"
sys_load="s=\$(date +%s%N); find /usr -name nothing-matches-this; echo \$((\$(date +%s%N)-s)) > $work/t"
run() { # run MODE LOAD: prints the workload's ns
  case $1 in
    plain) bash -c "$2" ;;
    traceA) "$a" trace --mount "$work/mnt" -o /dev/null -- bash -c "$2" >/dev/null 2>&1 ;;
    traceB) "$b" trace --mount "$work/mnt" -o /dev/null -- bash -c "$2" >/dev/null 2>&1 ;;
    sysA) "$a" syscalls -o /dev/null -- bash -c "$2" >/dev/null 2>&1 ;;
    sysB) "$b" syscalls -o /dev/null -- bash -c "$2" >/dev/null 2>&1 ;;
  esac
  cat "$work/t"
}
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
ab() { # ab LOAD MODE_A MODE_B LABEL
  local ra=() rb=()
  run plain "$1" >/dev/null # warm the caches
  for i in $(seq 1 "$pairs"); do
    local p="" x="" y=""
    for m in $(printf 'plain\n%s\n%s\n' "$2" "$3" | shuf); do
      case $m in plain) p=$(run plain "$1") ;; "$2") x=$(run "$2" "$1") ;; "$3") y=$(run "$3" "$1") ;; esac
    done
    ra+=("$(awk -v x="$x" -v p="$p" 'BEGIN {print x/p}')")
    rb+=("$(awk -v y="$y" -v p="$p" 'BEGIN {print y/p}')")
  done
  local ma mb
  ma=$(printf '%s\n' "${ra[@]}" | median)
  mb=$(printf '%s\n' "${rb[@]}" | median)
  printf '| %s | %d | %.3f | %.3f | %.3f |\n' "$4" "$pairs" "$ma" "$mb" "$(awk -v a="$ma" -v b="$mb" 'BEGIN {print a/b}')"
}
echo "| workload | pairs | A traced/untraced (median) | B traced/untraced (median) | A/B |"
echo "|---|---|---|---|---|"
ab "$fuse_load" traceA traceB "fusescope trace --mount: 3 x 2,000 stat on bindfs (timeouts 0)"
ab "$sys_load" sysA sysB "fusescope syscalls -- find /usr"
