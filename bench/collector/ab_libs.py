#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""ab_libs.py: two (or more) builds of libculpert.so side by side.

Runs one workload of culpert_bench_workload without a preload and under
each library given, in a new random order every round, pinned to one CPU
with glibc's malloc thresholds pinned as culpert_bench pins them, and
prints for each library the median and quartiles of its CPU time (user +
sys) over the no-preload run of the same round, then the ratio of the
second library to the first. For changes too small for the whole bench:
a variant of the hot path against the current one.

  ab_libs.py --workload build/bench/collector/culpert_bench_workload \\
      --rounds 101 --rate 1T mixed 1 2500000 -- \\
      now=build/src/libculpert.so variant=/tmp/v1/build/src/libculpert.so
"""
import argparse
import os
import random
import resource
import statistics
import shutil
import subprocess
import sys
import tempfile

PINNED_MALLOC = "glibc.malloc.mmap_threshold=4194304:glibc.malloc.trim_threshold=268435456"


def cpu_seconds(cmd, env):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def quartiles(values):
    v = sorted(values)
    return v[len(v) // 4], statistics.median(v), v[(3 * len(v)) // 4]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", required=True, help="culpert_bench_workload binary")
    ap.add_argument("--rounds", type=int, default=41)
    ap.add_argument("--rate", default="512K", help="CULPERT_SAMPLE_RATE (1T: nothing sampled)")
    ap.add_argument("--cpu", default="1", help="CPU to pin to (taskset -c)")
    ap.add_argument("args", nargs="+", help="WORKLOAD THREADS OPS -- NAME=LIB ...")
    a = ap.parse_args()
    if "--" in a.args:
        cut = a.args.index("--")
        wl, libs = a.args[:cut], a.args[cut + 1:]
    else:
        wl, libs = a.args[:3], a.args[3:]
    pairs = [x.split("=", 1) for x in libs]
    if len(wl) != 3 or not pairs or any(len(p) != 2 or not os.path.exists(p[1]) for p in pairs):
        ap.error("give WORKLOAD THREADS OPS -- NAME=LIB ... (each LIB an existing file)")

    # A scratch file, never /dev/null: libraries before 424542c renamed
    # their profile over whatever CULPERT_OUTPUT named, devices included.
    scratch = tempfile.mkdtemp(prefix="ab_libs.")
    env = dict(os.environ, GLIBC_TUNABLES=PINNED_MALLOC, CULPERT_QUIET="1",
               CULPERT_SAMPLE_RATE=a.rate, CULPERT_OUTPUT=os.path.join(scratch, "p.pb.gz"))
    cmd = ["taskset", "-c", a.cpu, a.workload] + wl
    configs = [("none", None)] + [(n, l) for n, l in pairs]
    times = {n: [] for n, _ in configs}
    for _ in range(a.rounds):
        order = configs[:]
        random.shuffle(order)
        for name, lib in order:
            e = dict(env)
            if lib:
                e["LD_PRELOAD"] = lib
            times[name].append(cpu_seconds(cmd, e))

    print(f"{a.rounds} rounds of {' '.join(wl)} at CULPERT_SAMPLE_RATE={a.rate}, CPU {a.cpu}; "
          f"no preload: median {statistics.median(times['none']):.4f} s")
    for name, _ in configs[1:]:
        q1, med, q3 = quartiles([x / y for x, y in zip(times[name], times["none"])])
        print(f"  {name:<12} {100 * (med - 1):+6.2f}%  (quartiles {100 * (q1 - 1):+.2f}% "
              f"to {100 * (q3 - 1):+.2f}%)")
    shutil.rmtree(scratch, ignore_errors=True)
    if len(configs) >= 3:
        first, second = configs[1][0], configs[2][0]
        q1, med, q3 = quartiles([x / y for x, y in zip(times[second], times[first])])
        print(f"  {second} / {first}: median {med:.4f} (quartiles {q1:.4f} to {q3:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
