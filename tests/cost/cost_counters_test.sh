#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# Builds the collector with -DCULPERT_COST_COUNTERS=ON in a build directory
# of its own, runs the bench's mixed workload under it with both stack
# modes, and checks the line it prints at exit: as many samples as the
# profile holds, a positive tick count for every step, no more sampled
# frees than samples. The normal library (the third argument) must print
# no such line.
# usage: cost_counters_test.sh BUILD_DIR SOURCE_DIR NORMAL_LIBCULPERT
set -euo pipefail
build=$1 src=$2 normal=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
unset CULPERT_QUIET
case "$(uname -m)" in x86_64 | amd64) ;; *) echo "SKIP: the counters read the x86-64 TSC"; exit 77 ;; esac

cost=$build/cost-counters
cmake -S "$src" -B "$cost" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCULPERT_WERROR=ON \
  -DCULPERT_COST_COUNTERS=ON -DCULPERT_BUILD_TESTS=OFF -DCULPERT_BUILD_EXAMPLES=OFF >/dev/null \
  || fail "configuring with -DCULPERT_COST_COUNTERS=ON failed"
cmake --build "$cost" --target libculpert culpert_bench_workload -j"$(nproc 2>/dev/null || echo 2)" >/dev/null \
  || fail "building with -DCULPERT_COST_COUNTERS=ON failed"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
workload=$cost/bench/collector/culpert_bench_workload

for mode in fp libunwind; do
  LD_PRELOAD=$cost/src/libculpert.so CULPERT_STACK=$mode CULPERT_SAMPLE_RATE=64K \
    CULPERT_OUTPUT="$tmp/$mode.pb.gz" "$workload" mixed 1 20000 >/dev/null 2>"$tmp/$mode.err" \
    || { cat "$tmp/$mode.err"; fail "$mode: the workload failed under the counting build"; }
  line=$(grep 'cost counters:' "$tmp/$mode.err") || { cat "$tmp/$mode.err"; fail "$mode: no cost counters line"; }
  written=$(sed -n 's/.*wrote profile to .* (\([0-9]*\) samples*).*/\1/p' "$tmp/$mode.err")
  read -r n draw stack weight record insert frees remove < <(echo "$line" | sed -E \
    's/.*: ([0-9]+) samples, TSC ticks each: draw ([0-9]+), stack ([0-9]+), weight ([0-9]+), record ([0-9]+), live insert ([0-9]+); ([0-9]+) sampled frees, ([0-9]+) ticks each$/\1 \2 \3 \4 \5 \6 \7 \8/')
  [[ $remove =~ ^[0-9]+$ ]] || fail "$mode: cannot read the counters line: $line"
  [[ $n -gt 100 && $n == "$written" ]] || fail "$mode: $n samples counted, the profile has ${written:-none}"
  for v in "$draw" "$stack" "$weight" "$record" "$insert" "$remove"; do
    [[ $v -gt 0 ]] || fail "$mode: a step took no ticks: $line"
  done
  [[ $frees -gt 0 && $frees -le $n ]] || fail "$mode: $frees sampled frees for $n samples"
  echo "$mode: $line"
done

LD_PRELOAD=$normal CULPERT_SAMPLE_RATE=64K CULPERT_OUTPUT="$tmp/normal.pb.gz" \
  "$workload" mixed 1 20000 >/dev/null 2>"$tmp/normal.err" || fail "the workload failed under the normal library"
if grep -q 'cost counters' "$tmp/normal.err"; then
  fail "the normal library prints cost counters"
fi
grep -q 'wrote profile' "$tmp/normal.err" || { cat "$tmp/normal.err"; fail "the normal library wrote no profile"; }
echo "PASS"
