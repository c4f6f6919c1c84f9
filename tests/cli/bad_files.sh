#!/bin/sh
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# The bad-file corpus: every file must make `culpert report` and `culpert
# info` exit 2 with "culpert: error: <file>: <specific problem>" on stderr,
# nothing on stdout, and no crash or hang. Files are made here, at test time,
# from mkprofile fixtures with one rule broken, from bytes, and (the gzip
# bomb, 10 MB inflating to 10 GiB) with mkbomb; nothing binary is in git.
#   bad_files.sh CULPERT MKPROFILE MKBOMB
set -u
culpert=$1 mkprofile=$2 mkbomb=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
failures=0

good='rate 65536
span 1 - handle_request
span 2 1 parse_input
sample span=2 bytes=524288 samples=8 stack=main;handle_request;parse_input;malloc
sample bytes=4096 samples=1 stack=main;setup;malloc'

# mk NAME [DIRECTIVE...]: the good profile plus extra directives -> NAME.
mk() {
  name=$1
  shift
  { echo "$good"; for d in "$@"; do echo "$d"; done; } >"$name.txt"
  "$mkprofile" "$name.txt" "$name" || { echo "FAIL: mkprofile for $name"; exit 1; }
}

# expect FILE MESSAGE: report, info and merge exit 2 and print exactly
# "culpert: error: FILE: MESSAGE".
expect() {
  for cmd in report info merge; do
    "$culpert" $cmd "$1" >out 2>err
    rc=$?
    want="culpert: error: $1: $2"
    if [ $rc -ne 2 ] || [ -s out ] || [ "$(cat err)" != "$want" ]; then
      echo "FAIL: culpert $cmd $1: exit $rc (want 2)"
      echo "  want: $want"
      echo "  got:  $(cat err)"
      [ -s out ] && echo "  and stdout: $(head -c 300 out)"
      failures=$((failures + 1))
    fi
  done
}

: >empty.pb.gz
expect empty.pb.gz "file is empty, not a profile"

# A directory stands for the profiles in it: `info` shows each, `report`
# merges them; both find none in this one.
mkdir adir
"$culpert" info adir >out 2>err
[ $? -eq 2 ] && [ ! -s out ] && [ "$(cat err)" = "culpert: error: adir: a directory with no profile in it" ] ||
  { echo "FAIL: culpert info adir: $(cat err)"; failures=$((failures + 1)); }
"$culpert" report adir >out 2>err
[ $? -eq 2 ] && [ ! -s out ] && [ "$(cat err)" = "culpert: error: adir: a directory with no profile in it" ] ||
  { echo "FAIL: culpert report adir: $(cat err)"; failures=$((failures + 1)); }

mk good.pb.gz
size=$(wc -c <good.pb.gz)
head -c $((size / 2)) good.pb.gz >truncated.pb.gz
expect truncated.pb.gz "truncated gzip data (unexpected end of file)"

# Bytes appended after a complete gzip stream (Go's reader refuses them).
{ cat good.pb.gz; printf 'garbage\n'; } >trailing.pb.gz
expect trailing.pb.gz "8 bytes after the end of the gzip data"

# A gzip header followed by bytes that are not deflate data.
printf '\037\213\010\000\000\000\000\000\000\003\377\377\377\377garbage' >corrupt.pb.gz
expect corrupt.pb.gz "corrupt gzip data (invalid block type)"

python3 -c 'import random,sys; random.seed(7); sys.stdout.buffer.write(bytes(random.getrandbits(8) for _ in range(4096)))' >random.bin
expect random.bin "not a pprof profile (protobuf decoding failed)"

gzip -c <random.bin >random.gz
expect random.gz "not a pprof profile (protobuf decoding failed after gunzip)"

# Field 2 (sample) claiming a length of 2^62 bytes.
printf '\022\200\200\200\200\200\200\200\200\100' >absurd_length.pb
expect absurd_length.pb "not a pprof profile (protobuf decoding failed)"

# A valid protobuf that is not a profile: a lone string table entry.
printf '\062\005hello' >hello.pb
expect hello.pb "string_table[0] must be the empty string"

mk negative_period.pb.gz "rate -100"
expect negative_period.pb.gz "period -100 is negative, not a sample rate"

mk string0.pb.gz "bad string0"
expect string0.pb.gz "string_table[0] must be the empty string"

mk location_id0.pb.gz "bad location_id0"
expect location_id0.pb.gz "location 1 has id 0"

mk dup_location.pb.gz "bad duplicate_location"
expect dup_location.pb.gz "location id 1 is not unique"

mk dangling_location.pb.gz "bad dangling_location"
expect dangling_location.pb.gz "sample 1 refers to location id 999999, which does not exist"

mk dangling_function.pb.gz "bad dangling_function"
expect dangling_function.pb.gz "location id 1 refers to function id 999999, which does not exist"

mk dangling_mapping.pb.gz "mapping /usr/bin/app" "bad dangling_mapping"
expect dangling_mapping.pb.gz "location id 1 refers to mapping id 999999, which does not exist"

mk value_count.pb.gz "bad value_count"
expect value_count.pb.gz "sample 1 has 4 values but the profile has 5 sample types"

mk extra_value.pb.gz "bad extra_value"
expect extra_value.pb.gz "sample 1 has 6 values but the profile has 5 sample types"

mk mapping_id0.pb.gz "mapping /usr/bin/app" "bad mapping_id0"
expect mapping_id0.pb.gz "mapping 1 has id 0"

mk dup_mapping.pb.gz "mapping /usr/bin/app" "bad duplicate_mapping"
expect dup_mapping.pb.gz "mapping id 1 is not unique"

mk function_id0.pb.gz "bad function_id0"
expect function_id0.pb.gz "function 1 has id 0"

mk dup_function.pb.gz "bad duplicate_function"
expect dup_function.pb.gz "function id 1 is not unique"

mk string_index.pb.gz "bad string_index"
expect string_index.pb.gz "a sample label key refers to string 1017, but the string table has 17 entries"

printf 'sample_types samples/count cpu/nanoseconds\nsample values=1,1000\n' >cpu.txt
"$mkprofile" cpu.txt cpu.pb.gz
expect cpu.pb.gz "not a heap allocation profile: no alloc_space or space sample type (it has samples/count, cpu/nanoseconds)"

printf 'sample_types\n' >notypes.txt
"$mkprofile" notypes.txt notypes.pb.gz
expect notypes.pb.gz "not a heap profile: it declares no sample types"

# 10 MB of gzip that inflates to 10 GiB: refused at the cap, not allocated.
"$mkbomb" bomb.pb.gz 10 || { echo "FAIL: mkbomb"; exit 1; }
expect bomb.pb.gz "decompressed profile exceeds 512 MiB, the most culpert reads; refusing it as a possible gzip bomb"

if [ $failures -ne 0 ]; then
  echo "$failures bad-file check(s) failed"
  exit 1
fi
echo "bad-file corpus: all files refused with the expected message"
