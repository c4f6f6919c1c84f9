#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# Installs the build into a temporary prefix and uses it the three ways a
# user would: `culpert run` from the installed layout, a program built with
# `pkg-config culpert`, and a CMake project using find_package(culpert).
# usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/culpert lib/libculpert.so include/culpert.h lib/pkgconfig/culpert.pc \
         lib/cmake/culpert/culpertConfig.cmake; do
  [[ -e $prefix/$f ]] || fail "cmake --install did not produce $f"
done

# 1. culpert run finds libculpert next to itself in the installed layout.
cd "$tmp"
"$prefix/bin/culpert" run -o "$tmp/run.pb.gz" --rate 0 -- "$build/examples/request_server" 50 >"$tmp/run.out" 2>&1 \
  || { cat "$tmp/run.out"; fail "installed culpert run failed"; }
grep -q "handle_request" "$tmp/run.out" || { cat "$tmp/run.out"; fail "installed culpert run printed no span report"; }

# 2. pkg-config: compile and link with -lculpert, run without LD_PRELOAD.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# shellcheck disable=SC2046
cc -o "$tmp/pc_consumer" "$src/examples/find_package/main.c" $(pkg-config --cflags --libs culpert) \
  -Wl,-rpath,"$prefix/lib" || fail "build with pkg-config culpert failed"
CULPERT_QUIET=1 CULPERT_SAMPLE_RATE=0 "$tmp/pc_consumer" "$tmp/pc.pb.gz" | grep -q "active=1 snapshot=0" \
  || fail "program linked with -lculpert is not profiled"
[[ -s $tmp/pc.pb.gz ]] || fail "linked program wrote no snapshot"
"$prefix/bin/culpert" report --flat "$tmp/pc.pb.gz" | grep -q consumer_work \
  || fail "linked program's snapshot lacks its span"

# 3. find_package(culpert) gives culpert::culpert.
cmake -S "$src/examples/find_package" -B "$tmp/fp" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null \
  || fail "find_package(culpert) failed"
cmake --build "$tmp/fp" >/dev/null || fail "building against culpert::culpert failed"
CULPERT_QUIET=1 CULPERT_SAMPLE_RATE=0 LD_LIBRARY_PATH=$prefix/lib "$tmp/fp/consumer" "$tmp/fp.pb.gz" | grep -q "active=1 snapshot=0" \
  || fail "find_package consumer is not profiled"
echo "install test passed"
