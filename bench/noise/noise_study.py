#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
"""The sampling-noise study of `culpert diff` (results: docs/noise-study.md).

Runs noise_workload, which makes exactly the same allocations every time,
under the real libculpert.so with different CULPERT_SEED values, then:

  A. noise: how far each span's estimate strays from the truth, against
     the predicted standard error sqrt(R * bytes);
  B. false alarms: `culpert diff` over every pair of identical-workload
     profiles, with the default thresholds and with --noise-sigma K; any
     regression found there is false;
  C. detection: profiles of a workload whose span GROW_SPAN allocates G%
     more, each against a baseline profile of another seed; how often the
     growth is caught.

Prints markdown tables. Every figure is a count over runs of a deterministic
program; nothing is timed.

  python3 bench/noise/noise_study.py --build build [--runs 40] [--rates 524288,65536]
"""
import argparse
import itertools
import json
import math
import os
import subprocess
import sys
import tempfile

OPTION_SETS = [
    ("default thresholds", []),
    ("--noise-sigma 2", ["--noise-sigma", "2"]),
    ("--noise-sigma 3", ["--noise-sigma", "3"]),
]


def fmt_bytes(b):
    for scale, unit in ((1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")):
        if b >= scale:
            return "%.2f %s" % (b / scale, unit)
    return "%d B" % b


class Study:
    def __init__(self, opts):
        self.o = opts
        self.build = os.path.abspath(opts.build)
        self.culpert = opts.culpert or os.path.join(self.build, "cli", "culpert")
        self.workload = opts.workload or os.path.join(self.build, "bench", "noise", "noise_workload")
        self.lib = opts.lib or os.path.join(self.build, "src", "libculpert.so")
        for path in (self.culpert, self.workload, self.lib):
            if not os.path.exists(path):
                sys.exit("noise_study: %s is missing; build the culpert, noise_workload and libculpert "
                         "targets first" % path)
        self.work = opts.work or tempfile.mkdtemp(prefix="culpert-noise-")
        os.makedirs(self.work, exist_ok=True)

    def profile(self, rate, seed, grow=None):
        """Run the workload once; returns (profile path, exact span totals)."""
        tag = "r%d_s%d%s" % (rate, seed, "_g%s_%s" % grow if grow else "")
        path = os.path.join(self.work, tag + ".pb.gz")
        args = [self.workload, "--requests", str(self.o.requests)]
        if grow:
            args += ["--grow", grow[0], str(grow[1])]
        env = dict(os.environ, LD_PRELOAD=self.lib, CULPERT_SEED=str(seed), CULPERT_SAMPLE_RATE=str(rate),
                   CULPERT_OUTPUT=path, CULPERT_QUIET="1")
        p = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
        if not os.path.exists(path):
            sys.exit("noise_study: libculpert wrote no profile to %s (%s)" % (path, p.stderr.strip()))
        exact = {}
        for line in p.stdout.splitlines():
            name, value = line.split("\t")
            exact[name] = int(value)
        return path, exact

    def diff(self, before, after, flags):
        p = subprocess.run([self.culpert, "diff", "--format", "json"] + flags + [before, after],
                           capture_output=True, text=True)
        if p.returncode not in (0, 1):
            sys.exit("noise_study: culpert diff failed: %s" % p.stderr.strip())
        return p.returncode, json.loads(p.stdout)

    def run_rate(self, rate):
        o = self.o
        print("\n## Sample rate %s (%d runs, workload --requests %d)\n" % (fmt_bytes(rate), o.runs, o.requests))
        base = []
        exact = None
        for seed in range(1, o.runs + 1):
            path, exact = self.profile(rate, seed)
            base.append(path)

        # A. noise of each span's estimate against the prediction.
        estimates = {}
        for path in base:
            _, doc = self.diff(base[0], path, [])
            for r in doc["rows"]:
                estimates.setdefault(r["name"], []).append(r["after"])
        print("### A. Estimate noise per span\n")
        print("| span | exact | mean estimate | measured SD | predicted SE √(R·B) | SD / SE |")
        print("|---|--:|--:|--:|--:|--:|")
        for name in sorted(exact, key=lambda n: -exact[n]):
            xs = estimates.get(name, [0])
            xs = xs + [0] * (o.runs - len(xs))
            mean = sum(xs) / len(xs)
            sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
            pred = math.sqrt(rate * exact[name])
            print("| `%s` | %s | %s (%+.1f%%) | %s (%.1f%%) | %s (%.1f%%) | %.2f |" % (
                name, fmt_bytes(exact[name]), fmt_bytes(mean), 100.0 * (mean - exact[name]) / exact[name],
                fmt_bytes(sd), 100.0 * sd / exact[name], fmt_bytes(pred), 100.0 * pred / exact[name],
                sd / pred))

        # B. false alarms over every pair of identical workloads.
        pairs = list(itertools.combinations(range(o.runs), 2))
        print("\n### B. False alarms: %d pairs of profiles of the same workload\n" % len(pairs))
        print("| options | pairs failing the gate (exit 1) | span comparisons flagged regression/new |"
              " flagged improvement/gone |")
        print("|---|--:|--:|--:|")
        for label, flags in OPTION_SETS:
            failed = flagged = flagged_down = spans = 0
            for i, j in pairs:
                rc, doc = self.diff(base[i], base[j], flags)
                failed += rc == 1
                for r in doc["rows"]:
                    spans += 1
                    flagged += r["kind"] in ("regression", "new")
                    flagged_down += r["kind"] in ("improvement", "gone")
            print("| %s | %d / %d (%.1f%%) | %d / %d (%.2f%%) | %d (%.2f%%) |" % (
                label, failed, len(pairs), 100.0 * failed / len(pairs), flagged, spans,
                100.0 * flagged / spans, flagged_down, 100.0 * flagged_down / spans))

        # C. detection of a real growth of one span.
        span = o.grow_span
        b = exact[span]
        se_rel = math.sqrt(2.0 * rate / b)
        print("\n### C. Detection: `%s` (%s exact) grows by G%%, %d runs per G\n" % (span, fmt_bytes(b),
                                                                                   o.grow_runs))
        print("Standard error of the difference at G=0: √(2·R·B) = %s (%.1f%% of the span).\n" % (
            fmt_bytes(math.sqrt(2.0 * rate * b)), 100.0 * se_rel))
        header = "| G | " + " | ".join("caught, %s" % label for label, _ in OPTION_SETS) + \
                 " | other spans flagged (default) |"
        print(header)
        print("|--:|" + "--:|" * (len(OPTION_SETS) + 1))
        for g in o.growth:
            caught = [0] * len(OPTION_SETS)
            others = 0
            for k in range(o.grow_runs):
                path, _ = self.profile(rate, 1000 + k, (span, g))
                for idx, (label, flags) in enumerate(OPTION_SETS):
                    rc, doc = self.diff(base[k % o.runs], path, flags)
                    kinds = {r["name"]: r["kind"] for r in doc["rows"]}
                    caught[idx] += kinds.get(span) == "regression"
                    if idx == 0:
                        others += sum(1 for n, kd in kinds.items() if n != span and kd in ("regression", "new"))
            print("| +%g%% | " % g + " | ".join("%d / %d" % (c, o.grow_runs) for c in caught) +
                  " | %d |" % others)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True, help="CMake build directory")
    ap.add_argument("--culpert", help="the culpert binary (default: BUILD/cli/culpert)")
    ap.add_argument("--workload", help="default: BUILD/bench/noise/noise_workload")
    ap.add_argument("--lib", help="libculpert.so (default: BUILD/src/libculpert.so)")
    ap.add_argument("--work", help="where profiles go (default: a new temporary directory)")
    ap.add_argument("--runs", type=int, default=40, help="baseline runs per rate (seeds 1..N)")
    ap.add_argument("--rates", default="524288,65536", help="sample rates in bytes, comma-separated")
    ap.add_argument("--requests", type=int, default=16, help="workload size (noise_workload --requests)")
    ap.add_argument("--grow-span", default="parse_input")
    ap.add_argument("--growth", default="5,10,20,30,50,100", help="growth percentages to detect")
    ap.add_argument("--grow-runs", type=int, default=20)
    opts = ap.parse_args()
    opts.growth = [float(g) for g in opts.growth.split(",")]
    study = Study(opts)
    print("# culpert diff sampling-noise study\n")
    print("Workload: bench/noise/noise_workload --requests %d; libculpert.so from %s; profiles in %s." % (
        opts.requests, study.build, study.work))
    for rate in (int(r) for r in opts.rates.split(",")):
        study.run_rate(rate)
    return 0


if __name__ == "__main__":
    sys.exit(main())
