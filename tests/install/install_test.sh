#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# Installs the build into a temporary prefix and uses it the ways a user
# would, from outside the source tree and without LD_LIBRARY_PATH: a
# program built with the header alone (runs as is, profiled under
# LD_PRELOAD and under the installed `culpert run`), C and C++ programs
# linked through `pkg-config culpert`, and a CMake project with C and C++
# targets using find_package(culpert).
# usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }
unset LD_LIBRARY_PATH LD_PRELOAD

cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/culpert lib/libculpert.so include/culpert.h lib/pkgconfig/culpert.pc \
         lib/cmake/culpert/culpertConfig.cmake; do
  [[ -e $prefix/$f ]] || fail "cmake --install did not produce $f"
done
cd "$tmp"

# 1. The header alone, no -lculpert: the span calls do nothing and the
#    program runs; under LD_PRELOAD of the installed library its spans appear.
cc -O2 -o "$tmp/request_server" "$src/examples/request_server.c" -I"$prefix/include" \
  || fail "request_server.c does not build with -I$prefix/include alone"
mkdir "$tmp/plain"
(cd "$tmp/plain" && "$tmp/request_server" 50 >/dev/null) || fail "header-only program failed to run"
[[ -z $(ls -A "$tmp/plain") ]] || fail "header-only program wrote a profile without libculpert"
CULPERT_QUIET=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$tmp/preload.pb.gz" \
  LD_PRELOAD="$prefix/lib/libculpert.so" "$tmp/request_server" 50 >/dev/null \
  || fail "header-only program failed under LD_PRELOAD"
"$prefix/bin/culpert" report "$tmp/preload.pb.gz" | grep -q "build_response" \
  || fail "header-only program's spans are missing under LD_PRELOAD"

# 2. culpert run finds libculpert next to itself in the installed layout.
"$prefix/bin/culpert" run -o "$tmp/run.pb.gz" --rate 0 -- "$tmp/request_server" 50 >"$tmp/run.out" 2>&1 \
  || { cat "$tmp/run.out"; fail "installed culpert run failed"; }
grep -q "handle_request" "$tmp/run.out" || { cat "$tmp/run.out"; fail "installed culpert run printed no span report"; }

# consumer NAME FILE: run a linked consumer, which writes a snapshot to FILE;
# it must have been profiled and the snapshot must hold its span.
consumer() {
  local out
  out=$(CULPERT_QUIET=1 CULPERT_SAMPLE_RATE=0 "$1" "$2") || fail "$1 failed: $out"
  [[ $out == "active=1 snapshot=0"* ]] || fail "$1 is not profiled: $out"
  "$prefix/bin/culpert" report --flat "$2" | grep -q consumer_work \
    || fail "$1's snapshot lacks its span"
}

# 3. pkg-config: compile and link with -lculpert, run without LD_PRELOAD.
#    The C++ consumer calls no malloc itself: only the culpert calls (weak)
#    tie it to libculpert, so the flags must keep it linked under --as-needed.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# shellcheck disable=SC2046
cc -o "$tmp/pc_consumer" "$src/examples/find_package/main.c" $(pkg-config --cflags --libs culpert) \
  -Wl,-rpath,"$prefix/lib" || fail "build with pkg-config culpert failed"
consumer "$tmp/pc_consumer" "$tmp/pc.pb.gz"
# shellcheck disable=SC2046
c++ -o "$tmp/pc_consumer_cpp" "$src/examples/find_package/main.cpp" $(pkg-config --cflags --libs culpert) \
  -Wl,-rpath,"$prefix/lib" || fail "C++ build with pkg-config culpert failed"
consumer "$tmp/pc_consumer_cpp" "$tmp/pc_cpp.pb.gz"

# 4. find_package(culpert) gives culpert::culpert, and the run path to it.
cmake -S "$src/examples/find_package" -B "$tmp/fp" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null \
  || fail "find_package(culpert) failed"
cmake --build "$tmp/fp" >/dev/null || fail "building against culpert::culpert failed"
consumer "$tmp/fp/consumer" "$tmp/fp.pb.gz"
consumer "$tmp/fp/consumer_cpp" "$tmp/fp_cpp.pb.gz"
echo "install test passed"
