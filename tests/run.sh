#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# The whole test suite, from a clean clone of a fresh Debian 12 machine:
# installs what is missing, builds with -Werror, runs every ctest entry
# (collector, writer, CLI, diff, flame graph, archive CLI and worker), then
# rebuilds with ASan+UBSan on the CLI and the test programs (never on
# libculpert.so, which runs inside other programs) and runs every test that
# does not preload libculpert again, and last builds the Release
# configuration with -Werror (compile only).
#   tests/run.sh              everything
#   tests/run.sh -R REGEX     only the ctest entries matching REGEX
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

.ci/install-deps

jobs=$(nproc 2>/dev/null || echo 2)
export GOCACHE="${GOCACHE:-$root/build-test/.gocache}"
export GOFLAGS="${GOFLAGS:-}"
export CULPERT_QUIET_TESTS=1

echo "== build (-Werror)"
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCULPERT_WERROR=ON >/dev/null
cmake --build build-test -j"$jobs"

echo "== tests"
ctest --test-dir build-test --output-on-failure -j"$jobs" --timeout 600 "$@"

if [[ $# -eq 0 ]]; then
  echo "== unit, writer, CLI and diff tests under ASan+UBSan"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCULPERT_WERROR=ON -DCULPERT_SANITIZE=ON \
    -DCULPERT_BUILD_BENCH=OFF -DCULPERT_BUILD_EXAMPLES=OFF >/dev/null
  cmake --build build-asan -j"$jobs"
  ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 600 \
    -R '^(cli_|unit_|writer\.|diff_|flamegraph_|mkprofile_|archive_(unit|validation|http|local)$)'

  echo "== release build (-O3 -Werror: warnings only the optimiser finds)"
  cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DCULPERT_WERROR=ON \
    -DCULPERT_BUILD_TESTS=OFF >/dev/null
  cmake --build build-release -j"$jobs"
fi
