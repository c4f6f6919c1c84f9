#!/bin/sh
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# A real Go heap profile, written at test time by a small Go program of our
# own (runtime.MemProfileRate = 1: every allocation recorded), must load:
# `culpert info` calls it a Go heap profile, `culpert report --no-span`
# finds the two allocating functions as callsites (runtime allocation frames
# skipped) in the right order, and the total matches `go tool pprof`.
#   go_heap.sh CULPERT
# Exit 77 (skipped) when Go is not installed. Offline.
set -u
culpert=$1
command -v go >/dev/null 2>&1 || { echo "go not installed: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export HOME=$tmp GOCACHE=$tmp/gocache GOPATH=$tmp/gopath GOFLAGS=-mod=mod GO111MODULE=off \
  GOTOOLCHAIN=local CGO_ENABLED=0
cd "$tmp" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

cat >heap.go <<'GO'
package main

import (
	"os"
	"runtime"
	"runtime/pprof"
)

var keep [][]byte

//go:noinline
func loadIndex() {
	for i := 0; i < 64; i++ {
		keep = append(keep, make([]byte, 64<<10))
	}
}

//go:noinline
func serveRequest() {
	for i := 0; i < 32; i++ {
		keep = append(keep, make([]byte, 16<<10))
	}
}

func main() {
	runtime.MemProfileRate = 1
	loadIndex()
	serveRequest()
	runtime.GC()
	f, err := os.Create(os.Args[1])
	if err != nil {
		panic(err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		panic(err)
	}
	f.Close()
}
GO
go build -o heap heap.go >build.log 2>&1 || fail "go build: $(cat build.log)"
./heap go.pb.gz || fail "the Go program failed"

"$culpert" info go.pb.gz >info.out 2>&1 || fail "culpert info: $(cat info.out)"
grep -q "^Producer: *Go heap profile" info.out || fail "not recognised as Go: $(cat info.out)"
grep -q "^Sample rate: *1 B/alloc" info.out || fail "MemProfileRate 1 not read: $(cat info.out)"

"$culpert" report --no-span go.pb.gz >report.out 2>&1 || fail "culpert report: $(cat report.out)"
rows=$(grep -E '^  main\.(loadIndex|serveRequest)  \(' report.out | awk '{print $1}' | tr '\n' ' ')
[ "$rows" = "main.loadIndex main.serveRequest " ] || fail "callsites: $(cat report.out)"
grep -q "runtime.mallocgc\|runtime.makeslice" report.out && fail "runtime frames not skipped: $(cat report.out)"
# 64 x 64 KiB = 4 MiB for loadIndex, at least.
grep -E '^  main\.loadIndex ' report.out | grep -q "4\.[0-9][0-9] MB" || fail "loadIndex bytes: $(cat report.out)"

# The total agrees with the reference reader.
"$culpert" report --format json --flat go.pb.gz >flat.json || fail "json"
ours=$(sed -n 's/.*"total_bytes":\([0-9]*\).*/\1/p' flat.json)
go tool pprof -raw go.pb.gz >raw.txt 2>/dev/null || fail "go tool pprof -raw"
theirs=$(awk '/^Samples:/{s=1;next} /^Locations/{s=0} s && $0 ~ /^ *[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+:/ {gsub(":","",$2); t+=$2} END{print t}' raw.txt)
[ -n "$ours" ] && [ "$ours" = "$theirs" ] || fail "total bytes: culpert $ours, go tool pprof $theirs"
echo "a real Go heap profile loads; callsites and totals agree (total $ours bytes)"
