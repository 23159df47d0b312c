#!/bin/bash
# live-ab.sh: the live system-call source's slowdown of one program, for
# several fusescope builds at once, interleaved in random order (the
# development VM's noise drifts by tens of percent from minute to minute,
# so only variants measured in the same run compare).
#
#   N=30 test/bench/scripts/live-ab.sh "new=bin/fusescope old=/tmp/fusescope-old" find /usr -name x
#
# Each variant NAME=BINARY runs `BINARY syscalls --json -o F -- CMD...` and
# reports the command's own time (live.command_s: exec to exit); "plain"
# runs CMD untraced and "empty" under the first binary with programs that
# return at once (the floor). Prints, per variant, the median time, the
# median ratio to plain and the interquartile range of the ratios. Root.
set -eu
N=${N:-25}
variants=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
exec 3>/dev/cpu_dma_latency && printf '\x00\x00\x00\x00' >&3 # vCPUs out of deep idle, as make bench does
declare -A bin
names="plain empty"
first=""
for kv in $variants; do
	bin[${kv%%=*}]=${kv#*=}
	names="$names ${kv%%=*}"
	first=${first:-${kv#*=}}
done
for _ in $(seq "$N"); do
	for v in $(shuf -e $names); do
		case $v in
		plain)
			s=$(date +%s.%N)
			"$@" >/dev/null 2>&1 || true
			echo "plain $(echo "$(date +%s.%N) - $s" | bc)"
			;;
		empty)
			FUSESCOPE_BENCH_EMPTY_PROGRAMS=1 "$first" syscalls --json -o "$tmp/r.json" -- "$@" >/dev/null 2>&1
			echo "empty $(jq .live.command_s "$tmp/r.json")"
			;;
		*)
			"${bin[$v]}" syscalls --json -o "$tmp/r.json" -- "$@" >/dev/null 2>&1
			echo "$v $(jq .live.command_s "$tmp/r.json")"
			;;
		esac
	done
done | python3 -c '
import statistics, sys
rows = {}
for line in sys.stdin:
    k, v = line.split()
    rows.setdefault(k, []).append(float(v))
base = statistics.median(rows["plain"])
for k in sorted(rows):
    v = sorted(rows[k])
    q = len(v) // 4
    print("%-10s median %.4f s  ratio %.3f  IQR %.3f-%.3f" % (k, statistics.median(v), statistics.median(v) / base, v[q] / base, v[-q - 1] / base))
'
