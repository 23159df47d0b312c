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

OTHERS="bpftrace-count bpftrace-latency perf-trace" adds the field's tools to
the same interleaved run, each attached system-wide before CMD starts (as
their users run them) and detached after it; CMD is timed as "plain" is:

    bpftrace-count    syscount.bt's per-call work: a per-CPU count per call
    bpftrace-latency  what bcc's syscount -L keeps: the thread's entry time
                      in a hash, a count and a sum of latencies per call
    perf-trace        perf trace -s (per-call events through perf buffers)
"""
import json
import os
import random
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time


BPFTRACE = {
    "bpftrace-count": "tracepoint:raw_syscalls:sys_enter { @calls[args->id] = count(); }",
    "bpftrace-latency": (
        "tracepoint:raw_syscalls:sys_enter { @start[tid] = nsecs; } "
        "tracepoint:raw_syscalls:sys_exit /@start[tid]/ { "
        "@ns[args->id] = sum(nsecs - @start[tid]); @calls[args->id] = count(); "
        "delete(@start[tid]); }"),
}


def attached(argv, ready, timed):
    """Starts a system-wide tracer, waits until it says it is attached, runs
    timed() and stops the tracer with SIGINT, as its users would."""
    tracer = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        if ready:
            for line in tracer.stdout:
                if ready in line:
                    break
            else:
                sys.exit("%s exited before attaching" % argv[0])
        else:
            time.sleep(2)  # perf trace prints nothing when it is ready
        return timed()
    finally:
        tracer.send_signal(signal.SIGINT)
        tracer.communicate(timeout=60)


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
        for name in os.environ.get("OTHERS", "").split():
            if name in BPFTRACE:
                runs[name] = lambda p=BPFTRACE[name]: attached(
                    ["bpftrace", "-e", p], "Attaching", plain)
            elif name == "perf-trace":
                runs[name] = lambda: attached(
                    ["perf", "trace", "-s", "-a", "-o", os.path.join(tmp, "perf.txt")],
                    None, plain)
            else:
                sys.exit("OTHERS: unknown tool %r (bpftrace-count, bpftrace-latency, perf-trace)" % name)
            tool = name.split("-")[0]
            if not shutil.which(tool):
                sys.exit("OTHERS: %s is not installed (apt-get install %s)" % (tool, "linux-perf" if tool == "perf" else tool))
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
