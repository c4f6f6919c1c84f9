#!/bin/sh
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# The reference pprof reader accepts what mkprofile writes, gzipped and
# plain, and sees the numbers the fixture declares: `go tool pprof -raw`
# must list the fixture's samples and span labels.
#   pprof_reads.sh MKPROFILE FIXTURES_DIR
# Exit 77 (skipped) when Go is not installed. Offline; HOME and GOCACHE
# point at a scratch directory.
set -u
mkprofile=$1 fixtures=$2
command -v go >/dev/null 2>&1 || { echo "go not installed: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export HOME=$tmp GOCACHE=$tmp/gocache GOFLAGS= GOTOOLCHAIN=local
failures=0

# check FIXTURE PLAIN WANT...: every WANT line appears in pprof -raw.
check() {
  fixture=$1 plain=$2
  shift 2
  out=$tmp/p.pb.gz
  "$mkprofile" "$fixtures/$fixture" "$out" $plain || { echo "FAIL: mkprofile $fixture"; failures=$((failures + 1)); return; }
  if ! go tool pprof -raw "$out" >"$tmp/raw" 2>"$tmp/err"; then
    echo "FAIL: go tool pprof rejects $fixture $plain: $(cat "$tmp/err")"
    failures=$((failures + 1))
    return
  fi
  for want do
    grep -qF -- "$want" "$tmp/raw" || { echo "FAIL: $fixture $plain: pprof -raw lacks '$want'"; failures=$((failures + 1)); }
  done
}

check spec.txt "" "Period: 65536" "alloc_space/bytes[dflt]" \
  "         16    1048576          0          0         16: 1 5 3 4 " \
  "span_name:[build_response]" "span_id:[3] span_parent_id:[1]" \
  "     5: 0x401040 M=1 build_response resp.c:42 s=0"
check spec.txt --plain "Comment: service=checkout"
check rust.txt "" "allocations/count space/bytes" "span_name:[decode]"
check go.txt "" "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes" \
  "Period: 524288" "runtime.mallocgc"
check callsites.txt "" "operator new(unsigned long)"
check info.txt "" "Comment: culpert.span_overflow=7" "Time: 2023-11-14 22:13:20.123456789 +0000 UTC" "Duration: 1m2"

[ $failures -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "go tool pprof reads every mkprofile fixture"
