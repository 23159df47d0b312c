#!/usr/bin/env python3
"""live-ab.py: the live system-call source's slowdown of one program, for
several fusescope builds at once, interleaved in random order. The
development VM's noise drifts by tens of percent from minute to minute, so
only variants measured in the same run compare.

    N=30 test/bench/scripts/live-ab.py "new=bin/fusescope old=/tmp/fusescope-old" find /usr -name x

Each variant NAME=BINARY runs `BINARY syscalls --json -o F -- CMD...` and
reports the command's own time (live.command_s: exec to exit); "plain" runs
CMD untraced (fork, exec, wait) and "empty" runs it under the first binary
with programs that return at once (the floor). Prints, per variant, the
median time, the median ratio to plain and the interquartile range of the
ratios. Needs root.
"""
import json
import os
import random
import statistics
import struct
import subprocess
import sys
import tempfile
import time


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    n = int(os.environ.get("N", "25"))
    builds = dict(kv.split("=", 1) for kv in sys.argv[1].split())
    cmd = sys.argv[2:]
    first = next(iter(builds.values()))
    # The vCPUs kept out of deep idle states, as make bench does.
    qos = open("/dev/cpu_dma_latency", "wb", buffering=0)
    qos.write(struct.pack("i", 0))
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "r.json")

        def traced(binary, env=None):
            # fusescope exits with the command's status (grep finding
            # nothing: 1): the report says whether the trace worked.
            if os.path.exists(report):
                os.remove(report)
            subprocess.run([binary, "syscalls", "--json", "-o", report, "--"] + cmd,
                           env=dict(os.environ, **(env or {})), **quiet)
            with open(report) as f:
                return json.load(f)["live"]["command_s"]

        def plain():
            start = time.monotonic()
            subprocess.run(cmd, **quiet)
            return time.monotonic() - start

        runs = {"plain": plain, "empty": lambda: traced(first, {"FUSESCOPE_BENCH_EMPTY_PROGRAMS": "1"})}
        for name, binary in builds.items():
            runs[name] = lambda b=binary: traced(b)
        for _ in range(n):
            order = list(runs)
            random.shuffle(order)
            for name in order:
                times.setdefault(name, []).append(runs[name]())
    base = statistics.median(times["plain"])
    for name in sorted(times):
        v = sorted(times[name])
        q = len(v) // 4
        print("%-10s median %.4f s  ratio %.3f  IQR %.3f-%.3f" % (
            name, statistics.median(v), statistics.median(v) / base, v[q] / base, v[-q - 1] / base))


if __name__ == "__main__":
    main()
