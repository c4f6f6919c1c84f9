#!/bin/sh
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# `culpert merge` and `culpert upload` of several profiles: span ids
# renumbered by path (the same path in two files gets one id, different
# paths never share one), values and stacks kept, comments merged, the
# refusals (different rates or sample types, a damaged input, stdin twice,
# -o a directory or a file in an input directory) with nothing written, a real run's processes, and the
# merged file read by go tool pprof.
#   merge.sh CULPERT MKPROFILE WORKLOAD
culpert=$1 mkprofile=$2 workload=$3
. "$(dirname "$0")/lib.sh"

# Two processes of one run. Their span ids clash: id 1 is handle_request
# in a but cache_warm in b, and handle_request > parse_input is 1 > 2 in a
# but 2 > 3 in b.
cat >a.txt <<'EOF'
rate 65536
time_nanos 1700000000000000000
duration_nanos 2000000000
mapping /usr/bin/app
comment culpert.dropped_samples=2
comment culpert.exe=app
comment culpert.peak_inuse_bytes=1000000
comment culpert.pid=100
comment culpert.span_overflow=1
comment culpert.stack=libunwind
comment service=checkout
span 1 - handle_request
span 2 1 parse_input
sample span=1
sample span=2 bytes=524288 objects=8 inuse_bytes=65536 inuse_objects=1 samples=8 stack=main;handle_request;parse_input@parse.c:10;malloc
EOF
cat >b.txt <<'EOF'
rate 65536
time_nanos 1700000001000000000
duration_nanos 3000000000
mapping /usr/bin/app
comment culpert.dropped_samples=3
comment culpert.exe=app
comment culpert.peak_inuse_bytes=2000000
comment culpert.pid=200
comment culpert.span_overflow=4
comment culpert.stack=libunwind
comment service=checkout
span 1 - cache_warm
span 2 - handle_request
span 3 2 parse_input
sample span=1 bytes=262144 objects=4 samples=4 stack=main;cache_warm;malloc
sample span=2
sample span=3 bytes=131072 objects=2 samples=2 stack=main;handle_request;parse_input@parse.c:10;malloc
EOF
for f in a b; do "$mkprofile" $f.txt $f.pb.gz || exit 1; done

# 1. The merged file reports what the two files report together.
"$culpert" merge -o ab.pb.gz a.pb.gz b.pb.gz 2>err || fail "merge a b: $(cat err)"
has err "culpert: merged 2 profiles into ab.pb.gz" || fail "merge a b: stderr: $(cat err)"
"$culpert" report --top 0 a.pb.gz b.pb.gz | sed 1d >want.txt
"$culpert" report --top 0 ab.pb.gz >got.txt 2>err || fail "report of the merged file: $(cat err)"
sed 1d got.txt | cmp -s - want.txt || fail "merged report differs: $(diff want.txt got.txt)"
has got.txt "handle_request" || fail "merged report: no handle_request: $(cat got.txt)"
grep -q '^├─ handle_request .*640.00 KB' got.txt || grep -q '^handle_request .*640.00 KB' got.txt ||
  fail "merged report: handle_request should hold 512 + 128 KB: $(cat got.txt)"
"$culpert" report --inuse a.pb.gz b.pb.gz | sed 1d >want.txt
"$culpert" report --inuse ab.pb.gz | sed 1d | cmp -s - want.txt || fail "merged in-use report differs"
"$culpert" flamegraph a.pb.gz b.pb.gz >want.txt
"$culpert" flamegraph ab.pb.gz | cmp -s - want.txt || fail "merged flame graph differs"

# 2. Span ids by path: three paths, three ids, whatever the files said.
if command -v go >/dev/null 2>&1; then
  go tool pprof -raw ab.pb.gz >raw.txt 2>err || fail "go tool pprof -raw of the merged file: $(cat err)"
  for want in "culpert.dropped_samples=5" "culpert.merged_files=2" "culpert.pid=100,200" \
    "culpert.stack=libunwind" "service=checkout"; do
    has raw.txt "$want" || fail "merged comments: no $want: $(cat raw.txt)"
  done
  has raw.txt "peak_inuse" && fail "merged comments keep a peak: $(cat raw.txt)"
  go tool pprof -tags ab.pb.gz >tags.txt 2>err || fail "go tool pprof -tags: $(cat err)"
  # pprof shows labels of samples with values: parse_input (both files)
  # and cache_warm, two ids; handle_request, parse_input's parent in both
  # files, one parent id.
  n=$(sed -n '/span_id:/,/^$/p' tags.txt | grep -c '): [0-9]')
  [ "$n" -eq 2 ] || fail "want 2 span ids with values (cache_warm, parse_input), got $n: $(cat tags.txt)"
  n=$(sed -n '/span_parent_id:/,/^$/p' tags.txt | grep -c '): [0-9]')
  [ "$n" -eq 1 ] || fail "want 1 parent id (handle_request), got $n: $(cat tags.txt)"
  sed -n '/span_name:/,/^$/p' tags.txt | grep -q '640.0kB.*parse_input' ||
    fail "parse_input of both files not under one name: $(cat tags.txt)"
  go tool pprof -tags -tagfocus=span_name=parse_input ab.pb.gz >pi.txt 2>&1
  [ "$(sed -n '/span_id:/,/^$/p' pi.txt | grep -c '): [0-9]')" -eq 1 ] ||
    fail "parse_input of both files has more than one id: $(cat pi.txt)"
else
  echo "go not found: the go tool pprof checks are skipped"
fi
"$culpert" info ab.pb.gz >info.txt 2>err || fail "info of the merged file: $(cat err)"
has info.txt "Dropped samples: 5" || fail "info: dropped samples not summed: $(cat info.txt)"
has info.txt "Span overflow:   5" || fail "info: span overflows not summed: $(cat info.txt)"
has info.txt "Process ids:     100,200" || fail "info: pids: $(cat info.txt)"
has info.txt "Executable:      app" || fail "info: the one executable: $(cat info.txt)"
has info.txt "Peak in-use" && fail "info shows a peak for a merge: $(cat info.txt)"
# a was taken at T and covers 2 s before it, b at T+1 s covering 3 s: the
# merge is taken at T+1 s and covers from T-2 s.
has info.txt "Duration:        3.00 s" || fail "info: duration from the earliest start to the last snapshot: $(cat info.txt)"
has info.txt "Captured:        2023-11-14 22:13:21 UTC" || fail "info: the merge is taken when b was: $(cat info.txt)"
# Times that span more than int64 nanoseconds (one taken at the last
# representable instant, one covering from before 1678): the merged
# duration is capped, never wrapped to a negative one.
printf 'rate 65536\ntime_nanos 9223372036854775807\nsample bytes=1 stack=main\n' >late.txt
printf 'rate 65536\ntime_nanos 1\nduration_nanos 9223372036854775807\nsample bytes=1 stack=main\n' >long.txt
"$mkprofile" late.txt late.pb.gz && "$mkprofile" long.txt long.pb.gz || exit 1
"$culpert" merge -o far.pb.gz late.pb.gz long.pb.gz 2>err || fail "merge of far-apart times: $(cat err)"
"$culpert" info far.pb.gz >info.txt 2>err || fail "info of far-apart times: $(cat err)"
has info.txt "Duration:        9223372036.85 s" || fail "info: duration not capped at the int64 maximum: $(cat info.txt)"
# The same files merged in memory by report (a signed overflow once,
# fatal under UBSan).
"$culpert" report late.pb.gz long.pb.gz >far.txt 2>err || fail "report of far-apart times: $(cat err)"
has far.txt "2 profiles merged" || fail "report of far-apart times: $(cat far.txt)"
# A sample with two span_name labels is in the span of the first, as
# every command reads it: its child stays under that span in the merge,
# not under the other file's span of the second name and the same id.
printf 'rate 65536\ncomment culpert.exe=cc\nsample span_name=d13 span_id=7 bytes=65536 stack=main\n' >x.txt
printf 'rate 65536\ncomment culpert.exe=ld\nsample span_name=alpha span_name=d13 span_id=7 bytes=131072 stack=main\nsample span_name=child span_id=8 span_parent_id=7 bytes=65536 stack=main\n' >y.txt
"$mkprofile" x.txt x.pb.gz && "$mkprofile" y.txt y.pb.gz || exit 1
"$culpert" merge -o xy.pb.gz x.pb.gz y.pb.gz 2>err || fail "merge of repeated span names: $(cat err)"
"$culpert" flamegraph x.pb.gz y.pb.gz >fwant.txt 2>&1
"$culpert" flamegraph xy.pb.gz >fgot.txt 2>&1
cmp -s fwant.txt fgot.txt || fail "repeated span names: the merge moves a child span: $(cat fgot.txt)"
has fgot.txt "alpha;child;main" || fail "repeated span names: no alpha;child: $(cat fgot.txt)"
# Processes of different programs: their executables, joined in file order.
"$culpert" info xy.pb.gz >info.txt 2>err || fail "info of xy: $(cat err)"
has info.txt "Executables:     cc,ld" || fail "info: the two executables: $(cat info.txt)"

# 3. Merging is associative where it matters: a merged file merged again
#    counts its files, and keeps the same report. Directories and stdin.
mkdir d && cp a.pb.gz d/1.pb.gz && cp b.pb.gz d/2.pb.gz && echo partial >d/2.pb.gz.tmp.9
"$culpert" merge d >d.pb.gz 2>err || fail "merge of a directory: $(cat err)"
cmp -s d.pb.gz ab.pb.gz || fail "merge of a directory differs from merge of its files"
"$culpert" merge -o aba.pb.gz ab.pb.gz - <a.pb.gz 2>err || fail "merge with stdin: $(cat err)"
"$culpert" info aba.pb.gz | grep -q 'culpert.merged_files *3' || fail "merged_files of a merge of a merge: $("$culpert" info aba.pb.gz)"
cp a.pb.gz a2.pb.gz
"$culpert" report a.pb.gz b.pb.gz a2.pb.gz | sed 1d >want.txt
"$culpert" report aba.pb.gz | sed 1d | cmp -s - want.txt || fail "merge of a merge: report differs"

# A damaged span tree (parents in a cycle, a span its own parent) merges
# and reads as the files read together.
cat >cyc.txt <<'EOF'
rate 65536
span 1 2 alpha
span 2 1 beta
span 3 3 gamma
sample span=1 bytes=65536 objects=1 samples=1 stack=main;a;malloc
sample span=2 bytes=131072 objects=2 samples=2 stack=main;b;malloc
sample span=3 bytes=65536 objects=1 samples=1 stack=main;c;malloc
EOF
"$mkprofile" cyc.txt cyc.pb.gz || exit 1
cp cyc.pb.gz cyc2.pb.gz
"$culpert" merge -o cc.pb.gz cyc.pb.gz cyc2.pb.gz 2>err || fail "merge of span cycles: $(cat err)"
"$culpert" report cyc.pb.gz cyc2.pb.gz | sed 1d >want.txt
"$culpert" report cc.pb.gz | sed 1d | cmp -s - want.txt || fail "merge of span cycles: report differs"

# Label keys written twice in the string table (the format allows it):
# the span ids are still found and renumbered by path.
{ cat b.txt; echo "bad duplicate_label_keys"; } >bdup.txt
"$mkprofile" bdup.txt bdup.pb.gz || exit 1
"$culpert" merge -o abdup.pb.gz a.pb.gz bdup.pb.gz 2>err || fail "merge with duplicate key strings: $(cat err)"
"$culpert" report --top 0 a.pb.gz bdup.pb.gz | sed 1d >want.txt
"$culpert" report --top 0 abdup.pb.gz | sed 1d | cmp -s - want.txt ||
  fail "merge with duplicate key strings: report differs: $(diff want.txt -)"
sed 1d got.txt >plain.txt
"$culpert" report --top 0 abdup.pb.gz | sed 1d | cmp -s - plain.txt ||
  fail "merge with duplicate key strings differs from the plain merge"

# 4. Refusals: exit 2, a message naming the file, nothing written.
sed 's/^rate 65536/rate 4096/' b.txt >c.txt && "$mkprofile" c.txt c.pb.gz
echo keep >out.pb.gz
"$culpert" merge -o out.pb.gz a.pb.gz c.pb.gz >out 2>err
[ $? -eq 2 ] || fail "different rates: want exit 2"
has err "culpert: error: sample rates differ: a.pb.gz 64.00 KB/alloc, c.pb.gz 4.00 KB/alloc" ||
  fail "different rates: message: $(cat err)"
[ "$(cat out.pb.gz)" = keep ] || fail "different rates: -o was overwritten"
"$mkprofile" "$(dirname "$0")/fixtures/go.txt" go.pb.gz 2>/dev/null ||
  printf 'producer go\nrate 65536\nsample bytes=1 objects=1 inuse_bytes=0 inuse_objects=0 stack=main\n' >go.txt
[ -s go.pb.gz ] || "$mkprofile" go.txt go.pb.gz
"$culpert" merge -o out.pb.gz a.pb.gz go.pb.gz 2>err
[ $? -eq 2 ] || fail "different sample types: want exit 2"
has err "go.pb.gz holds other sample types than a.pb.gz" || fail "different types: message: $(cat err)"
# The other way round: Go's four types are the first four of culpert's five.
"$culpert" merge -o out.pb.gz go.pb.gz a.pb.gz 2>err
[ $? -eq 2 ] || fail "different sample types, Go first: want exit 2"
has err "a.pb.gz holds other sample types than go.pb.gz" || fail "different types, Go first: message: $(cat err)"
printf 'not a profile' >bad.pb.gz
"$culpert" merge -o out.pb.gz a.pb.gz bad.pb.gz 2>err
[ $? -eq 2 ] || fail "damaged input: want exit 2"
"$culpert" info bad.pb.gz 2>want.txt
cmp -s err want.txt || fail "damaged input: merge's message differs from info's: $(cat err) / $(cat want.txt)"
[ "$(cat out.pb.gz)" = keep ] || fail "damaged input: -o was overwritten"
"$culpert" merge - - <a.pb.gz >/dev/null 2>err
[ $? -eq 2 ] && has err "standard input ('-') can be read only once" || fail "stdin twice: $(cat err)"
"$culpert" merge -o d a.pb.gz 2>err
[ $? -eq 2 ] && has err "-o 'd' is a directory" || fail "-o a directory: $(cat err)"
"$culpert" merge 2>err
[ $? -eq 2 ] && has err "merge: no profile given" || fail "no input: $(cat err)"
"$culpert" merge --frobnicate a.pb.gz 2>err
[ $? -eq 2 ] && has err "merge: unknown option '--frobnicate'" || fail "unknown option: $(cat err)"
mkdir empty
"$culpert" merge -o out.pb.gz empty 2>err
[ $? -eq 2 ] && has err "empty: a directory with no profile in it" || fail "empty directory: $(cat err)"
# -o in a directory it merges: the next merge (and every report of the
# directory) would read the merged file beside its inputs, counting them
# twice. Refused, also when the file is not there yet.
mkdir into
cp a.pb.gz b.pb.gz into/
for o in into/all.pb.gz into/a.pb.gz ./into/../into/new.pb.gz; do
  "$culpert" merge -o "$o" into 2>err
  [ $? -eq 2 ] && has err "-o '$o' is in the directory 'into' this merge reads" ||
    fail "-o $o in an input directory: $(cat err)"
done
[ "$(ls into)" = "a.pb.gz
b.pb.gz" ] && cmp -s into/a.pb.gz a.pb.gz || fail "-o in an input directory wrote: $(ls into)"

# 5. A real run: the processes of a workload that forks, merged; the
#    merged file against the directory, and read by go tool pprof.
mkdir run
"$culpert" run --rate 0 --no-report -o "$tmp/run/w.pb.gz" -- "$workload" children "$tmp/pids" >/dev/null 2>err ||
  fail "run of the forking workload: $(cat err)"
[ "$(ls run | wc -l)" -ge 2 ] || fail "the forking workload wrote fewer than 2 profiles: $(ls run)"
"$culpert" merge -o run.pb.gz run 2>err || fail "merge of a run: $(cat err)"
"$culpert" report --top 0 run | sed 1d >want.txt
"$culpert" report --top 0 run.pb.gz | sed 1d | cmp -s - want.txt ||
  fail "merged run report differs: $(diff want.txt -)"
if command -v go >/dev/null 2>&1; then
  total_dir=0
  for f in run/*; do
    t=$(go tool pprof -raw "$f" 2>/dev/null | awk '/^Samples:/{s=1;next} s&&/^ *[0-9]/{n+=$2} /^Locations/{s=0} END{print n+0}')
    total_dir=$((total_dir + t))
  done
  total=$(go tool pprof -raw "run.pb.gz" 2>/dev/null | awk '/^Samples:/{s=1;next} s&&/^ *[0-9]/{n+=$2} /^Locations/{s=0} END{print n+0}')
  [ "$total" -gt 0 ] && [ "$total" -eq "$total_dir" ] ||
    fail "go tool pprof: merged alloc_space $total, the files' sum $total_dir"
fi

# 6. upload of several files or a directory merges them first.
mkdir arch
"$culpert" upload --endpoint arch --commit-sha abc1234 --branch main d >up.json 2>err ||
  fail "upload of a directory: $(cat err)"
has err "uploaded d (2 profiles merged) as commit abc1234 on branch main" || fail "upload of a directory: $(cat err)"
"$culpert" pull --endpoint arch --sha abc1234 -o pulled.pb.gz 2>/dev/null || fail "pull after a directory upload"
cmp -s pulled.pb.gz ab.pb.gz || fail "the uploaded directory is not the merge of its files"
"$culpert" upload --endpoint arch --commit-sha abc1235 --branch main a.pb.gz b.pb.gz >/dev/null 2>err ||
  fail "upload of two files: $(cat err)"
has err "uploaded a.pb.gz ... (2 profiles merged) as commit abc1235" || fail "upload of two files: $(cat err)"
mkdir one && cp a.pb.gz one/
"$culpert" upload --endpoint arch --commit-sha abc1237 --branch main one >/dev/null 2>err ||
  fail "upload of a directory of one profile: $(cat err)"
has err "uploaded one (1 profile) as commit abc1237" || fail "upload of a directory of one profile: $(cat err)"
"$culpert" upload --endpoint arch --commit-sha abc1236 --branch main a.pb.gz c.pb.gz >/dev/null 2>err
[ $? -eq 2 ] && has err "sample rates differ" || fail "upload of different rates: $(cat err)"
[ ! -e arch/default/abc1236.pb.gz ] && ! ls -R arch | grep -q abc1236 || fail "a refused upload stored something"

if [ $failures -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "merge: all checks passed"
