#!/usr/bin/env bash
# make demo: mount fusescope's lab file system over a generated tree with an
# emulated remote backend, run a metadata-and-read workload under
# `fusescope trace`, print what the kernel and the daemon each measured, trace
# a grep over the mount with the live system-call source, ask fusescope
# doctor about a write workload, and clean everything up.
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
  # A finished demo removed its pid file and kept its record for show: the
  # next demo replaces it, so that one at most is left in $tmp.
  if [[ ! -e $old/demo.pid ]]; then
    if ! grep -qF " $old/" /proc/self/mountinfo; then
      rm -rf "$old" && echo "== Removed the previous demo's record: $old"
    fi
    continue
  fi
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
cat <<'EXPLAIN'

   Each row is one kind of FUSE request the kernel sent the daemon: COUNT ended, ERRORS
   answered with an error (by errno below: the LOOKUPs of does-not-exist), REQ_BYTES and
   REPLY_BYTES with their headers, the latency from the kernel queueing the request to
   the reply's end (AVG, P50, P99, MAX), and %TIME, the row's share of all time in FUSE.
   READ leads: 1,000 files came through READs of up to 128 KiB (the kernel's read-ahead).
   Each open file costs an OPEN, a FLUSH at close and a RELEASE after it; directories an
   OPENDIR, READDIRPLUS (the names with their attributes), READDIR and RELEASEDIR. LOOKUP
   and GETATTR are few: the attributes READDIRPLUS brought stay cached for 1 s. The last
   line is the connection (fusectl): requests waiting now, the background limits.
EXPLAIN
echo
echo "== The daemon's view (fusescope fs stats): each request from receipt to reply, injected latency included"
echo
"$bin" fs stats --no-hist "$mnt"
cat <<'EXPLAIN'

   The lab daemon times each request itself, from go-fuse handing it over to the reply,
   with the emulated backend's latency (--latency) inside. Its header says how it was
   mounted and what the kernel and the daemon agreed on at INIT (flags, sizes, limits).
   The kernel's time minus the daemon's is what a request spends queued in the kernel and
   crossing between kernel and daemon: tens of microseconds here.
EXPLAIN
# Where the two views count differently, say why: the daemon counts from the
# mount, the trace only while the workload ran.
"$bin" show --csv "$rec" | awk -F, 'NR > 1 { print $5, $6 }' | sort >"$work/kernel.counts"
"$bin" fs stats --csv "$mnt" | awk -F, 'NR > 1 { print $5, $6 }' | sort >"$work/daemon.counts"
join -a 2 -e 0 -o 0,1.2,2.2 "$work/kernel.counts" "$work/daemon.counts" | while read -r op k d; do
  if [[ $k != "$d" ]]; then
    echo "   $op: the kernel counted $k, the daemon $d. The daemon counts since the mount, the trace"
    echo "   only while the workload ran: the difference came before it (the mount's own first requests)."
  fi
done
echo
echo "   One histogram of the kernel's view, READ, in the layout of bcc's and libbpf-tools':"
"$bin" show "$rec" | sed -n '/op = READ$/,/^$/p'
echo "== The application's side (fusescope syscalls, live, no ptrace): grep over the mount"
echo
"$bin" syscalls --top 5 -o "$work/syscalls.txt" -- sh -c "grep -rc nosuchpattern '$mnt' >/dev/null" || true
cat "$work/syscalls.txt"
cat <<'EXPLAIN'

   The same kind of report strace -f with an analyser gives, from eBPF without stopping
   the program: time per category of system call, the calls that took it, the failed ones
   (searching PATH and the locale's files fails with ENOENT), files by time, the longest
   waits (wait4: the shell waiting for grep), the critical path of the first process and
   a timeline of every process. "exit status 1" is grep's: it found no line matching,
   which is what the demo asked of it.
EXPLAIN
echo
echo "== What is wrong with the configuration (fusescope doctor): 1,000 writes of 4 KiB into the mount"
echo
"$bin" doctor --mount "$mnt" -o "$work/doctor.json" -- dd if=/dev/zero of="$mnt/new.dat" bs=4k count=1000 status=none 2>"$work/doctor.err" ||
  { cat "$work/doctor.err" >&2; exit 1; }
cat <<'EXPLAIN'

   doctor traced the mount while dd ran (the requests' stages, the page cache, dd's
   calls, fusectl sampled beside them), then ran its rules over the record: each finding
   with the figures that show it, its cause, the fix as libfuse, go-fuse and the lab
   file system spell it, and the gain the fix was measured to bring (docs/doctor.md).
   The lab file system's default is write-through, so each 4 KiB write() is a WRITE of
   its own; --writeback-cache would gather them.
EXPLAIN
echo
echo "== The run was saved as a record; render it again with:"
echo "   $bin show $rec"
echo
echo "== Comparing configurations (fusescope bench --preset quick): the native directory against the lab"
echo "   file system with the kernel's caches on and off, 4 rounds in a shuffled order, caches dropped before each run"
echo
"$bin" bench --preset quick
cat <<EXPLAIN

   One table per workload's figure (cat: read, the mean MiB/s of its reads, and best, the
   fastest read; tree: create, stat with cold and warm caches, readdir, ls -l, delete, in
   operations per second): the mean with its 95% interval, median, min, max and the
   coefficient of variation (CV) of the rounds; against native the ratio paired by round
   with its interval and the change it means, "~" where the rank test cannot tell the two
   apart (p is its p-value); FUSE reqs/run, the requests one run made, and the three that
   took the most time. Noisy results name the run that strayed and whether FUSE or
   something else took its time.

== What to try next
   $bin trace --stages --mount MNT 1     queue, daemon and reply time of each request, every second
   $bin top                               a live view of every FUSE mount
   $bin fs mount --preset nocache SRC MNT the lab file system with the kernel's caches off
   $bin diff A.json B.json                two runs, B against A
   $bin doctor --mount MNT -- CMD         what is wrong with a mount's configuration, and the fix
   $bin report -o run.html $rec
                                          the record as one HTML page
   The record stays in $work until the next make demo.
EXPLAIN
