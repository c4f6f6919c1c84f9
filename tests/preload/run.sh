#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# run.sh CASE: run one preload integration case. Environment (set by
# ctest): LIB (libculpert.so), BIN (this folder in the build tree), PLUGIN
# (wl_plugin.so), GO (go binary or empty), JEMALLOC (libjemalloc.so.2 or
# empty), TCMALLOC (libtcmalloc_minimal.so.4 or empty), RUSTC (rustc or
# empty), PYTHON (python3 or empty). Exit 0 pass, 1 fail, 77 skipped.
set -u
case_name=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/culpert-preload.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fails=0

fail() {
  echo "FAIL [$case_name]: $*" >&2
  fails=$((fails + 1))
}

# profile FILE: the profile as lines (see profcheck.c)
profile() {
  "$BIN/profcheck" "$1" || fail "profcheck could not read $1"
}

# totals FILE SPAN: "AO AS IO IS N" summed over samples whose span path is SPAN
totals() {
  profile "$1" | awk -v span="span=$2" '$1 == "sample" && $7 == span {
      ao += $2; as += $3; io += $4; is += $5; n += $6 }
      END { printf "%d %d %d %d %d\n", ao, as, io, is, n }'
}

expect_totals() { # FILE SPAN "AO AS IO IS N"
  local got
  got=$(totals "$1" "$2")
  [ "$got" = "$3" ] || fail "$1 span $2: got '$got', want '$3'"
}

expect_line() { # TEXT PATTERN (grep -E) WHAT
  printf '%s\n' "$1" | grep -Eq -- "$2" || fail "$3: no line matching '$2' in:
$1"
}

expect_no_line() {
  if printf '%s\n' "$1" | grep -Eq -- "$2"; then fail "$3: unexpected line matching '$2'"; fi
}

run_pre() { # run a command with libculpert preloaded
  env LD_PRELOAD="$LIB" "$@"
}

case "$case_name" in
exports)
  # Only the allocation functions, sigaction and signal (which hide
  # CULPERT_WRITE_ON_SIGNAL's handlers), _exit, _Exit and quick_exit (which
  # write the exit profile first), the exec family (which writes the
  # image's profile first), dlclose (which notes what it unloads) and
  # culpert_* leave the library, and
  # libunwind is not a dependency (it is dlopened RTLD_LOCAL).
  syms=$(nm -D --defined-only "$LIB" | awk '{print $3}' | sed 's/@.*//' | sort)
  allowed='^(malloc|free|calloc|realloc|reallocarray|posix_memalign|aligned_alloc|memalign|valloc|pvalloc|malloc_usable_size|sigaction|signal|_exit|_Exit|quick_exit|exec(ve|v|vp|vpe|l|le|lp|veat)|fexecve|dlclose|culpert_[a-z_]+)$'
  bad=$(printf '%s\n' "$syms" | grep -Ev "$allowed")
  [ -z "$bad" ] || fail "unexpected exports: $bad"
  for s in malloc free calloc realloc reallocarray posix_memalign aligned_alloc memalign valloc \
    pvalloc malloc_usable_size sigaction signal _exit _Exit quick_exit execve execv execvp execvpe \
    execl execle execlp fexecve execveat dlclose culpert_span_enter culpert_span_exit \
    culpert_span_current culpert_span_enter_child_of culpert_snapshot_write culpert_snapshot culpert_is_active; do
    printf '%s\n' "$syms" | grep -qx "$s" || fail "missing export $s"
  done
  if readelf -d "$LIB" | grep -q 'libunwind'; then fail "libunwind is a DT_NEEDED of $LIB"; fi
  ;;
weak)
  # Built without -lculpert: runs normally, spans do nothing, no profile.
  out=$("$BIN/wl_basic") || fail "wl_basic failed without libculpert"
  expect_line "$out" '^active=0$' "plain run"
  expect_line "$out" '^failures=0$' "plain run"
  [ -z "$(ls culpert.*.pb.gz 2>/dev/null)" ] || fail "a profile was written without libculpert"
  ;;
linked)
  out=$(CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/l.pb.gz" "$BIN/wl_basic_linked" 2>err) ||
    fail "wl_basic_linked failed"
  expect_line "$out" '^active=1$' "linked run"
  expect_totals l.pb.gz handle_request/parse "100 100000 40 40000 100"
  ;;
basic_exact | basic_fp)
  mode=libunwind
  [ "$case_name" = basic_fp ] && mode=fp
  before=$(date +%s%N)
  out=$(CULPERT_STACK=$mode CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/b.pb.gz" \
    run_pre "$BIN/wl_basic" 2>err) || fail "wl_basic failed: $(cat err)"
  after=$(date +%s%N)
  expect_line "$out" '^active=1$' "preloaded run"
  expect_line "$out" '^span outside=0$' "preloaded run"
  expect_line "$(cat err)" "^culpert: wrote profile to $work/b.pb.gz \\([0-9]+ samples?\\)$" "stderr"
  expect_totals b.pb.gz handle_request/parse "100 100000 40 40000 100"
  p=$(profile b.pb.gz)
  expect_line "$p" "^comment culpert.stack=$mode$" "comments"
  expect_line "$p" '^comment culpert.rate=0$' "comments"
  expect_line "$p" '^period 0$' "period"
  expect_line "$p" '^comment culpert.span_overflow=6$' "overflow count"
  expect_line "$p" '^comment culpert.span_underflow=1$' "underflow count"
  expect_line "$p" '^comment culpert.dropped_samples=0$' "dropped samples"
  # the profile covers the program's run: it starts after the run began
  # and is taken before it ended, a positive time later
  read -r taken covers < <(printf '%s\n' "$p" | awk '$1 == "time" {t = $2} $1 == "duration" {d = $2}
    END {print t, d}')
  { [ "$covers" -gt 0 ] && [ $((taken - covers)) -ge "$before" ] && [ "$taken" -le "$after" ]; } ||
    fail "time $taken and duration $covers: not inside the run ($before to $after)"
  # in use at the peak: the 100 parse blocks, and at most a few stdio
  # buffers of the runtime's (60 KB are in use at the end)
  peak=$(printf '%s\n' "$p" | awk -F= '$1 == "comment culpert.peak_inuse_bytes" {print $2}')
  { [ -n "$peak" ] && [ "$peak" -ge 100000 ] && [ "$peak" -le 110000 ]; } ||
    fail "peak in use: got '$peak', want 100000 to 110000"
  # In libunwind mode culpert's own call-frame walk took every stack (this
  # program's code all has call-frame information); fp mode has no count.
  if [ "$mode" = libunwind ]; then
    expect_line "$p" '^comment culpert.libunwind_stacks=0$' "stacks left to libunwind"
  else
    expect_no_line "$p" '^comment culpert.libunwind_stacks=' "libunwind count in fp mode"
  fi
  # the stack starts at the allocating function: no culpert frames
  expect_line "$p" ' span=handle_request/parse frames=parse_alloc;handle_request;main' "stack"
  expect_no_line "$p" 'frames=(malloc|sample_check|malloc_slow|culpert)' "culpert frames"
  # the leaf is the line of the allocating call, also where the call is
  # the last thing on its line
  want=$(grep -n "leaf_line_alloc's allocation" "$SRC_DIR/tests/preload/wl_basic.c" | cut -d: -f1)
  expect_line "$p" " span=leaf_line frames=leaf_line_alloc;main(;| ).* leaf_line=$want\$" "leaf line"
  ;;
segment_gaps)
  # An executable whose segments leave gaps between them: glibc's
  # _dl_find_object then gives the code segment alone, without the
  # .eh_frame_hdr, and culpert's call-frame walk must still take every
  # stack instead of handing them all to libunwind.
  gaps=0 end=
  while read -r _ _ vaddr _ _ memsz _; do
    [ -n "$end" ] && [ $((vaddr)) -gt $((end + 4096)) ] && gaps=1
    end=$((vaddr + memsz))
  done < <(readelf -lW "$BIN/wl_basic_gaps" | grep '^ *LOAD ')
  [ "$gaps" = 1 ] || exit 77 # the linker did not spread the segments
  out=$(CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/g.pb.gz" run_pre "$BIN/wl_basic_gaps" \
    2>err) || fail "wl_basic_gaps failed: $(cat err)"
  expect_line "$out" '^active=1$' "preloaded run"
  expect_totals g.pb.gz handle_request/parse "100 100000 40 40000 100"
  p=$(profile g.pb.gz)
  expect_line "$p" '^comment culpert.libunwind_stacks=0$' "stacks left to libunwind"
  expect_line "$p" ' span=handle_request/parse frames=parse_alloc;handle_request;main' "stack"
  ;;
no_libunwind)
  # libunwind unloadable: stacks fall back to frame pointers, and the
  # profile says so. Hides the library in a private mount namespace; skips
  # where that is not allowed.
  so=$(readlink -f /usr/lib/x86_64-linux-gnu/libunwind.so.8 2>/dev/null) || exit 77
  [ -f "$so" ] || exit 77
  unshare -m true 2>/dev/null || exit 77
  unshare -m bash -c 'mount --bind /dev/null "$1" || exit 77
    CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$2/nu.pb.gz" LD_PRELOAD="$3" "$4/wl_basic" >"$2/out" 2>&1' \
    _ "$so" "$work" "$LIB" "$BIN"
  rc=$?
  [ "$rc" -eq 77 ] && exit 77
  [ "$rc" -eq 0 ] || fail "wl_basic failed without libunwind: $(cat out)"
  p=$(profile nu.pb.gz)
  expect_line "$p" '^comment culpert.stack=fp$' "fallback recorded"
  expect_line "$p" ' span=handle_request/parse frames=parse_alloc;handle_request;main' "fp stack"
  ;;
realloc_aligned)
  CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/r.pb.gz" run_pre "$BIN/wl_basic" >out 2>err ||
    fail "wl_basic failed: $(cat out err)"
  # realloc counts the new size as a new allocation and releases the old,
  # also when it moves the block; a realloc that fails leaves its block in
  # use
  expect_totals r.pb.gz handle_request/resize "3 4300 1 4000 3"
  expect_totals r.pb.gz moved "2 8888 1 8000 2"
  expect_totals r.pb.gz realloc_failed "1 600 1 600 1"
  expect_totals r.pb.gz aligned "9 13456 9 13456 9"
  ;;
failed_allocations)
  # Allocations that fail (sizes above 2^62, some above INT64_MAX) leave a
  # valid countdown: at rate 0 the 1000 blocks after them are each
  # recorded, and at 4K sampling goes on as before (three failed
  # reallocs of 2^62 bytes once wrapped the count and ended sampling; a
  # failed malloc(SIZE_MAX - 4095) added 4096 bytes to it).
  CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/f0.pb.gz" run_pre "$BIN/wl_basic" --failures \
    >out 2>err || fail "wl_basic --failures failed: $(cat out err)"
  expect_line "$(cat out)" '^failures=0$' "every huge allocation failed"
  expect_totals f0.pb.gz after_failures "1000 4096000 0 0 1000"
  CULPERT_SAMPLE_RATE=4K CULPERT_SEED=7 CULPERT_OUTPUT="$work/f4.pb.gz" \
    run_pre "$BIN/wl_basic" --failures >out 2>err || fail "wl_basic --failures failed at 4K"
  # each 4 KiB block is sampled with probability 1 - 1/e: about 632
  n=$(totals f4.pb.gz after_failures | awk '{print $5}')
  [ "$n" -ge 550 ] && [ "$n" -le 720 ] || fail "at 4K, $n of 1000 blocks sampled after the failures"
  ;;
errno)
  # a tiny rate samples most calls: errno, alignment and zeroing still hold
  out=$(CULPERT_SAMPLE_RATE=16 CULPERT_QUIET=1 run_pre "$BIN/wl_basic") || fail "wl_basic: $out"
  expect_line "$out" '^failures=0$' "errno/alignment checks"
  ;;
snapshot)
  out=$(CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/final.pb.gz" \
    run_pre "$BIN/wl_basic" --snapshot "$work/snap.pb.gz" 2>err) || fail "wl_basic failed"
  expect_line "$out" '^snapshot=0 buffer=0 gzip=1 empty=-22$' "snapshot calls"
  expect_line "$(cat err)" "wrote profile to $work/snap.pb.gz" "stderr"
  expect_line "$(cat err)" "wrote profile to $work/final.pb.gz" "stderr"
  expect_totals snap.pb.gz handle_request/parse "100 100000 40 40000 100"
  s1=$(profile snap.pb.gz | awk '$1=="sample"{n+=$6} END{print n+0}')
  s2=$(profile final.pb.gz | awk '$1=="sample"{n+=$6} END{print n+0}')
  [ "$s1" -gt 0 ] && [ "$s2" -ge "$s1" ] || fail "snapshots not cumulative: $s1 then $s2"
  ls "$work"/*.tmp.* >/dev/null 2>&1 && fail "temporary file left behind"
  ;;
threads)
  out=$(CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/t.pb.gz" run_pre "$BIN/wl_threads" 2>err) ||
    fail "wl_threads failed: $(cat err)"
  expect_line "$out" '^done 1$' "wl_threads"
  expect_totals t.pb.gz pool/job "200 400000 0 0 200"
  expect_totals t.pb.gz churn "2000 200000 0 0 2000"
  # a chain of 5000 hand-offs keeps every link (it was cut at 4096, the
  # top written as a root)
  CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/t.pb.gz" run_pre "$BIN/wl_threads" --relay \
    >/dev/null 2>err || fail "wl_threads --relay failed: $(cat err)"
  relays=$(profile t.pb.gz | awk '$2 == 1 && $3 == 777 { print $7 }' | tr '/' '\n' | grep -c '^\(span=\)\?relay$')
  [ "$relays" = 5000 ] || fail "the 777-byte block lies under $relays relay spans, not 5000"
  ;;
exit_race)
  # exit() while other threads allocate: clean exit, complete profile
  for mode in libunwind fp; do
    for i in 1 2 3 4 5; do
      rm -f x.pb.gz
      out=$(CULPERT_STACK=$mode CULPERT_SAMPLE_RATE=4K CULPERT_OUTPUT="$work/x.pb.gz" \
        run_pre "$BIN/wl_exit_race" 2>err)
      rc=$?
      [ "$rc" -eq 0 ] || fail "exit status $rc ($mode, run $i): $(cat err)"
      expect_line "$out" '^exiting$' "wl_exit_race"
      n=$(profile x.pb.gz | awk '$1=="sample"{n+=$6} END{print n+0}')
      [ "$n" -gt 0 ] || fail "empty or unreadable profile ($mode, run $i)"
    done
  done
  ;;
snapshot_during_exit)
  # exit() while a thread keeps calling culpert_snapshot_write: no write
  # begins after the exit profile, since the process ends at any moment
  # and would cut it off (its temporary file was left behind). The flush
  # of stdout into a pipe read only after a second keeps the process
  # alive after culpert's handler, so such a write would have time to end.
  CULPERT_QUIET=1 CULPERT_SAMPLE_RATE=4K CULPERT_OUTPUT="$work/x.pb.gz" \
    run_pre "$BIN/wl_exit_race" --snapshots "$work" 2>err | { sleep 1; tail -n 1 >out; }
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || fail "exit status $rc: $(cat err)"
  expect_line "$(cat out)" '^exiting$' "wl_exit_race --snapshots"
  profile x.pb.gz >/dev/null
  later=$(find . -name 'snap.*' -newer x.pb.gz | wc -l)
  [ "$later" -eq 0 ] || fail "$later snapshots written after the exit profile"
  ls ./*.tmp.* >/dev/null 2>&1 && fail "temporary files left: $(ls ./*.tmp.*)"
  ;;
small_stack)
  # Threads with 16 KiB stacks, 6 KiB of it in use at their first
  # allocations and samples: the program has room without culpert, and
  # must have it with (the slow path keeps its stack array out of the
  # real allocator's way, sizes it for the default depth, and never
  # resolves a symbol lazily).
  "$BIN/wl_small_stack" >want 2>/dev/null || fail "wl_small_stack fails without culpert"
  for mode in libunwind fp; do
    for rate in 0 4K 512K; do
      rm -f s.pb.gz
      CULPERT_STACK=$mode CULPERT_SAMPLE_RATE=$rate CULPERT_QUIET=1 CULPERT_OUTPUT="$work/s.pb.gz" \
        run_pre "$BIN/wl_small_stack" >out 2>err
      rc=$?
      [ $rc -eq 0 ] || fail "$mode at $rate: exit status $rc: $(cat err)"
      cmp -s out want || fail "$mode at $rate: output $(cat out), want $(cat want)"
      [ $rc -eq 0 ] && { profile s.pb.gz >/dev/null; }
    done
  done
  # Where culpert writes a profile on such a thread (exit, _exit, an ending
  # signal, an exec, a snapshot), the write runs on a stack of its own: it
  # needs tens of KiB, and the thread crashed with SIGSEGV (or, for _exit,
  # an ending signal and an exec, its forked writer did, and no profile
  # was written).
  for end in exit:3 _exit:4 term:143 exec:0 snapshot:0; do
    how=${end%%:*} want=${end#*:}
    rm -f s.pb.gz s.pb.gz.* snap.pb.gz
    CULPERT_WRITE_ON_SIGNAL=1 CULPERT_QUIET=1 CULPERT_OUTPUT="$work/s.pb.gz" \
      run_pre "$BIN/wl_small_stack" "$how" "$work/snap.pb.gz" >out 2>err
    rc=$?
    [ $rc -eq "$want" ] || fail "ending with $how on a small stack: exit status $rc, want $want: $(cat err)"
    grep -q culpert err && fail "ending with $how on a small stack: $(cat err)"
    case $how in
    exec) written=s.pb.gz.exec1 ;;
    snapshot) written=snap.pb.gz ;;
    *) written=s.pb.gz ;;
    esac
    if [ -f "$written" ]; then profile "$written" >/dev/null; else fail "ending with $how on a small stack: no $written: $(ls)"; fi
  done
  # Under `ulimit -s 32`: the main thread, which writes the exit profile,
  # and the thread of CULPERT_INTERVAL, whose default stack is that small
  # too (it rewrites the file after a second).
  rm -f s.pb.gz
  (ulimit -s 32 && CULPERT_INTERVAL=1 CULPERT_OUTPUT="$work/s.pb.gz" \
    run_pre "$BIN/wl_small_stack" wait >out 2>err)
  rc=$?
  [ $rc -eq 0 ] || fail "under ulimit -s 32: exit status $rc, want 0: $(cat err)"
  [ -f s.pb.gz ] && profile s.pb.gz >/dev/null || fail "under ulimit -s 32: no profile"
  [ "$(grep -c '^culpert: wrote profile' err)" -eq 2 ] ||
    fail "under ulimit -s 32: want a rewrite and the exit profile: $(cat err)"
  ;;
signal_during_exit_write)
  # CULPERT_WRITE_ON_SIGNAL=1 and SIGTERM while the exit profile is being
  # written (at rate 0 with four threads allocating, that write takes a
  # while): the handler waits for it, so the profile is whole and no
  # temporary file is left; the program then ends by the signal (143).
  for i in 1 2 3 4 5 6 7 8; do
    rm -f x.pb.gz x.pb.gz.tmp.* o
    CULPERT_QUIET=1 CULPERT_SAMPLE_RATE=0 CULPERT_WRITE_ON_SIGNAL=1 CULPERT_OUTPUT="$work/x.pb.gz" \
      LD_PRELOAD="$LIB" "$BIN/wl_exit_race" >o 2>err &
    pid=$!
    for _ in $(seq 1 20000); do
      grep -q exiting o 2>/dev/null && break
      kill -0 $pid 2>/dev/null || break
    done
    kill -TERM $pid 2>/dev/null
    wait $pid
    rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 143 ] || fail "run $i: exit status $rc: $(cat err)"
    if [ ! -f x.pb.gz ]; then
      fail "run $i: no exit profile after SIGTERM during its write (exit status $rc)"
    else
      n=$(profile x.pb.gz | awk '$1=="sample"{n+=$6} END{print n+0}')
      [ "$n" -gt 0 ] || fail "run $i: empty or unreadable profile"
    fi
    ls x.pb.gz.tmp.* >/dev/null 2>&1 && fail "run $i: temporary file left: $(ls)"
  done
  ;;
signal_before_exit)
  # CULPERT_WRITE_ON_SIGNAL=1 and SIGTERM just before the program exits:
  # the signal's handler holds the write lock while its forked copy
  # writes the exit profile, so the program's own exit waits instead of
  # ending the process with that copy still writing (it then replaced
  # the profile, and left its temporary file, after the process was gone).
  for i in 1 2 3 4 5 6 7 8; do
    rm -f x.pb.gz x.pb.gz.tmp.*
    CULPERT_QUIET=1 CULPERT_SAMPLE_RATE=0 CULPERT_WRITE_ON_SIGNAL=1 CULPERT_OUTPUT="$work/x.pb.gz" \
      run_pre "$BIN/wl_exit_race" --signal-first >o 2>err
    rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 143 ] || fail "run $i: exit status $rc: $(cat err)"
    if [ ! -f x.pb.gz ]; then
      fail "run $i: no exit profile"
      continue
    fi
    ended=$(cksum <x.pb.gz)
    ls x.pb.gz.tmp.* >/dev/null 2>&1 && fail "run $i: temporary file left: $(ls x.pb.gz.tmp.*)"
    sleep 0.3
    [ "$(cksum <x.pb.gz)" = "$ended" ] || fail "run $i: the profile changed after the program ended"
    profile x.pb.gz >/dev/null
  done
  ;;
bad_frame_pointers)
  out=$(CULPERT_STACK=fp CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/bf.pb.gz" \
    run_pre "$BIN/wl_badfp" 2>err) || fail "wl_badfp failed: $(cat err)"
  expect_line "$out" '^ok=1$' "wl_badfp"
  expect_totals bf.pb.gz badfp "5 500 5 500 5"
  # optimised code without frame pointers (libstdc++) must not crash either
  CULPERT_STACK=fp CULPERT_SAMPLE_RATE=0 CULPERT_QUIET=1 CULPERT_OUTPUT="$work/bf2.pb.gz" \
    run_pre "$BIN/wl_cxx" >/dev/null 2>&1 || fail "wl_cxx failed under CULPERT_STACK=fp"
  ;;
fork)
  out=$(CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/f.%p.pb.gz" run_pre "$BIN/wl_fork" 20 \
    2>err) || fail "wl_fork failed: $(cat err)"
  parent=$(ls f.*.pb.gz | wc -l)
  [ "$parent" -eq 22 ] || fail "want 22 profiles (parent, 20 forks, 1 exec), got $parent"
  idle=$(printf '%s\n' "$out" | awk '$1=="idle"{print $2}')
  [ -n "$idle" ] || fail "no idle child: $out"
  [ -n "$idle" ] && [ -f "f.$idle.pb.gz" ] && fail "the child that sampled nothing wrote a profile"
  first=$(printf '%s\n' "$out" | awk '$1=="child"{print $2; exit}')
  [ -f "f.$first.pb.gz" ] || fail "no profile for child $first"
  expect_totals "f.$first.pb.gz" child_work "5 15000 5 15000 5"
  expect_totals "f.$first.pb.gz" parent_work "0 0 0 0 0"
  expect_line "$(profile "f.$first.pb.gz")" "^comment culpert.pid=$first$" "child pid comment"
  # the child counts its own span overflows and underflows (none), not
  # the parent's
  expect_line "$(profile "f.$first.pb.gz")" '^comment culpert.span_overflow=0$' "child overflow count"
  expect_line "$(profile "f.$first.pb.gz")" '^comment culpert.span_underflow=0$' "child underflow count"
  main_file=$(ls f.*.pb.gz | while read -r f; do
    profile "$f" | grep -q 'span=parent_work' && echo "$f"; done)
  [ "$(printf '%s\n' "$main_file" | grep -c .)" -eq 1 ] || fail "parent_work in: $main_file"
  expect_totals "$main_file" parent_work "10 10000 10 10000 10"
  expect_totals "$main_file" child_work "0 0 0 0 0"
  expect_line "$(profile "$main_file")" '^comment culpert.span_overflow=1$' "parent overflow count"
  expect_line "$(profile "$main_file")" '^comment culpert.span_underflow=1$' "parent underflow count"
  # the child's profile covers the child: it starts at the fork, after the
  # parent's started
  start() {
    local t d
    read -r t d < <(profile "$1" | awk '$1 == "time" {t = $2} $1 == "duration" {d = $2} END {print t, d}')
    echo $((t - d))
  }
  [ "$(start "f.$first.pb.gz")" -gt "$(start "$main_file")" ] ||
    fail "the child's profile starts at $(start "f.$first.pb.gz"), not after the parent's $(start "$main_file")"
  ;;
fork_during_snapshot)
  # culpert_snapshot() on two threads while the main thread forks: no
  # child may inherit the loader's lock held by a profile being encoded
  # (one in about ten waited for it forever at its first sample).
  out=$(CULPERT_QUIET=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/s.pb.gz" \
    timeout 100 env LD_PRELOAD="$LIB" "$BIN/wl_fork" --snapshots 80 2>err)
  rc=$?
  [ $rc -eq 0 ] || fail "wl_fork --snapshots exited $rc: $(cat err)"
  expect_line "$out" '^forks 80 stuck 0$' "forks during snapshots"
  [ $rc -eq 0 ] && profile s.pb.gz >/dev/null
  ;;
fork_threads)
  # Eight threads forking at once: each fork holds the lock profiles are
  # written under, and lets it go. One flag shared by every thread once
  # said whether a fork took it: a second fork cleared it while the first
  # held the lock, which then stayed held (every later fork waited 60 s
  # for it, and culpert_snapshot_write and the rewrites forever).
  out=$(CULPERT_QUIET=1 CULPERT_SAMPLE_RATE=4K CULPERT_OUTPUT="$work/t.pb.gz" \
    timeout 30 env LD_PRELOAD="$LIB" "$BIN/wl_fork" --threads 100 "$work/snap.pb.gz" 2>err)
  rc=$?
  [ $rc -eq 0 ] || fail "wl_fork --threads exited $rc (124: still forking after 30 s): $(cat err)"
  expect_line "$out" '^forks 800 snapshot 0$' "forks on eight threads, then a snapshot"
  [ $rc -eq 0 ] && profile snap.pb.gz >/dev/null
  ;;
fork_during_exit)
  # A thread forks while the main thread's exit() writes the exit profile.
  # exit() had dropped culpert's fork handlers with libculpert's destructor
  # by then: the child inherited the lock the profile is written under,
  # held, and its culpert_snapshot_write waited for it forever (SIGALRM
  # ends such a child after 5 s; 2 to 4 runs of 4 had one). A fork now
  # waits for that write (the process mostly ends first), and a child
  # forked after it gets -EAGAIN (-11).
  for i in 1 2 3 4; do
    mkdir -p "d$i"
    out=$(CULPERT_QUIET=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/d$i/x.pb.gz" \
      timeout 60 env LD_PRELOAD="$LIB" "$BIN/wl_fork" --during-exit "$work/d$i" 2>err)
    rc=$?
    [ $rc -eq 0 ] || fail "wl_fork --during-exit exited $rc (run $i): $(cat err)"
    started=$(printf '%s\n' "$out" | grep -c ' start$')
    done=$(printf '%s\n' "$out" | grep -Ec ' snapshot (0|-11)$')
    [ "$started" = "$done" ] || fail "$started children started, $done wrote a snapshot or were refused (run $i): $out"
    profile "d$i/x.pb.gz" >/dev/null
  done
  ;;
fork_loader_busy | fork_in_loader)
  # fork_loader_busy: a fork while another thread iterates the loader's
  # list. glibc leaves the loader's write lock held in the child, which
  # then waited for it at its first sample (the unwind cache misses on code
  # the parent never sampled) until killed; the program itself never
  # touches the loader there. fork_in_loader: a fork from inside a
  # dl_iterate_phdr callback, the lock held under the forking thread's old
  # id, for good: culpert finds it held and stays away from the loader (the
  # child's stacks, its objects from the loader's r_debug list).
  if [ "$case_name" = fork_loader_busy ]; then mode=--loader-busy tag=loader_busy; else mode=--in-loader tag=in_loader; fi
  out=$(CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/l.%p.pb.gz" \
    timeout 60 env LD_PRELOAD="$LIB" "$BIN/wl_fork" "$mode" 2>err)
  rc=$?
  [ $rc -eq 0 ] || fail "wl_fork $mode exited $rc: $(cat err)"
  child=$(printf '%s\n' "$out" | awk -v tag="$tag" '$1 == tag && $4 == 0 {print $2}')
  if [ -z "$child" ]; then
    fail "the child of wl_fork $mode did not exit 0 (-1: stuck, killed after 10 s): $out"
  else
    expect_totals "l.$child.pb.gz" child_work "5 15000 5 15000 5"
    [ "$case_name" = fork_loader_busy ] || profile "l.$child.pb.gz" | grep -q 'fork_here' ||
      fail "the child's stacks do not reach fork_here: $(profile "l.$child.pb.gz" | head -20)"
  fi
  ;;
immediate_exit)
  # _exit, _Exit and quick_exit write the exit profile first, also from a
  # signal handler on a thread that was allocating; a vfork child writes
  # nothing, nor does a fork child that sampled nothing.
  out=$(CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/q.%p.pb.gz" \
    timeout 60 env LD_PRELOAD="$LIB" "$BIN/wl_fork" --immediate-exit 2>err)
  rc=$?
  [ $rc -eq 0 ] || fail "wl_fork --immediate-exit exited $rc, want 0: $(cat err)"
  for want in 3 4 6 7; do
    child=$(printf '%s\n' "$out" | awk -v s="$want" '$1 == "exit" && $4 == s {print $2}')
    if [ -z "$child" ]; then
      fail "no fork child ended with status $want: $out"
    elif [ ! -f "q.$child.pb.gz" ]; then
      fail "the child ending with status $want wrote no profile: $(ls) $(cat err)"
    else
      expect_totals "q.$child.pb.gz" child_work "5 15000 5 15000 5"
      expect_line "$(cat err)" "^culpert: wrote profile to $work/q\.$child\.pb\.gz " \
        "the stderr line for the child ending with status $want"
    fi
  done
  vf=$(printf '%s\n' "$out" | awk '$1 == "vfork" && $4 == 5 {print $2}')
  [ -n "$vf" ] || fail "the vfork child did not end with status 5: $out"
  [ -n "$vf" ] && [ -f "q.$vf.pb.gz" ] && fail "the vfork child wrote a profile"
  idle=$(printf '%s\n' "$out" | awk '$1 == "exit" && $4 == 8 {print $2}')
  [ -n "$idle" ] || fail "no fork child ended with status 8: $out"
  [ -n "$idle" ] && [ -f "q.$idle.pb.gz" ] && fail "the child that sampled nothing wrote a profile"
  main_file=$(ls q.*.pb.gz | while read -r f; do
    profile "$f" | grep -q 'span=parent_work' && echo "$f"; done)
  [ "$(printf '%s\n' "$main_file" | grep -c .)" -eq 1 ] || fail "parent_work in: $main_file"
  expect_totals "$main_file" parent_work "10 10000 10 10000 10"
  [ "$(ls q.*.pb.gz | wc -l)" -eq 5 ] || fail "want 5 profiles (program, 4 children): $(ls)"
  ls ./*.tmp.* >/dev/null 2>&1 && fail "temporary files left: $(ls)"
  ;;
teardown_frees)
  # Blocks freed as the process ends (by a linked library's destructor,
  # the program's destructor and atexit handler) are not in use in the exit
  # profile, which is written after all of them; only the block kept for
  # good is. quick_exit runs none of those, only the at_quick_exit
  # handlers, before which the profile is not written either.
  inuse() { # FILE SPAN: in-use objects and bytes
    totals "$1" "$2" | awk '{print $3, $4}'
  }
  CULPERT_QUIET=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/t.pb.gz" run_pre \
    "$BIN/wl_teardown" exit >out 2>err || fail "wl_teardown exit exited $?: $(cat err)"
  for span in lib_cache dtor atexit quick; do
    got=$(inuse t.pb.gz $span)
    [ "$got" = "0 0" ] || fail "exit: span $span still in use (objects, bytes: $got)"
  done
  expect_totals t.pb.gz kept "1 7000 1 7000 1"
  CULPERT_QUIET=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/q.pb.gz" run_pre \
    "$BIN/wl_teardown" quick >out 2>err
  rc=$?
  [ $rc -eq 3 ] || fail "wl_teardown quick exited $rc, want 3: $(cat err)"
  got=$(inuse q.pb.gz quick)
  [ "$got" = "0 0" ] || fail "quick_exit: span quick still in use (objects, bytes: $got)"
  [ "$(inuse q.pb.gz lib_cache)" = "1 50000" ] || fail "quick_exit: lib_cache: $(inuse q.pb.gz lib_cache)"
  expect_totals q.pb.gz kept "1 7000 1 7000 1"
  ;;
own_env)
  # A program with getenv and setenv of its own, as bash has (over a table
  # of variables main fills; before that, getenv reads environ unless
  # setenv has made the table). culpert's setenv of CULPERT_ROOT_PID made
  # that table before culpert read its settings, so it read none: the
  # profile went to culpert.wl_own_env.PID.pb.gz at the default rate (a
  # bash under 'culpert run -o FILE' wrote no FILE). What culpert sets
  # still goes through the program's setenv, for its commands to inherit.
  # culpert sets CULPERT_ROOT_PID with the C library's setenv, not the
  # program's, which made its table early and left every constructor before
  # main without an environment (WL_OWN_ENV_PROBE unread); main gets it in
  # its envp all the same.
  out=$(WL_OWN_ENV_PROBE=set CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/e.%p.pb.gz" \
    run_pre "$BIN/wl_own_env" 2>err) || fail "wl_own_env failed: $(cat err)"
  pid=$(printf '%s\n' "$out" | awk '$1 == "pid" {print $2}')
  expect_line "$out" "^pid $pid root $pid\$" "CULPERT_ROOT_PID in the program's own table"
  expect_line "$out" '^before_main set$' "the environment before main"
  ls culpert.wl_own_env.*.pb.gz >/dev/null 2>&1 && fail "the profile went to the default name: $(ls)"
  if [ -z "$pid" ] || [ ! -f "e.$pid.pb.gz" ]; then
    fail "no profile at CULPERT_OUTPUT (e.$pid.pb.gz): $(ls)"
  else
    expect_line "$(profile "e.$pid.pb.gz")" '^comment culpert.rate=0$' "CULPERT_SAMPLE_RATE read"
    expect_line "$(profile "e.$pid.pb.gz")" '^sample 5 15000 5 15000 5 span=- frames=main;' \
      "main's five blocks, every allocation recorded"
  fi
  ;;
python_exit)
  # Python's multiprocessing workers (fork start method) end with os._exit,
  # and so does this program: every process writes its own profile, once.
  # Each worker allocates as it starts: on a busy machine one worker may
  # take every task, and the other would sample nothing and write nothing.
  [ -n "${PYTHON:-}" ] && [ -x "$PYTHON" ] || exit 77
  # the interpreter itself, not a wrapper script (pyenv's shims) that
  # would start processes of its own
  py=$("$PYTHON" -c 'import sys; print(sys.executable)') && [ -x "$py" ] || exit 77
  cat >mp.py <<'PY'
import multiprocessing as mp, os, sys
def work(n):
    return len([bytearray(65536) for _ in range(n)])
if __name__ == "__main__":
    mp.set_start_method("fork")
    pool = mp.Pool(2, initializer=work, initargs=(50,))
    print("total", sum(pool.map(work, [50] * 8)))
    pool.close()
    pool.join()
    sys.stdout.flush()
    os._exit(3)
PY
  out=$(CULPERT_SAMPLE_RATE=64K CULPERT_OUTPUT="$work/py.pb.gz" timeout 60 env LD_PRELOAD="$LIB" \
    "$py" mp.py 2>err)
  rc=$?
  [ $rc -eq 3 ] || fail "python exited $rc, want 3 (os._exit): $(cat err)"
  expect_line "$out" '^total 400$' "the pool's result"
  [ -f py.pb.gz ] || fail "no profile of the program itself (os._exit): $(ls)"
  workers=$(ls py.pb.gz.* 2>/dev/null | grep -vc tmp)
  [ "$workers" -eq 2 ] || fail "want 2 worker profiles, got $workers: $(ls) $(cat err)"
  for f in py.pb.gz.*; do
    n=$(profile "$f" | awk '$1 == "sample" {n += $6} END {print n + 0}')
    [ "$n" -gt 0 ] || fail "$f holds no samples"
  done
  [ "$(grep -c '^culpert: wrote profile to ' err)" -eq 3 ] ||
    fail "want one stderr line per process: $(cat err)"
  ;;
exec)
  # Each image of a process that execs writes its own profile: the ones
  # before an exec as <name>.exec<N>, the last one <name>; an exec that
  # fails leaves no file; a vfork child writes nothing, nor does a program
  # below the first one that sampled nothing (the vfork child's true).
  printf 'not a program\n' >bogus && chmod +x bogus
  out=$(PATH="$BIN:$PATH" CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/e.%p.pb.gz" timeout 60 \
    env LD_PRELOAD="$LIB" "$BIN/wl_exec" "$work/bogus" 2>err)
  rc=$?
  [ $rc -eq 0 ] || fail "wl_exec exited $rc, want 0: $(cat err)"
  expect_line "$out" '^failed ENOENT$' "the exec of a missing file"
  expect_line "$out" '^failed ENOEXEC$' "the exec of a file that is no program"
  expect_line "$out" '^mark=yes$' "execle's environment"
  expect_line "$out" '^fork [0-9]+ status 0$' "the fork child's exec"
  expect_line "$out" '^vfork [0-9]+ status 0$' "the vfork child's exec"
  me=$(ls e.*.pb.gz.exec1 2>/dev/null | sed -n 's/^e\.\([0-9]*\)\.pb\.gz\.exec1$/\1/p' |
    while read -r p; do [ -f "e.$p.pb.gz.exec2" ] && echo "$p"; done)
  if [ -z "$me" ]; then
    fail "no e.PID.pb.gz.exec1 and .exec2: $(ls) $(cat err)"
  else
    expect_totals "e.$me.pb.gz.exec1" first_image "4 4000 4 4000 4"
    expect_totals "e.$me.pb.gz.exec1" after_failed "2 1000 2 1000 2"
    n=$(profile "e.$me.pb.gz.exec1" | awk '$1 == "sample" && $7 == "span=busy" {n += $6}
      END {print n + 0}')
    [ "$n" -gt 0 ] || fail "the allocating thread's samples are missing"
    expect_totals "e.$me.pb.gz.exec2" second_image "3 6000 3 6000 3"
    expect_totals "e.$me.pb.gz.exec2" first_image "0 0 0 0 0"
    expect_totals "e.$me.pb.gz" third_image "5 1500 5 1500 5"
    expect_totals "e.$me.pb.gz" second_image "0 0 0 0 0"
    [ -f "e.$me.pb.gz.exec3" ] && fail "a third .exec file (the failed exec's was not removed?)"
    expect_line "$(cat err)" "^culpert: the exec failed \(Exec format error\): removed $work/e\.$me\.pb\.gz\.exec1 again" \
      "the line for the failed exec"
    # an exec whose file is not there (by path, or by name in PATH) writes
    # no file, so it has none to remove either
    expect_no_line "$(cat err)" "the exec failed \(No such file or directory\)" \
      "an exec of a missing program"
    for f in "e.$me.pb.gz.exec1" "e.$me.pb.gz.exec2" "e.$me.pb.gz"; do
      expect_line "$(cat err)" "^culpert: wrote profile to $work/$f " "the stderr line for $f"
    done
  fi
  child=$(printf '%s\n' "$out" | awk '$1 == "fork" {print $2}')
  if [ -n "$child" ]; then
    expect_totals "e.$child.pb.gz.exec1" child_before_exec "2 200 2 200 2"
    expect_totals "e.$child.pb.gz" fourth_image "1 700 1 700 1"
    expect_totals "e.$child.pb.gz" child_before_exec "0 0 0 0 0"
  fi
  vf=$(printf '%s\n' "$out" | awk '$1 == "vfork" {print $2}')
  [ -n "$vf" ] && [ -f "e.$vf.pb.gz.exec1" ] && fail "the vfork child wrote a profile before its exec"
  [ -n "$vf" ] && [ -f "e.$vf.pb.gz" ] && fail "true, which sampled nothing, wrote a profile"
  [ "$(ls e.* | wc -l)" -eq 5 ] || fail "want 5 files (3 images, the fork child's before and after its exec): $(ls)"
  ls ./*.tmp.* >/dev/null 2>&1 && fail "temporary files left: $(ls)"
  # CULPERT_NO_CHILDREN=1: nothing is profiled after the exec, so the
  # image before it writes its own name
  CULPERT_NO_CHILDREN=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/nc.%p.pb.gz" timeout 60 \
    env LD_PRELOAD="$LIB" "$BIN/wl_exec" "$work/bogus" >/dev/null 2>err ||
    fail "wl_exec under CULPERT_NO_CHILDREN failed: $(cat err)"
  files=$(ls nc.* 2>/dev/null)
  if [ "$(printf '%s\n' "$files" | grep -c .)" -ne 1 ]; then
    fail "want one file under CULPERT_NO_CHILDREN=1: $files"
  else
    expect_totals "$files" first_image "4 4000 4 4000 4"
    expect_totals "$files" after_failed "2 1000 2 1000 2"
  fi
  # An exec whose environment leaves libculpert out (execle with one of the
  # program's own): nothing after it writes, so the image before it takes
  # the name itself, as under CULPERT_NO_CHILDREN.
  CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/ne.pb.gz" timeout 60 \
    env LD_PRELOAD="$LIB" "$BIN/wl_exec" noenv >/dev/null 2>err ||
    fail "wl_exec noenv failed: $(cat err)"
  files=$(ls ne.* 2>/dev/null)
  [ "$files" = ne.pb.gz ] || fail "an exec without LD_PRELOAD: want only ne.pb.gz, got: $files"
  [ -f ne.pb.gz ] && expect_totals ne.pb.gz before_noenv "2 2000 2 2000 2"
  # and says, on stderr and in the profile, which program goes unprofiled
  expect_line "$(cat err)" '^culpert: /bin/true runs without libculpert \(the LD_PRELOAD of its environment leaves it out\): it is not profiled$' \
    "the note of an exec without LD_PRELOAD"
  [ -f ne.pb.gz ] && expect_line "$(profile ne.pb.gz)" '^comment culpert.exec_unprofiled=/bin/true$' \
    "the comment of an exec without LD_PRELOAD"
  # The same when the environment preloads another library, not libculpert.
  CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/oe.pb.gz" timeout 60 \
    env LD_PRELOAD="$LIB" "$BIN/wl_exec" noenv other >/dev/null 2>err ||
    fail "wl_exec noenv other failed: $(cat err)"
  files=$(ls oe.* 2>/dev/null)
  [ "$files" = oe.pb.gz ] || fail "an exec preloading another library: want only oe.pb.gz, got: $files"
  [ -f oe.pb.gz ] && expect_totals oe.pb.gz before_noenv "2 2000 2 2000 2"
  [ -f oe.pb.gz ] && expect_line "$(profile oe.pb.gz)" '^comment culpert.exec_unprofiled=/bin/true$' \
    "the comment of an exec preloading another library"
  # An exec that keeps libculpert names nothing.
  for f in "$work"/e.*.pb.gz*; do
    expect_no_line "$(profile "$f")" '^comment culpert.exec_unprofiled=' "$f of an exec keeping libculpert"
  done
  ;;
exec_child)
  # CULPERT_OUTPUT without %p: the first process gets the name, every
  # other process appends .<pid>.
  out=$(CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/fixed.pb.gz" run_pre "$BIN/wl_fork" 2 \
    2>err) || fail "wl_fork failed: $(cat err)"
  expect_line "$out" '^exec status 0$' "exec'd child"
  ex=$(printf '%s\n' "$out" | awk '$1=="exec"&&$2!="status"{print $2}')
  expect_totals fixed.pb.gz parent_work "10 10000 10 10000 10"
  expect_totals "fixed.pb.gz.$ex" exec_child "7 4900 7 4900 7"
  # it exec'd /proc/self/exe, a link whose name says nothing: still wl_fork
  expect_line "$(profile "fixed.pb.gz.$ex")" '^comment culpert.exe=wl_fork$' \
    "the name of a program that exec'd /proc/self/exe"
  [ "$(ls fixed.pb.gz* | wc -l)" -eq 4 ] || fail "want 4 files: $(ls)"
  ;;
same_pid_elsewhere)
  # Processes with the same pid at the same time, in other pid namespaces
  # (containers: each has a pid 1) or on other machines sharing the
  # directory, never write over each other's files: a process writes over
  # a file at its name only when the file carries its own mark (its pid,
  # start, pid namespace and boot, in the gzip header). Before, a file
  # there younger than the process was taken for its own.
  # 1. Another process's profile, younger, at the name: kept; .2 written.
  CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/other.pb.gz" run_pre "$BIN/wl_basic" >out 2>err ||
    fail "wl_basic failed: $(cat err)"
  sh -c 'cp other.pb.gz "p.$$.pb.gz" && echo "$$" >sh.pid &&
    exec env LD_PRELOAD="$0" CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$1/p.%p.pb.gz" "$2"' \
    "$LIB" "$work" "$BIN/wl_basic" >out 2>err || fail "wl_basic after sh failed: $(cat err)"
  root=$(cat sh.pid)
  cmp -s other.pb.gz "p.$root.pb.gz" || fail "another process's younger p.$root.pb.gz was written over"
  expect_totals "p.$root.pb.gz.2" handle_request/parse "100 100000 40 40000 100"
  # 2. Its own file from before an exec (a snapshot), it writes over.
  rm -f sh.pid
  sh -c 'echo "$$" >sh.pid && exec env LD_PRELOAD="$0" CULPERT_SAMPLE_RATE=0 \
    CULPERT_SNAPSHOT_SIGNAL=USR2 CULPERT_OUTPUT="$1/s.%p.pb.gz" sh -c "
      kill -USR2 \$\$; i=0
      while [ ! -s s.\$\$.pb.gz ] && [ \$i -lt 3000000 ]; do i=\$((i + 1)); done
      exec \"\$0\"" "$2"' "$LIB" "$work" "$BIN/wl_basic" >out 2>err ||
    fail "wl_basic after a snapshot failed: $(cat err)"
  root=$(cat sh.pid)
  [ -e "s.$root.pb.gz.2" ] && fail "the process did not write over its own s.$root.pb.gz: $(ls s.*)"
  expect_totals "s.$root.pb.gz" handle_request/parse "100 100000 40 40000 100"
  [ -s "s.$root.pb.gz.exec1" ] || fail "no s.$root.pb.gz.exec1 from the shell: $(ls s.*)"
  # A umask of 0777 still leaves the process's own file readable by it
  # (0400): it reads its mark back at each rewrite. Before, it could not,
  # and took u.PID.pb.gz.2, .3, ... one a rewrite.
  chmod 755 "$work" && mkdir -m 777 um && mkdir -m 755 bin && cp "$LIB" bin/libculpert.so &&
    chmod 644 bin/libculpert.so
  if [ "$(id -u)" = 0 ]; then as_other() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }; else as_other() { "$@"; }; fi
  as_other sh -c 'umask 0777; exec env LD_PRELOAD="$0" CULPERT_SAMPLE_RATE=0 CULPERT_INTERVAL=1 \
    CULPERT_OUTPUT="$1/um/u.%p.pb.gz" sh -c "sleep 2.5"' "$work/bin/libculpert.so" "$work" \
    >out 2>err || fail "sh with umask 0777 failed: $(cat err)"
  [ -z "$(ls um | grep '\.pb\.gz\.[0-9]')" ] || fail "rewrites under umask 0777 took new names: $(ls um)"
  [ "$(ls um | wc -l)" -ge 1 ] || fail "nothing written under umask 0777: $(cat err)"
  # 3. Two pid namespaces at once, where this machine lets a user make
  # them: each program is pid 1 there, and both run until both started.
  if unshare -Urpf true 2>/dev/null; then
    pids=
    for who in a b; do
      unshare -Urpf sh -c 'touch "started.$1"
        i=0; while ! [ -e started.a ] || ! [ -e started.b ]; do
          i=$((i + 1)); [ $i -lt 3000 ] || exit 1; sleep 0.01; done
        exec env LD_PRELOAD="$2" CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$3/n.%p.pb.gz" "$4"' \
        sh "$who" "$LIB" "$work" "$BIN/wl_basic" >"out.$who" 2>"err.$who" &
      pids="$pids $!"
    done
    for p in $pids; do
      wait "$p" || fail "a program in its own pid namespace failed: $(cat err.a err.b)"
    done
    expect_totals n.1.pb.gz handle_request/parse "100 100000 40 40000 100"
    expect_totals n.1.pb.gz.2 handle_request/parse "100 100000 40 40000 100"
    [ "$(sed -n 's/^culpert: wrote profile to \(.*\) (.*/\1/p' err.a err.b | sort -u | wc -l)" = 2 ] ||
      fail "two processes with pid 1 did not name two files: $(cat err.a err.b)"
  else
    echo "note: no pid namespaces here (unshare -Urpf); part 3 not run"
  fi
  ;;
refused_directory)
  # A process whose directory refuses its profile (a service that dropped
  # its privileges after it started, as nginx's workers do, or a read-only
  # file system) writes it into $TMPDIR (else /tmp) instead, under a name
  # of its own, and says so; `culpert run` finds it there. Before, the
  # profile was lost, and with the program's stderr gone, silently. The
  # programs run as nobody under root (file permissions do not stop root),
  # so they and the library are copied where nobody may read them.
  chmod 755 "$work"
  mkdir bin out tmp && chmod 1777 tmp
  cp "$LIB" bin/libculpert.so && cp "$BIN/wl_basic" bin/wl_basic && chmod 755 bin bin/*
  if [ "$(id -u)" = 0 ]; then
    as_other() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
  else
    chmod 555 out
    as_other() { "$@"; }
  fi
  as_other env LD_PRELOAD="$work/bin/libculpert.so" TMPDIR="$work/tmp/" CULPERT_SAMPLE_RATE=0 \
    CULPERT_OUTPUT="$work/out/p.pb.gz" "$work/bin/wl_basic" >out.txt 2>err ||
    fail "wl_basic failed: $(cat err)"
  expect_line "$(cat err)" "^culpert: cannot write profile $work/out/p.pb.gz: (Permission denied|Operation not permitted); this process's profiles go to $work/tmp instead$" "the refusal"
  expect_line "$(cat err)" "^culpert: wrote profile to $work/tmp/p.pb.gz \(" "the file written instead"
  expect_totals tmp/p.pb.gz handle_request/parse "100 100000 40 40000 100"
  # and before an exec: the image's .exec1 goes there too
  as_other env LD_PRELOAD="$work/bin/libculpert.so" TMPDIR="$work/tmp" CULPERT_SAMPLE_RATE=0 \
    CULPERT_OUTPUT="$work/out/e.pb.gz" sh -c 'exec "$0"' "$work/bin/wl_basic" >out.txt 2>err ||
    fail "wl_basic after sh failed: $(cat err)"
  expect_line "$(cat err)" "^culpert: wrote profile to $work/tmp/e\.pb\.gz\.exec1 \(" "the .exec1 file"
  expect_totals tmp/e.pb.gz handle_request/parse "100 100000 40 40000 100"
  [ -z "$(ls out)" ] || fail "files in the refused directory: $(ls out)"
  # $TMPDIR that is no directory: /tmp (the name is this case's own)
  name=$(basename "$work").pb.gz
  as_other env LD_PRELOAD="$work/bin/libculpert.so" TMPDIR="$work/missing" CULPERT_SAMPLE_RATE=0 \
    CULPERT_OUTPUT="$work/out/$name" "$work/bin/wl_basic" >out.txt 2>err ||
    fail "wl_basic failed: $(cat err)"
  expect_line "$(cat err)" "^culpert: wrote profile to /tmp/$name \(" "the file in /tmp"
  rm -f "/tmp/$name"
  # In the fallback directory, which anyone may write, a symbolic link or a
  # FIFO at the name is another's: never written through (a link there
  # would have the process overwrite whatever it leads to).
  : >victim && { [ "$(id -u)" != 0 ] || chown 65534:65534 victim; }
  as_other ln -s "$work/victim" tmp/l.pb.gz && as_other mkfifo tmp/f.pb.gz
  for n in l f; do
    as_other env LD_PRELOAD="$work/bin/libculpert.so" TMPDIR="$work/tmp" CULPERT_SAMPLE_RATE=0 \
      CULPERT_PEAK=1 CULPERT_OUTPUT="$work/out/$n.pb.gz" "$work/bin/wl_basic" >out.txt 2>err ||
      fail "wl_basic failed: $(cat err)"
    expect_line "$(cat err)" "^culpert: wrote profile to $work/tmp/$n\.pb\.gz\.2 \(" "the name beside the $n"
    expect_totals "tmp/$n.pb.gz.2" handle_request/parse "100 100000 40 40000 100"
  done
  [ -s victim ] && fail "a profile was written through the symbolic link in the fallback directory"
  [ -L tmp/l.pb.gz ] && [ -p tmp/f.pb.gz ] || fail "the link or the FIFO was replaced: $(ls -l tmp)"
  # A child that drops its privileges under `culpert run`: the run's own
  # profile where it was asked for, the child's in the fallback directory,
  # listed by the run.
  if [ "$(id -u)" = 0 ] && [ -n "${BUILD_DIR:-}" ]; then
    chmod 755 out
    TMPDIR="$work/tmp" CULPERT_LIB="$work/bin/libculpert.so" "$BUILD_DIR/cli/culpert" run \
      --rate 0 -o "$work/out/r.pb.gz" --no-report -- sh -c \
      'setpriv --reuid=65534 --regid=65534 --clear-groups "$0" >/dev/null' "$work/bin/wl_basic" \
      >out.txt 2>err || fail "culpert run failed: $(cat err)"
    child=$(sed -n 's/^  wl_basic (pid \([0-9]*\)).*/\1/p' err)
    [ -n "$child" ] || fail "culpert run did not list wl_basic's profile: $(cat err)"
    expect_line "$(cat err)" "^  wl_basic \(pid $child\) .* $work/tmp/r\.pb\.gz\.$child$" "the listed file"
    expect_totals "tmp/r.pb.gz.$child" handle_request/parse "100 100000 40 40000 100"
    [ -s out/r.pb.gz ] || fail "no profile of the run's own program: $(ls out)"
    # PROGRAM itself drops them, twice: the second run's profile is
    # tmp/d.pb.gz.2 (the first run's has the name), and it is PROGRAM's,
    # not that of a process with pid 2.
    chmod 755 out
    for i in 1 2; do
      TMPDIR="$work/tmp" CULPERT_LIB="$work/bin/libculpert.so" "$BUILD_DIR/cli/culpert" run \
        --rate 0 -o "$work/out/d.pb.gz" --no-report -- \
        setpriv --reuid=65534 --regid=65534 --clear-groups "$work/bin/wl_basic" \
        >out.txt 2>err || fail "culpert run $i failed: $(cat err)"
    done
    expect_line "$(cat err)" "^culpert: wrote profile to $work/tmp/d\.pb\.gz\.2 \(" "the second run's profile"
    expect_no_line "$(cat err)" "pid 2\)|wrote no profile" "the second run's listing"
    # Two runs at once, one profile name in two directories, whose
    # children both fall back to tmp/: each run lists its own child only
    # (the files carry the run's id). Before, each listed both.
    mkdir out2
    for d in out out2; do
      TMPDIR="$work/tmp" CULPERT_LIB="$work/bin/libculpert.so" "$BUILD_DIR/cli/culpert" run \
        --rate 0 -o "$work/$d/t.pb.gz" --no-report -- sh -c 'touch "$1.started"
          i=0; while ! [ -e out.started ] || ! [ -e out2.started ]; do
            i=$((i + 1)); [ $i -lt 3000 ] || exit 1; sleep 0.01; done
          setpriv --reuid=65534 --regid=65534 --clear-groups "$0" >/dev/null' \
        "$work/bin/wl_basic" "$d" >"out.$d" 2>"err.$d" &
      eval "pid_$d=\$!"
    done
    wait "$pid_out" || fail "the first of two runs failed: $(cat err.out)"
    wait "$pid_out2" || fail "the second of two runs failed: $(cat err.out2)"
    for d in out out2; do
      [ "$(grep -c "^  wl_basic (pid .* $work/tmp/t\.pb\.gz\.[0-9]*$" "err.$d")" = 1 ] ||
        fail "the run into $d/ did not list its one child: $(cat "err.$d")"
    done
  fi
  # The fallback directory is the profile's own, spelled another way
  # (TMPDIR through a symbolic link): its files are listed once, and the
  # report counts them once.
  if [ -n "${BUILD_DIR:-}" ]; then
    mkdir same && ln -s same same.link
    TMPDIR="$work/same.link" CULPERT_LIB="$LIB" "$BUILD_DIR/cli/culpert" run --rate 0 \
      -o "$work/same/s.pb.gz" --no-report -- sh -c '"$0" >/dev/null' "$BIN/wl_basic" \
      >out.txt 2>err || fail "culpert run failed: $(cat err)"
    [ "$(grep -c '^  wl_basic (pid' err)" = 1 ] || fail "wl_basic's profile listed once? $(cat err)"
  fi
  ;;
pid_reused)
  # A process below the first one whose name (FILE.<pid>) is taken by an
  # older file, an earlier process's with the same pid, writes FILE.<pid>.2
  # instead, and so does the program it execs (the same process); the
  # older file stays as it was. Before, it was written over.
  out=$(CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/r.pb.gz" \
    run_pre "$BIN/wl_fork" --stale "$work/r.pb.gz" 2>err) || fail "wl_fork --stale failed: $(cat err)"
  child=$(printf '%s\n' "$out" | awk '$1 == "stale" && $4 == 0 {print $2}')
  if [ -z "$child" ]; then
    fail "the child did not exit 0: $out $(cat err)"
  else
    [ "$(cat "r.pb.gz.$child")" = stale ] || fail "the earlier process's r.pb.gz.$child was written over"
    expect_totals "r.pb.gz.$child.2.exec1" child_work "5 15000 5 15000 5"
    expect_totals "r.pb.gz.$child.2" exec_child "7 4900 7 4900 7"
  fi
  # The first process too, when its name holds its pid (%p): sh leaves an
  # older file at its own pid's name, then becomes the program (an exec
  # keeps the pid). A name without %p is the user's to reuse.
  sh -c 'echo stale >"p.$$.pb.gz" && touch -d "1 hour ago" "p.$$.pb.gz" && echo "$$" >sh.pid &&
    exec env LD_PRELOAD="$0" CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$1/p.%p.pb.gz" "$2"' \
    "$LIB" "$work" "$BIN/wl_basic" >out 2>err || fail "wl_basic after sh failed: $(cat err)"
  root=$(cat sh.pid)
  [ "$(cat "p.$root.pb.gz")" = stale ] || fail "the first process wrote over the older p.$root.pb.gz"
  [ -s "p.$root.pb.gz.2" ] && profile "p.$root.pb.gz.2" >/dev/null ||
    fail "the first process did not write p.$root.pb.gz.2: $(ls p.*)"
  # a FIFO there is written through, as before, whatever its age. The
  # program waits for "go" until this shell holds the FIFO open (a reader
  # must be there when the profile is written), then its data is read
  # through a second descriptor once the first one is closed.
  rm -f sh.pid
  sh -c 'mkfifo "p.$$.pb.gz" && touch -d "1 hour ago" "p.$$.pb.gz" && echo "$$" >sh.pid &&
    i=0 && while [ ! -e go ] && [ $i -lt 3000000 ]; do i=$((i + 1)); done &&
    exec env LD_PRELOAD="$0" CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$1/p.%p.pb.gz" "$2"' \
    "$LIB" "$work" "$BIN/wl_basic" >out 2>err &
  writer=$!
  for _ in $(seq 100); do [ -s sh.pid ] && [ -p "p.$(cat sh.pid).pb.gz" ] && break; sleep 0.1; done
  fifo_pid=$(cat sh.pid)
  exec 3<>"p.$fifo_pid.pb.gz"
  touch go
  wait "$writer" || fail "wl_basic writing into a FIFO failed: $(cat err)"
  exec 4<"p.$fifo_pid.pb.gz" 3>&-
  timeout 30 cat <&4 >through.pb.gz
  exec 4<&-
  expect_totals through.pb.gz handle_request/parse "100 100000 40 40000 100"
  [ -e "p.$fifo_pid.pb.gz.2" ] && fail "a FIFO at the name got a .2 beside it"
  echo stale >fixed.pb.gz && touch -d "1 hour ago" fixed.pb.gz
  CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/fixed.pb.gz" run_pre "$BIN/wl_basic" >out 2>err ||
    fail "wl_basic failed: $(cat err)"
  grep -qx stale fixed.pb.gz && fail "a name without %p was not reused"
  [ -e fixed.pb.gz.2 ] && fail "a name without %p got a .2"
  # culpert run lists them with the run's other files; the older one not
  env -u CULPERT_QUIET "$BUILD_DIR/cli/culpert" run --rate 0 --no-report -o "$work/q.pb.gz" -- \
    "$BIN/wl_fork" --stale "$work/q.pb.gz" >out 2>err || fail "culpert run wl_fork --stale: $(cat err)"
  child=$(awk '$1 == "stale" && $4 == 0 {print $2}' out)
  has_line() { grep -q -- "$1" err || fail "$2: $(cat err)"; }
  has_line "^culpert: other processes of this run wrote profiles of their own (2):" "the run's list"
  has_line "(pid $child, before exec 1) .* $work/q\.pb\.gz\.$child\.2\.exec1\$" "the image before the exec"
  has_line "(pid $child) .* $work/q\.pb\.gz\.$child\.2\$" "the exec'd image"
  ;;
no_children)
  # CULPERT_NO_CHILDREN=1: fork children are profiled, exec'd ones are not
  out=$(CULPERT_NO_CHILDREN=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/n.%p.pb.gz" \
    LD_PRELOAD="/nonexistent/libother.so:$LIB" "$BIN/wl_fork" 1 2>err) || fail "wl_fork failed"
  expect_line "$out" '^exec status 0$' "exec'd child"
  [ "$(ls n.*.pb.gz | wc -l)" -eq 2 ] || fail "want parent and fork child only: $(ls)"
  ex=$(printf '%s\n' "$out" | awk '$1=="exec"&&$2!="status"{print $2}')
  [ -f "n.$ex.pb.gz" ] && fail "the exec'd child was profiled"
  # only libculpert left LD_PRELOAD: the other library is still there
  expect_line "$out" '^preload_in_exec /nonexistent/libother\.so$' "the exec'd child's LD_PRELOAD"
  # bash as the first process: its setenv and unsetenv, called before its
  # main, would be undone when it imports the environment, so libculpert
  # must leave its programs out all the same.
  rm -f b.pb.gz*
  CULPERT_NO_CHILDREN=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/b.pb.gz" \
    run_pre bash -c "\"\$BIN/wl_basic\" >wl_out; echo \"[\$LD_PRELOAD]\"" >out 2>err ||
    fail "bash -c under CULPERT_NO_CHILDREN failed: $(cat err)"
  expect_line "$(cat out)" '^\[\]$' "bash's LD_PRELOAD"
  expect_line "$(cat wl_out)" '^active=0$' "the program bash ran"
  [ -f b.pb.gz ] || fail "under bash, no b.pb.gz: $(ls)"
  # (bash's fork child writes b.pb.gz.PID before its exec: fork children
  # are still profiled, but not wl_basic)
  for f in b.pb.gz*; do expect_totals "$f" handle_request/parse "0 0 0 0 0"; done
  # The first process writes its file even when it sampled nothing and
  # execs a program that is not profiled (CULPERT_NO_CHILDREN, or an
  # environment without libculpert): nothing after it writes the name.
  rm -f s1.pb.gz* s2.pb.gz*
  CULPERT_NO_CHILDREN=1 CULPERT_SAMPLE_RATE=1T CULPERT_OUTPUT="$work/s1.pb.gz" \
    run_pre sh -c 'exec true' 2>err || fail "sh -c 'exec true' failed: $(cat err)"
  [ -f s1.pb.gz ] || fail "CULPERT_NO_CHILDREN=1, sh -c 'exec true': no s1.pb.gz: $(ls)"
  CULPERT_SAMPLE_RATE=1T CULPERT_OUTPUT="$work/s2.pb.gz" \
    run_pre sh -c 'LD_PRELOAD= exec true' 2>err || fail "sh -c 'LD_PRELOAD= exec true' failed"
  [ -f s2.pb.gz ] || fail "sh -c 'LD_PRELOAD= exec true': no s2.pb.gz: $(ls)"
  ;;
dlopen)
  out=$(CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/d.pb.gz" run_pre "$BIN/wl_dlopen" \
    "$PLUGIN" 2>err) || fail "wl_dlopen failed: $(cat err)"
  expect_line "$out" '^round 2: 20$' "wl_dlopen"
  expect_totals d.pb.gz plugin "60 30720 60 30720 60"
  # the plugin's code is gone when the profile is written: its frames keep
  # their names (the dlclose wrapper noted the object)
  expect_line "$(profile d.pb.gz)" ' span=plugin frames=plugin_alloc;plugin_work;main(;|$| )' \
    "stack through the unloaded plugin"
  # the plugin's destructor allocates inside dlclose, under culpert's
  # wrapper: the stack holds libc's dlclose once, not the wrapper's too
  expect_line "$(profile d.pb.gz)" '^sample 3 12963 .*frames=plugin_alloc;plugin_fini;.*;dlclose;main(;|$| )' \
    "stack of an allocation inside dlclose"
  n=$(profile d.pb.gz | awk '$3 == 12963 { sub(/^frames=/, "", $8); print $8 }' | tr ';' '\n' | grep -c '^dlclose$')
  [ "$n" = 1 ] || fail "the stack of an allocation inside dlclose shows $n dlclose frames, not libc's alone"
  ;;
stack_edges)
  # In both stack modes: a sample inside the program's own
  # pthread_getattr_np (main thread and another) does not hang, a handler
  # on an alternate signal stack gets its stack, and in the default mode a
  # stack through a signal frame (culpert's call-frame walk hands those to
  # libunwind) reaches main.
  for mode in libunwind fp; do
    out=$(CULPERT_STACK=$mode CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/s-$mode.pb.gz" \
      timeout 60 env LD_PRELOAD="$LIB" "$BIN/wl_stacks" 2>err) || fail "wl_stacks ($mode) failed: $(cat err)"
    expect_line "$out" '^handled=1$' "wl_stacks ($mode)"
    expect_line "$out" '^alt=1$' "wl_stacks ($mode)"
    expect_line "$out" '^getattr=2$' "wl_stacks ($mode)"
    expect_line "$(profile "s-$mode.pb.gz")" ' 555 .*frames=main_alloc;main(;|$| )' \
      "main's stack ($mode)"
  done
  expect_line "$(profile s-libunwind.pb.gz)" \
    ' 777 .*frames=handler_alloc;on_signal;.*;raise_it;main(;|$| )' \
    "handler's stack through the signal frame"
  # exactly the two handlers' stacks (signal frames) were libunwind's
  expect_line "$(profile s-libunwind.pb.gz)" '^comment culpert.libunwind_stacks=2$' \
    "stacks left to libunwind"
  # On the alternate signal stack: the handler's frames (libunwind also
  # steps back to main through the signal frame).
  expect_line "$(profile s-libunwind.pb.gz)" ' 999 .*frames=alt_alloc;on_alt_signal;.*;main(;|$| )' \
    "handler's stack on the alternate signal stack"
  expect_line "$(profile s-fp.pb.gz)" ' 999 .*frames=alt_alloc;on_alt_signal' \
    "handler's stack on the alternate signal stack (fp)"
  ;;
cxx_unwind)
  # Exceptions and backtrace() behave exactly as without libculpert.
  "$BIN/wl_cxx" >plain.out 2>&1 || fail "wl_cxx failed without libculpert"
  for rate in 0 4096; do
    CULPERT_QUIET=1 CULPERT_SAMPLE_RATE=$rate CULPERT_OUTPUT="$work/c$rate.pb.gz" \
      run_pre "$BIN/wl_cxx" >pre.out 2>&1 || fail "wl_cxx failed preloaded (rate $rate)"
    diff plain.out pre.out >/dev/null || fail "output differs with libculpert (rate $rate):
$(diff plain.out pre.out)"
  done
  grep -q 'caught=201' plain.out || fail "wl_cxx did not catch every exception"
  grep -q '^  main$' plain.out || fail "backtrace() did not name main"
  n=$(totals c0.pb.gz cxx | awk '{print $5}')
  [ "$n" -gt 1000 ] || fail "too few samples in span cxx: $n"
  ;;
cxx_names)
  # Inlined C++ functions without a DWARF linkage name (GCC gives none to
  # templates of a lambda defined in main, nor to the lambda's operator())
  # are named with their namespaces, classes and enclosing function, so
  # the report skips libstdc++'s frames and names the lambda's line.
  out=$(CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/n.pb.gz" run_pre "$BIN/wl_cxx_names" 2>err) ||
    fail "wl_cxx_names failed: $(cat err)"
  expect_line "$out" '^items=1000$' "wl_cxx_names output"
  frames=$(profile n.pb.gz | sed -n 's/^sample .* frames=//p' | tr ';' '\n' | sort -u)
  if ! printf '%s\n' "$frames" | grep -q '^main::<lambda>::operator()$' &&
    printf '%s\n' "$frames" | grep -q '^main::{lambda()#[0-9]*}::operator()() const$'; then
    echo "the compiler gave the lambda a linkage name: nothing to qualify"
    exit 77
  fi
  expect_line "$frames" '^main::<lambda>::operator\(\)$' "the lambda run by each thread"
  expect_line "$frames" '^shop::Basket<main\(\)::<lambda\(int\)> >::fill$' "a class template's member"
  expect_no_line "$frames" '^(operator\(\)|fill|[A-Za-z_][A-Za-z0-9_]*<.*)$' "unqualified frames"
  report=$("$BUILD_DIR/cli/culpert" report --no-span n.pb.gz 2>&1) || fail "culpert report: $report"
  expect_line "$report" '^  main::<lambda>::operator\(\)  \(' "report: the lambda's callsite"
  expect_line "$report" '^  main  \(' "report: the threads started in main"
  expect_no_line "$report" '^  ([A-Za-z_][A-Za-z0-9_]*<|operator\(\)  )' "report: a libstdc++ callsite"
  ;;
unbiased)
  # Over 30 seeds at R=64KiB: every run's estimate within 4 standard errors
  # (sqrt(R*B)) of the truth, and the mean within 1%.
  R=65536
  : >runs
  for seed in $(seq 1 30); do
    truth=$(CULPERT_SEED=$seed CULPERT_SAMPLE_RATE=64K CULPERT_QUIET=1 \
      CULPERT_OUTPUT="$work/u$seed.pb.gz" run_pre "$BIN/wl_unbiased") || fail "run $seed"
    echo "$truth $(totals "u$seed.pb.gz" mix | awk '{print $2}') $(totals "u$seed.pb.gz" live |
      awk '{print $4}')" >>runs
  done
  verdict=$(awk -v R=$R '{
      t = $2; l = $3; est = $4; live = $5
      se = sqrt(R * t); sel = sqrt(R * l)
      if (est - t > 4 * se || t - est > 4 * se) printf "run %d: alloc %d vs %d\n", NR, est, t
      if (live - l > 4 * sel || l - live > 4 * sel) printf "run %d: inuse %d vs %d\n", NR, live, l
      sum += est; truth = t; n++ }
      END { m = sum / n; d = (m - truth) / truth; if (d < 0) d = -d
            if (d > 0.01) printf "mean off by %.3f%%\n", d * 100 }' runs)
  [ -z "$verdict" ] || fail "estimates biased: $verdict"
  # the same seed gives the same profile values
  CULPERT_SEED=7 CULPERT_SAMPLE_RATE=64K CULPERT_QUIET=1 CULPERT_OUTPUT="$work/again.pb.gz" \
    run_pre "$BIN/wl_unbiased" >/dev/null
  [ "$(totals again.pb.gz mix)" = "$(totals u7.pb.gz mix)" ] || fail "CULPERT_SEED not reproducible"
  # A thread's first allocation, which sets the thread up, is sampled like
  # any other: 400 threads that each allocate one block of 64 KiB and end.
  for seed in 1 2 3; do
    truth=$(CULPERT_SEED=$seed CULPERT_SAMPLE_RATE=64K CULPERT_QUIET=1 \
      CULPERT_OUTPUT="$work/th$seed.pb.gz" run_pre "$BIN/wl_unbiased" --threads) ||
      fail "wl_unbiased --threads, seed $seed"
    t=$(echo "$truth" | awk '{print $2}')
    est=$(totals "th$seed.pb.gz" first | awk '{print $2}')
    awk -v R=$R -v t="${t:-0}" -v e="${est:-0}" 'BEGIN { d = e - t; exit !(t > 0 && d * d <= 16 * R * t) }' ||
      fail "seed $seed: span first estimated at ${est:-0} bytes, truth ${t:-0}"
  done
  # A realloc of a sampled block takes it out of use also when its new
  # size does not run the count out: 100 blocks of 1 MiB shrunk to 16
  # bytes leave about 1600 bytes in use, not 100 MiB.
  truth=$(CULPERT_SEED=5 CULPERT_SAMPLE_RATE=64K CULPERT_QUIET=1 CULPERT_OUTPUT="$work/sh.pb.gz" \
    run_pre "$BIN/wl_unbiased" --shrink) || fail "wl_unbiased --shrink"
  l=$(echo "$truth" | awk '{print $3}')
  live=$(totals sh.pb.gz shrunk | awk '{print $4}')
  awk -v R=$R -v l="${l:-0}" -v e="${live:-0}" 'BEGIN { d = e - l; exit !(l > 0 && d * d <= 16 * R * l) }' ||
    fail "span shrunk: ${live:-0} bytes in use, truth ${l:-0}"
  ;;
snapshot_unbiased)
  # A snapshot's own allocations use up the program thread's countdown; a
  # sample point that falls inside them must not make the program's next
  # allocation a sample whatever its size (it did: 16-byte blocks counted
  # as 64 KiB each). 200 snapshots among 10 000 blocks of 16 bytes, at
  # R=64KiB: about 2.4 samples expected, every run within 4 standard errors.
  R=65536
  for seed in 1 2 3 4 5 6 7 8; do
    truth=$(CULPERT_SEED=$seed CULPERT_SAMPLE_RATE=64K CULPERT_QUIET=1       CULPERT_OUTPUT="$work/s$seed.pb.gz" run_pre "$BIN/wl_unbiased" --snapshots) ||
      fail "run $seed"
    t=$(echo "$truth" | awk '{print $2}')
    [ "$t" = 160000 ] || fail "wl_unbiased --snapshots printed '$truth'"
    est=$(totals "s$seed.pb.gz" small | awk '{print $2}')
    awk -v R=$R -v t="$t" -v e="${est:-0}" 'BEGIN { d = e - t; exit !(d * d <= 16 * R * t) }' ||
      fail "seed $seed: span small estimated at ${est:-0} bytes, truth $t"
  done
  ;;
cancel)
  # Deferred cancellation never acts inside culpert. A thread cancelled in
  # culpert_snapshot_write left its lock held: the exit profile waited for
  # it forever (and blocked the signals that could end the wait). A thread
  # sampled on a stack of its own was cancelled inside malloc, in the
  # reads of /proc/self/maps that find the stack's bounds.
  out=$(CULPERT_QUIET=1 CULPERT_SAMPLE_RATE=4K CULPERT_OUTPUT="$work/exit.pb.gz" timeout -s KILL 60 \
    env LD_PRELOAD="$LIB" "$BIN/wl_cancel" snapshots "$work/snap.pb.gz" 2>err)
  rc=$?
  [ $rc -eq 0 ] || fail "wl_cancel snapshots: exit $rc (137: it hung): $(cat err)"
  expect_line "$out" '^snapshots cancelled 20$' "wl_cancel snapshots"
  profile exit.pb.gz >/dev/null || fail "no exit profile after the cancelled snapshots"
  left=$(ls "$work" | grep '\.tmp\.' || true)
  [ -z "$left" ] || fail "cancelled snapshots left temporary files: $left"
  for mode in libunwind fp; do
    out=$(CULPERT_STACK=$mode CULPERT_QUIET=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/f.pb.gz" \
      timeout -s KILL 60 env LD_PRELOAD="$LIB" "$BIN/wl_cancel" fibers 2>err) ||
      fail "wl_cancel fibers ($mode): exit $?: $(cat err)"
    expect_line "$out" '^cancelled inside malloc 0 of 200$' "wl_cancel fibers ($mode)"
  done
  ;;
mlockall)
  # A program under mlockall(MCL_CURRENT | MCL_FUTURE) gets every later
  # mapping locked and filled at once: the sample tables' reservation (146
  # MiB of address space, meant to be touched as it fills) is mapped so that
  # it is not, and culpert adds about its own loaded size to what the
  # program locks (libculpert's 4.8 MB of static tables, its libraries),
  # not 150 MB more.
  "$BIN/wl_mlock" >out 2>err
  rc=$?
  [ $rc -eq 77 ] && exit 77 # mlockall refused here
  [ $rc -eq 0 ] || fail "wl_mlock fails without culpert: $(cat out err)"
  plain=$(awk '$1 == "VmLck" {print $2}' out)
  for mode in libunwind fp; do
    CULPERT_STACK=$mode CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/m.pb.gz" run_pre "$BIN/wl_mlock" >out 2>err
    rc=$?
    [ $rc -eq 0 ] || fail "$mode: wl_mlock exited $rc: $(cat out err)"
    with=$(awk '$1 == "VmLck" {print $2}' out)
    [ -n "$with" ] && [ -n "$plain" ] && [ $((with - plain)) -lt 32768 ] ||
      fail "$mode: culpert added $((with - plain)) kB of locked memory ($plain kB without it, $with kB with)"
    n=$(profile m.pb.gz | awk '$1 == "sample" { n += $6 } END { print n + 0 }')
    [ "$n" -ge 2000 ] || fail "$mode: the profile holds $n samples, want 2000 or more"
  done
  ;;
address_space_limit)
  # Under `ulimit -v` (RLIMIT_AS) the sample tables' whole reservation, 146
  # MiB of address space, may not fit: a part of it is taken, within an
  # eighth of the limit, and every sample is still kept. Before, all were
  # dropped, silently (culpert.dropped_samples alone said so), and the
  # profile held none.
  for limit in 65536 131072 1048576; do
    rm -f as.pb.gz
    (ulimit -v $limit && CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/as.pb.gz" \
      run_pre "$BIN/wl_basic" >out 2>err)
    rc=$?
    [ $rc -eq 0 ] || fail "wl_basic under ulimit -v $limit: exit $rc: $(cat err)"
    expect_line "$(cat err)" "^culpert: wrote profile to $work/as.pb.gz " "under ulimit -v $limit"
    if [ -f as.pb.gz ]; then
      expect_totals as.pb.gz handle_request/parse "100 100000 40 40000 100"
      expect_line "$(profile as.pb.gz)" '^comment culpert\.dropped_samples=0$' \
        "no sample dropped under ulimit -v $limit"
    fi
  done
  ;;
file_size_limit)
  # Under `ulimit -f` a profile larger than the limit is not written (one
  # line says why) and the program ends as it would have: SIGXFSZ, raised
  # by culpert's write, ended it with "File size limit exceeded".
  out=$(ulimit -f 1 && CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/big.pb.gz" \
    run_pre "$BIN/wl_basic" 2>err)
  rc=$?
  [ $rc -eq 0 ] || fail "wl_basic under ulimit -f 1: exit $rc: $(cat err)"
  expect_line "$out" '^failures=0$' "wl_basic under ulimit -f 1"
  expect_line "$(cat err)" "^culpert: cannot write profile $work/big.pb.gz: File too large$" \
    "the write's failure"
  left=$(ls "$work" | grep '\.tmp\.' || true)
  [ -z "$left" ] || fail "a temporary file was left: $left"
  ;;
jemalloc)
  [ -n "${JEMALLOC:-}" ] && [ -f "$JEMALLOC" ] || exit 77
  out=$(CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/j.pb.gz" MALLOC_CONF=stats_print:true \
    LD_PRELOAD="$LIB $JEMALLOC" "$BIN/wl_basic" 2>err) || fail "wl_basic failed on jemalloc"
  expect_line "$out" '^failures=0$' "wl_basic on jemalloc"
  grep -q 'Begin jemalloc statistics' err || fail "jemalloc was not the allocator"
  expect_totals j.pb.gz handle_request/parse "100 100000 40 40000 100"
  expect_totals j.pb.gz aligned "9 13456 9 13456 9"
  out=$(CULPERT_SAMPLE_RATE=0 CULPERT_QUIET=1 LD_PRELOAD="$LIB $JEMALLOC" "$BIN/wl_threads") ||
    fail "wl_threads failed on jemalloc"
  ;;
tcmalloc)
  # tcmalloc (Debian libtcmalloc-minimal4) preloaded after libculpert
  [ -n "${TCMALLOC:-}" ] && [ -f "$TCMALLOC" ] || exit 77
  out=$(CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/tc.pb.gz" MALLOCSTATS=1 \
    LD_PRELOAD="$LIB $TCMALLOC" "$BIN/wl_basic" 2>err) || fail "wl_basic failed on tcmalloc"
  expect_line "$out" '^failures=0$' "wl_basic on tcmalloc"
  grep -q 'Bytes in use by application' err || fail "tcmalloc was not the allocator"
  expect_totals tc.pb.gz handle_request/parse "100 100000 40 40000 100"
  expect_totals tc.pb.gz aligned "9 13456 9 13456 9"
  out=$(CULPERT_SAMPLE_RATE=0 CULPERT_QUIET=1 LD_PRELOAD="$LIB $TCMALLOC" "$BIN/wl_threads") ||
    fail "wl_threads failed on tcmalloc"
  ;;
rust)
  # A Rust program (built here when rustc is installed): its allocations
  # are seen, with demangled Rust function names.
  [ -n "${RUSTC:-}" ] && [ -x "$RUSTC" ] || exit 77
  src=$(dirname "$0")/wl_rust.rs
  "$RUSTC" -C opt-level=0 -C debuginfo=1 -C force-frame-pointers=yes -o wl_rust "$src" \
    >rustc.log 2>&1 || exit 77
  out=$(CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/rs.pb.gz" run_pre ./wl_rust 2>err) ||
    fail "wl_rust failed: $(cat err)"
  expect_line "$out" '^total=104950 len=1000$' "wl_rust output"
  got=$(profile rs.pb.gz | awk '$1=="sample" && /frames=.*wl_rust::make_vecs/ { n += $2; b += $3 }
    END { printf "%d %d\n", n, b }')
  n=${got% *}
  b=${got#* }
  [ "$n" -ge 100 ] && [ "$b" -ge 104950 ] || fail "make_vecs: got $got, want >= 100 104950"
  ;;
go_pprof)
  [ -n "${GO:-}" ] && [ -x "$GO" ] || exit 77
  export HOME="$work/home" GOCACHE="$work/gocache" GOFLAGS=-mod=mod GOTOOLCHAIN=local
  mkdir -p "$HOME"
  CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/g.pb.gz" CULPERT_METADATA=service=test \
    run_pre "$BIN/wl_basic" >/dev/null 2>&1 || fail "wl_basic failed"
  raw=$("$GO" tool pprof -raw g.pb.gz 2>&1) || fail "go tool pprof -raw failed: $raw"
  expect_line "$raw" 'parse_alloc' "pprof -raw functions"
  expect_line "$raw" 'span_name:\[parse\]' "pprof -raw labels"
  expect_line "$raw" 'Comment: service=test' "pprof -raw comments"
  expect_line "$raw" '100 +100000 +40 +40000 +100:' "pprof -raw values"
  tags=$("$GO" tool pprof -tags g.pb.gz 2>&1) || fail "go tool pprof -tags failed"
  expect_line "$tags" 'span_name' "pprof -tags"
  expect_line "$tags" ': parse$' "pprof -tags"
  ;;
quiet_and_names)
  CULPERT_SAMPLE_RATE=0 CULPERT_METADATA='service=api,broken,team=core' run_pre "$BIN/wl_basic" \
    >out 2>err || fail "wl_basic failed"
  files=$(ls culpert.wl_basic.*.pb.gz 2>/dev/null)
  [ "$(printf '%s\n' "$files" | grep -c .)" -eq 1 ] || fail "default name: got '$files'"
  expect_line "$(cat err)" "^culpert: wrote profile to $work/culpert\\.wl_basic\\.[0-9]+\\.pb\\.gz \\([0-9]+ samples?\\)$" "stderr"
  [ "$(grep -c 'CULPERT_METADATA' err)" -eq 1 ] || fail "want one metadata warning: $(cat err)"
  p=$(profile "$files")
  for k in version rate stack dropped_samples peak_inuse_bytes pid exe span_overflow span_underflow \
    span_table_full libunwind_stacks; do
    expect_line "$p" "^comment culpert\\.$k=" "comment culpert.$k"
  done
  expect_line "$p" '^comment culpert.exe=wl_basic$' "exe comment"
  expect_line "$p" '^comment service=api$' "metadata"
  expect_line "$p" '^comment team=core$' "metadata"
  # The first process writes its file even when it sampled nothing (a
  # process below it would not).
  CULPERT_SAMPLE_RATE=1T run_pre true >out 2>err || fail "true failed under culpert"
  expect_line "$(cat err)" "^culpert: wrote profile to $work/culpert\\.true\\.[0-9]+\\.pb\\.gz \\(0 samples\\)$" \
    "the first process's empty profile"
  CULPERT_QUIET=1 CULPERT_OUTPUT="$work/q-%e.pb.gz" run_pre "$BIN/wl_basic" >out 2>err
  [ -s err ] && fail "CULPERT_QUIET=1 still wrote: $(cat err)"
  [ -f q-wl_basic.pb.gz ] || fail "%e not expanded: $(ls)"
  # started through a link to it: the link's name, as ps shows it; a
  # script keeps its interpreter's name
  ln -s "$BIN/wl_basic" other-name
  CULPERT_QUIET=1 CULPERT_OUTPUT="$work/q-%e.pb.gz" run_pre ./other-name >out 2>err
  [ -f q-other-name.pb.gz ] || fail "%e of a program started through a link: $(ls q-*)"
  printf '#!/bin/sh\nexit 0\n' >script-name && chmod +x script-name
  CULPERT_QUIET=1 CULPERT_OUTPUT="$work/s-%e.pb.gz" run_pre ./script-name >out 2>err
  [ -f s-dash.pb.gz ] || [ -f s-sh.pb.gz ] || [ -f s-bash.pb.gz ] ||
    fail "%e of a script is not its interpreter's: $(ls s-*)"
  # a relative name is anchored at the start-up directory, not where the
  # program happens to be at exit
  rm -f culpert.wl_basic.*.pb.gz
  CULPERT_QUIET=1 run_pre "$BIN/wl_basic" --chdir / >out 2>err || fail "wl_basic --chdir failed"
  [ "$(ls culpert.wl_basic.*.pb.gz 2>/dev/null | wc -l)" -eq 1 ] ||
    fail "profile not in the start-up directory after chdir: $(cat err)"
  # A program that closed its stderr and opened a file of its own as fd 2:
  # the profile is written, and culpert's line stays out of that file.
  CULPERT_OUTPUT="$work/s.pb.gz" run_pre "$BIN/wl_basic" --stderr-to "$work/data" >out 2>err ||
    fail "wl_basic --stderr-to failed: $(cat out)"
  [ "$(cat data)" = "program data" ] || fail "the program's file on fd 2 changed: $(cat data)"
  [ -f s.pb.gz ] || fail "no profile after the program replaced its stderr"
  # A program that writes over its environment strings (to set its process
  # title): the profile still goes where CULPERT_OUTPUT said.
  CULPERT_QUIET=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/title.pb.gz" run_pre "$BIN/wl_basic" \
    --overwrite-env >out 2>err || fail "wl_basic --overwrite-env failed"
  [ -f title.pb.gz ] || fail "no profile at CULPERT_OUTPUT after the environment was overwritten: $(ls)"
  expect_totals title.pb.gz handle_request/parse "100 100000 40 40000 100"
  ;;
output_not_regular)
  # CULPERT_OUTPUT naming something that is not a regular file: written
  # into, never replaced by a rename. A symbolic link stays a link (its
  # target gets the profile, a dangling one's target is created), a FIFO
  # delivers the profile to its reader, a null device stays a device (and
  # takes the children's profiles too).
  printf 'old\n' >target
  ln -s target link
  ln -s made dangling
  for out in link dangling; do
    CULPERT_QUIET=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/$out" run_pre "$BIN/wl_basic" \
      >out 2>err || fail "wl_basic with CULPERT_OUTPUT=$out failed: $(cat err)"
    [ -L "$out" ] || fail "CULPERT_OUTPUT=$out: the symbolic link was replaced"
  done
  expect_totals target handle_request/parse "100 100000 40 40000 100"
  expect_totals made handle_request/parse "100 100000 40 40000 100"
  mkfifo fifo
  timeout 30 cat fifo >from_fifo & # bounded: a FIFO renamed over never gets a writer
  reader=$!
  CULPERT_QUIET=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/fifo" run_pre "$BIN/wl_basic" \
    >out 2>err || fail "wl_basic with CULPERT_OUTPUT=fifo failed: $(cat err)"
  wait $reader
  [ -p fifo ] || fail "CULPERT_OUTPUT=fifo: the FIFO was replaced"
  expect_totals from_fifo handle_request/parse "100 100000 40 40000 100"
  # No reader: the write fails at once with a line saying so, the program
  # ends normally.
  timeout 20 env CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/fifo" LD_PRELOAD="$LIB" \
    "$BIN/wl_basic" >out 2>err || fail "wl_basic with a reader-less FIFO: exit $?"
  expect_line "$(cat err)" "^culpert: cannot write profile $work/fifo: No such device or address$" \
    "a FIFO without a reader"
  # A device: a null device of our own (mknod needs root), never the
  # system's /dev/null, which a regression here would replace.
  if mknod "$work/null" c 1 3 2>/dev/null; then
    CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/null" run_pre "$BIN/wl_basic" >out 2>err ||
      fail "wl_basic with CULPERT_OUTPUT=null device failed: $(cat err)"
    [ -c "$work/null" ] || fail "CULPERT_OUTPUT=a null device: it is no longer a device"
    expect_line "$(cat err)" "^culpert: wrote profile to $work/null \([0-9]+ samples\)$" "a null device"
    # children write to the device too, not to files named null.PID beside it
    CULPERT_SAMPLE_RATE=0 CULPERT_QUIET=1 CULPERT_OUTPUT="$work/null" run_pre "$BIN/wl_fork" \
      >out 2>err || fail "wl_fork with CULPERT_OUTPUT=null device failed: $(cat err)"
    grep -q '^child ' out || fail "wl_fork started no child: $(cat out)"
    [ -c "$work/null" ] || fail "CULPERT_OUTPUT=a null device: a child replaced it"
    left=$(ls "$work" | grep '^null\.' || true)
    [ -z "$left" ] || fail "children of CULPERT_OUTPUT=a null device wrote files: $left"
  fi
  ;;
symbols)
  # CULPERT_SYMBOLS=names: function names from the symbol tables, no line
  # numbers; the default (full) has both; a bad value warns once, uses full.
  CULPERT_SAMPLE_RATE=0 CULPERT_SYMBOLS=names CULPERT_OUTPUT="$work/n.pb.gz" run_pre \
    "$BIN/wl_basic" >out 2>err || fail "wl_basic failed (names)"
  p=$(profile n.pb.gz)
  expect_line "$p" ' span=handle_request/parse frames=parse_alloc;handle_request;main' "names: stack"
  expect_line "$p" '^lines 0$' "names: no line numbers"
  CULPERT_SAMPLE_RATE=0 CULPERT_SYMBOLS=full CULPERT_OUTPUT="$work/f.pb.gz" run_pre \
    "$BIN/wl_basic" >out 2>err || fail "wl_basic failed (full)"
  p=$(profile f.pb.gz)
  expect_line "$p" ' span=handle_request/parse frames=parse_alloc;handle_request;main' "full: stack"
  expect_line "$p" '^lines [1-9][0-9]*$' "full: line numbers"
  CULPERT_SAMPLE_RATE=0 CULPERT_SYMBOLS=lines CULPERT_OUTPUT="$work/b.pb.gz" run_pre \
    "$BIN/wl_basic" >out 2>err || fail "wl_basic failed (bad value)"
  [ "$(grep -c '^culpert: CULPERT_SYMBOLS=lines is neither full nor names; using full$' err)" -eq 1 ] ||
    fail "want one CULPERT_SYMBOLS warning: $(cat err)"
  expect_line "$(profile b.pb.gz)" '^lines [1-9][0-9]*$' "bad value: line numbers"
  # The program started by the dynamic loader run as a command: its name
  # and its code are the program's, not the loader's (/proc/self/exe is
  # the loader then), at exit and in the copy forked at a signal.
  loader=$(readelf -l "$BIN/wl_basic" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
  if [ -x "$loader" ]; then
    CULPERT_SAMPLE_RATE=0 run_pre "$loader" "$BIN/wl_basic" >out 2>err || fail "ld.so wl_basic failed"
    files=$(ls culpert.wl_basic.*.pb.gz 2>/dev/null)
    [ "$(printf '%s\n' "$files" | grep -c .)" -eq 1 ] || fail "ld.so: default name: got '$(ls)'"
    p=$(profile "$files")
    expect_line "$p" '^comment culpert.exe=wl_basic$' "ld.so: exe comment"
    expect_line "$p" ' span=handle_request/parse frames=parse_alloc;handle_request;main;' "ld.so: stack"
    CULPERT_WRITE_ON_SIGNAL=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/ls.pb.gz" \
      env LD_PRELOAD="$LIB" "$loader" "$BIN/wl_basic" --hang >ls.out 2>ls.err &
    prog=$!
    for _ in $(seq 100); do grep -q '^failures=' ls.out && break; sleep 0.1; done
    kill -s TERM "$prog"
    wait "$prog"
    expect_line "$(profile ls.pb.gz)" ' span=handle_request/parse frames=parse_alloc;handle_request;main;' \
      "ld.so, at a signal: stack"
  else
    echo "no program interpreter found: the ld.so checks are skipped"
  fi
  ;;
stderr_gone)
  # fd 2 a pipe whose reader has gone (`prog 2>&1 | head -1` once head has
  # read its line), SIGPIPE at its default action: culpert's line is lost,
  # not the process. It used to end by SIGPIPE (status 141) at exit, and a
  # program ending with _exit lost its status the same way (its forked
  # writer died first, then the process saying so). A FIFO opened for
  # reading and writing, then closed for reading, is such a pipe.
  mkfifo gone || fail "mkfifo"
  exec 3<>gone 4>gone
  exec 3<&-
  CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/p.pb.gz" env --default-signal=PIPE LD_PRELOAD="$LIB" \
    "$BIN/wl_basic" >out 2>&4
  rc=$?
  [ $rc -eq 0 ] || fail "wl_basic with its stderr a broken pipe exited $rc, want 0"
  [ -f p.pb.gz ] && expect_totals p.pb.gz handle_request/parse "100 100000 40 40000 100"
  out=$(CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/q.%p.pb.gz" \
    timeout 60 env --default-signal=PIPE LD_PRELOAD="$LIB" "$BIN/wl_fork" --immediate-exit 2>&4)
  rc=$?
  [ $rc -eq 0 ] || fail "wl_fork --immediate-exit with its stderr a broken pipe exited $rc, want 0"
  for want in 3 4 6 7; do
    child=$(printf '%s\n' "$out" | awk -v s="$want" '$1 == "exit" && $4 == s {print $2}')
    [ -n "$child" ] || fail "no fork child ended with status $want: $out"
    [ -n "$child" ] && { [ -f "q.$child.pb.gz" ] || fail "the child ending with status $want wrote no profile"; }
  done
  exec 4>&-
  ;;
bad_env)
  CULPERT_SAMPLE_RATE=lots CULPERT_OUTPUT="$work/e.pb.gz" run_pre "$BIN/wl_basic" >out 2>err ||
    fail "wl_basic failed"
  [ "$(grep -c 'CULPERT_SAMPLE_RATE=lots' err)" -eq 1 ] || fail "want one warning: $(cat err)"
  expect_line "$(profile e.pb.gz)" '^comment culpert.rate=524288$' "default rate"
  # one warning for a whole process tree, not one per process (wl_fork
  # forks and execs several)
  CULPERT_SAMPLE_RATE=lots CULPERT_QUIET=1 CULPERT_OUTPUT="$work/tree.pb.gz" \
    run_pre "$BIN/wl_fork" >out 2>err || fail "wl_fork failed: $(cat err)"
  grep -q '^child ' out || fail "wl_fork started no child: $(cat out)"
  [ "$(grep -c 'CULPERT_SAMPLE_RATE=lots' err)" -eq 1 ] ||
    fail "want one warning for the process tree: $(cat err)"
  # CULPERT_ROOT_PID, which libculpert sets for the processes below the
  # first: empty counts as unset, and a value that is no process id is
  # ignored with one warning. Either way the process is the first of its
  # run and writes the file asked for, not FILE.<pid> (nothing at all when
  # it sampled nothing).
  for v in "" "abc" "12x"; do
    rm -f r.pb.gz r.pb.gz.*
    CULPERT_ROOT_PID=$v CULPERT_OUTPUT="$work/r.pb.gz" run_pre "$BIN/wl_basic" >out 2>err ||
      fail "wl_basic failed: $(cat err)"
    [ -f r.pb.gz ] || fail "CULPERT_ROOT_PID='$v': no r.pb.gz but $(ls r.pb.gz* 2>/dev/null)"
    if [ -n "$v" ]; then
      [ "$(grep -c "CULPERT_ROOT_PID=$v is not a process id" err)" -eq 1 ] ||
        fail "CULPERT_ROOT_PID='$v': want one warning: $(cat err)"
    else
      ! grep -q CULPERT_ROOT_PID err || fail "CULPERT_ROOT_PID empty: a warning: $(cat err)"
    fi
  done
  CULPERT_OUTPUT=/nonexistent/dir/x.pb.gz run_pre "$BIN/wl_basic" >out 2>err ||
    fail "an unwritable output path made the program fail"
  expect_line "$(cat out)" '^failures=0$' "unwritable output"
  expect_line "$(cat err)" '^culpert: cannot write profile /nonexistent/dir/x.pb.gz' "stderr"
  ;;
shell_root)
  # bash as the first process: it defines getenv and setenv of its own,
  # and its getenv stops reading the environment once its setenv has been
  # called before its main runs (libculpert sets CULPERT_ROOT_PID there).
  # The CULPERT_* variables are read all the same: the file is the one
  # asked for, with the rate and metadata asked for, and the program bash
  # starts is below it (FILE.<pid>).
  command -v bash >/dev/null || exit 77
  CULPERT_SAMPLE_RATE=0 CULPERT_METADATA=shell=bash CULPERT_OUTPUT="$work/sh.pb.gz" \
    run_pre bash -c "\"\$BIN/wl_basic\" >out; echo done" >sh_out 2>err ||
    fail "bash -c failed: $(cat err)"
  grep -qx done sh_out || fail "bash did not run on: $(cat sh_out)"
  [ -f sh.pb.gz ] || fail "no sh.pb.gz but: $(ls)"
  ls culpert.bash.* >/dev/null 2>&1 && fail "bash wrote the default name: $(ls)"
  p=$(profile sh.pb.gz)
  expect_line "$p" '^comment culpert.rate=0$' "bash's rate"
  expect_line "$p" '^comment shell=bash$' "bash's metadata"
  # (the forked bash that execs wl_basic writes sh.pb.gz.PID.exec1 first)
  child=$(ls sh.pb.gz.* 2>/dev/null | grep -v '\.exec[0-9]*$')
  if [ "$(printf '%s\n' "$child" | grep -c .)" -ne 1 ]; then
    fail "want one sh.pb.gz.PID from wl_basic: $(ls sh.pb.gz.*)"
  else
    expect_totals "$child" handle_request/parse "100 100000 40 40000 100"
  fi
  ;;
peak)
  # CULPERT_PEAK=1: beside the profile, NAME.peak.pb.gz holds the same
  # samples with the in-use values of the moment the in-use estimate was
  # highest: all 100 parse blocks, 60 of which are freed before the exit.
  CULPERT_PEAK=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/pk.pb.gz" \
    run_pre "$BIN/wl_basic" >out 2>err || fail "wl_basic failed: $(cat err)"
  expect_line "$(cat out)" '^failures=0$' "program's own checks"
  expect_line "$(cat err)" "^culpert: wrote profile to $work/pk.pb.gz \\([0-9]+ samples?\\)$" "stderr"
  expect_line "$(cat err)" "^culpert: wrote in-use-at-peak profile to $work/pk.peak.pb.gz \\([0-9]+ samples?\\)$" "stderr"
  expect_totals pk.pb.gz handle_request/parse "100 100000 40 40000 100"
  expect_totals pk.peak.pb.gz handle_request/parse "100 100000 100 100000 100"
  expect_totals pk.peak.pb.gz handle_request/resize "3 4300 0 0 3"
  p=$(profile pk.peak.pb.gz)
  expect_line "$p" '^comment culpert.inuse_at_peak=[1-9][0-9]{18}$' "when the peak was"
  # its in-use total is the peak's
  peak=$(printf '%s\n' "$p" | awk -F= '$1 == "comment culpert.peak_inuse_bytes" {print $2}')
  held=$(printf '%s\n' "$p" | awk '$1 == "sample" { s += $5 } END { print s + 0 }')
  [ -n "$peak" ] && [ "$held" -eq "$peak" ] || fail "in use in the peak profile: $held bytes, peak $peak"
  # names without .pb.gz get it added; off, no peak file
  CULPERT_PEAK=yes CULPERT_SAMPLE_RATE=0 CULPERT_QUIET=1 CULPERT_OUTPUT="$work/plain" \
    run_pre "$BIN/wl_basic" >out 2>err || fail "wl_basic failed: $(cat err)"
  expect_totals plain.peak.pb.gz handle_request/parse "100 100000 100 100000 100"
  CULPERT_SAMPLE_RATE=0 CULPERT_QUIET=1 CULPERT_OUTPUT="$work/off.pb.gz" \
    run_pre "$BIN/wl_basic" >out 2>err || fail "wl_basic failed: $(cat err)"
  [ -f off.pb.gz ] && [ ! -e off.peak.pb.gz ] || fail "CULPERT_PEAK unset: files $(ls)"
  # an exec that fails takes back the in-use-at-peak file it wrote before
  # too: bash runs a file that is no program itself, after its exec failed
  printf 'true\n' >bogus && chmod +x bogus
  CULPERT_PEAK=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/xf.pb.gz" \
    run_pre bash -c './bogus; true' >out 2>err || fail "bash failed: $(cat err)"
  expect_line "$(cat err)" "^culpert: the exec failed \(Exec format error\): removed $work/xf\.pb\.gz\.[0-9]+\.exec1 again" \
    "the failed exec's file"
  [ -z "$(ls xf.*.exec* 2>/dev/null)" ] || fail "left after the failed exec: $(ls xf.*.exec*)"
  # a profile written in place (a device) has no file beside it: said once
  CULPERT_PEAK=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT=/dev/null \
    run_pre "$BIN/wl_basic" >out 2>err || fail "wl_basic failed: $(cat err)"
  expect_line "$(cat err)" '^culpert: CULPERT_PEAK: /dev/null is not a regular file; no in-use-at-peak profile written$' "device"
  # rewritten with the profile: a program killed by SIGKILL leaves both
  CULPERT_PEAK=1 CULPERT_INTERVAL=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/k.pb.gz" \
    env LD_PRELOAD="$LIB" "$BIN/wl_basic" --hang >out 2>err &
  prog=$!
  for _ in $(seq 100); do [ -f k.peak.pb.gz ] && break; sleep 0.1; done
  kill -9 "$prog"
  wait "$prog" 2>/dev/null
  expect_totals k.peak.pb.gz handle_request/parse "100 100000 100 100000 100"
  [ -z "$(ls ./*.tmp.* 2>/dev/null)" ] || fail "temporary files left: $(ls)"
  ;;
peak_sampled)
  # CULPERT_PEAK at a sampling rate other than 0: each stack's in-use
  # estimate is rounded in the file, and the peak file's comment
  # culpert.peak_inuse_bytes is still its in-use total (it was the table's
  # running sum, unrounded: a byte above the total for 4 of these 40), the
  # same peak as the profile beside it states.
  for rate in 4K 16K; do
    for seed in $(seq 20); do
      CULPERT_PEAK=1 CULPERT_SAMPLE_RATE=$rate CULPERT_SEED=$seed CULPERT_QUIET=1 \
        CULPERT_OUTPUT="$work/s.pb.gz" run_pre "$BIN/wl_basic" >out 2>err ||
        fail "wl_basic failed: $(cat err)"
      p=$(profile s.peak.pb.gz)
      peak=$(printf '%s\n' "$p" | awk -F= '$1 == "comment culpert.peak_inuse_bytes" {print $2}')
      held=$(printf '%s\n' "$p" | awk '$1 == "sample" { s += $5 } END { print s + 0 }')
      [ -n "$peak" ] && [ "$held" -eq "$peak" ] ||
        fail "rate $rate, seed $seed: in use in the peak profile $held bytes, its peak $peak"
      now=$(profile s.pb.gz | awk -F= '$1 == "comment culpert.peak_inuse_bytes" {print $2}')
      [ "$now" = "$peak" ] || fail "rate $rate, seed $seed: peak $now in the profile, $peak beside it"
    done
  done
  ;;
interval)
  # CULPERT_INTERVAL=1: the exit profile's file is rewritten every second,
  # so a program killed by SIGKILL leaves a complete profile; one line on
  # stderr however many rewrites. Then the same in a fork child, which
  # writes its own file.
  # wait_for FILE: until FILE exists (10 s at most)
  wait_for() {
    for _ in $(seq 100); do [ -f "$1" ] && return 0; sleep 0.1; done
    return 1
  }
  # (env execs the program, so $! is the program's pid.)
  CULPERT_INTERVAL=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/i.pb.gz" \
    env LD_PRELOAD="$LIB" "$BIN/wl_basic" --hang >out 2>err &
  prog=$!
  wait_for i.pb.gz || fail "no profile 10 s into a run with CULPERT_INTERVAL=1"
  sleep 2.5 # two more rewrites
  kill -9 "$prog"
  wait "$prog" 2>/dev/null
  expect_totals i.pb.gz handle_request/parse "100 100000 40 40000 100"
  expect_line "$(profile i.pb.gz)" '^comment culpert.span_overflow=6$' "span counts"
  expect_line "$(cat err)" "^culpert: wrote profile to $work/i.pb.gz \\([0-9]+ samples?\\); rewriting it every 1 s$" "stderr"
  [ "$(grep -c . err)" -eq 1 ] || fail "want one stderr line for all rewrites: $(cat err)"
  [ -z "$(ls i.pb.gz.tmp.* 2>/dev/null)" ] || fail "temporary files left: $(ls)"
  expect_line "$(cat out)" '^failures=0$' "program's own checks"
  CULPERT_INTERVAL=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/f.pb.gz" \
    env LD_PRELOAD="$LIB" "$BIN/wl_basic" --fork-hang >out 2>err &
  prog=$!
  child=
  for _ in $(seq 100); do
    child=$(ls f.pb.gz.* 2>/dev/null | grep -v tmp | head -1)
    [ -n "$child" ] && break
    sleep 0.1
  done
  if [ -n "$child" ]; then
    kill -9 "${child##*.}"
    wait "$prog" || fail "wl_basic --fork-hang failed: $(cat out)"
    expect_totals "$child" handle_request/parse "100 100000 40 40000 100"
    # the parent, whose child was killed, exits and writes its exit profile
    expect_line "$(cat err)" "^culpert: wrote profile to $work/f.pb.gz \\([0-9]+ samples?\\)$" "parent's exit"
  else
    fail "no profile from the fork child 10 s into the run"
    pkill -9 -P "$prog"
    wait "$prog"
  fi
  # A bad value: one warning, the exit profile only.
  CULPERT_INTERVAL=soon CULPERT_OUTPUT="$work/b.pb.gz" run_pre "$BIN/wl_basic" >out 2>err ||
    fail "wl_basic failed with a bad CULPERT_INTERVAL"
  expect_line "$(cat err)" '^culpert: CULPERT_INTERVAL=soon is not a duration' "bad value"
  expect_line "$(cat err)" "^culpert: wrote profile to $work/b.pb.gz \\([0-9]+ samples?\\)$" "exit profile"
  ;;
rewrite_consistency)
  # Profiles rewritten while two threads sample (a USR2 every 50 ms, rate
  # 0, CULPERT_PEAK): in every copy, no stack shows more in use than
  # allocated, and a peak file's in-use total is its own peak comment.
  # Samples recorded between the copy of the records and the read of the
  # live table once broke both (12 of 49 rewrites, and every peak file).
  # Each rewrite's profile and peak file hold the same samples (each once
  # took a copy of its own, a few samples apart).
  # Paced by the rewrites, not by the clock: on a busy machine a rewrite of
  # 30 000 samples can take longer than the pause between signals, and
  # signals that come while one is written make one rewrite. The growth
  # ends (SIGUSR1) once 25 pairs are written, or after 30 s.
  CULPERT_SNAPSHOT_SIGNAL=USR2 CULPERT_PEAK=1 CULPERT_SAMPLE_RATE=0 CULPERT_STACK=fp \
    CULPERT_OUTPUT="$work/g.pb.gz" env LD_PRELOAD="$LIB" \
    "$BIN/wl_threads" --grow 30000 >out 2>err &
  prog=$!
  mkdir copies
  # the first USR2 only once the library's handler is in place
  for _ in $(seq 100); do grep -q '^growing$' out && break; sleep 0.1; done
  grep -q '^growing$' out || fail "wl_threads --grow did not start in 10 s"
  for i in $(seq 200); do
    kill -s USR2 "$prog" 2>/dev/null || break
    sleep 0.05
    cp g.pb.gz "copies/now.$i.pb.gz" 2>/dev/null
    cp g.peak.pb.gz "copies/peak.$i.pb.gz" 2>/dev/null
    [ "$(grep -c 'wrote in-use-at-peak profile to' err)" -ge 25 ] && break
  done
  kill -s USR1 "$prog" 2>/dev/null
  wait "$prog" || fail "wl_threads --grow failed: $(cat out err)"
  cp g.pb.gz copies/now.exit.pb.gz
  cp g.peak.pb.gz copies/peak.exit.pb.gz
  n=$(ls copies | wc -l)
  [ "$n" -ge 20 ] || fail "only $n profiles copied while the program ran"
  for f in copies/*.pb.gz; do
    bad=$(profile "$f" | awk '$1 == "sample" && ($4 > $2 || $5 > $3) && n++ < 3')
    [ -z "$bad" ] || fail "$f: more in use than allocated: $bad"
  done
  for f in copies/peak.*.pb.gz; do
    read -r inuse peak < <(profile "$f" | awk '$1 == "sample" { s += $5 }
      $1 == "comment" && $2 ~ /^culpert.peak_inuse_bytes=/ { sub(/.*=/, "", $2); p = $2 }
      END { printf "%d %d\n", s, p }')
    [ "$inuse" = "$peak" ] || fail "$f: in use $inuse, its peak comment $peak"
  done
  bad=$(awk '{ c = $(NF - 1); sub(/^\(/, "", c) }
    /wrote profile to/ { n = c }
    /wrote in-use-at-peak profile to/ && c != n && !bad { bad = n " and " c " samples" }
    END { print bad }' err)
  [ -z "$bad" ] || fail "a rewrite's profile and peak file hold different samples: $bad"
  pairs=$(grep -c 'wrote in-use-at-peak profile to' err)
  [ "$pairs" -ge 20 ] || fail "only $pairs peak files written: $(head -4 err)"
  [ "$(profile copies/now.exit.pb.gz | awk '$1 == "sample" { s += $2 } END { print s }')" = \
    "$(profile copies/peak.exit.pb.gz | awk '$1 == "sample" { s += $2 } END { print s }')" ] ||
    fail "the exit profile and its peak file allocated different totals"
  ;;
snapshot_signal)
  # CULPERT_SNAPSHOT_SIGNAL=USR2: each USR2 rewrites the exit profile's
  # file while the program runs on (one stderr line each); after SIGKILL
  # the file holds the last one. A fork child answers with its own file. A
  # signal the program inherited ignored stays ignored; a bad value is
  # refused with one warning.
  wait_for_line() { # FILE PATTERN: until FILE has a line matching (10 s at most)
    for _ in $(seq 100); do grep -Eq -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
    return 1
  }
  CULPERT_SNAPSHOT_SIGNAL=USR2 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/u.pb.gz" \
    env LD_PRELOAD="$LIB" "$BIN/wl_basic" --hang >out 2>err &
  prog=$!
  wait_for_line out '^failures=' || fail "wl_basic did not get ready in 10 s"
  [ -f u.pb.gz ] && fail "a profile before the signal"
  written="^culpert: wrote profile to $work/u\.pb\.gz \([0-9]+ samples?\)$"
  kill -s USR2 "$prog"
  wait_for_line err "$written" || fail "no profile 10 s after the first USR2: $(cat err)"
  expect_totals u.pb.gz handle_request/parse "100 100000 40 40000 100"
  first=$(stat -c %i u.pb.gz)
  kill -s USR2 "$prog"
  for _ in $(seq 100); do [ "$(grep -c . err)" -ge 2 ] && break; sleep 0.1; done
  [ "$(grep -Ec "$written" err)" -eq 2 ] || fail "want two stderr lines after two USR2: $(cat err)"
  [ "$(stat -c %i u.pb.gz)" != "$first" ] || fail "the second USR2 did not replace the file"
  kill -0 "$prog" 2>/dev/null || fail "USR2 ended the program"
  kill -9 "$prog"
  wait "$prog" 2>/dev/null
  expect_totals u.pb.gz handle_request/parse "100 100000 40 40000 100"
  [ -z "$(ls u.pb.gz.tmp.* 2>/dev/null)" ] || fail "temporary files left: $(ls)"
  # a fork child (its thread started again, its own file). The last run's
  # out goes first: the background job truncates it only once it starts,
  # and its "failures=" line, read before that, let the test look for a
  # child not forked yet (and then wait for good on its parent).
  rm -f out err
  CULPERT_SNAPSHOT_SIGNAL=USR2 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/c.pb.gz" \
    env LD_PRELOAD="$LIB" "$BIN/wl_basic" --fork-hang >out 2>err &
  prog=$!
  wait_for_line out '^failures=' || fail "the fork child did not get ready in 10 s"
  child=$(pgrep -P "$prog" | head -1)
  if [ -n "$child" ]; then
    kill -s USR2 "$child"
    wait_for_line err "^culpert: wrote profile to $work/c\.pb\.gz\.$child " ||
      fail "no profile from the fork child after USR2: $(cat err)"
    expect_totals "c.pb.gz.$child" handle_request/parse "100 100000 40 40000 100"
    kill -9 "$child"
  else
    fail "no fork child of $prog"
    pkill -9 -P "$prog"
  fi
  wait "$prog"
  # ignored when the program starts: stays ignored, nothing written
  rm -f out err
  CULPERT_SNAPSHOT_SIGNAL=SIGUSR2 CULPERT_OUTPUT="$work/g.pb.gz" \
    env --ignore-signal=USR2 LD_PRELOAD="$LIB" "$BIN/wl_basic" --hang >out 2>err &
  prog=$!
  wait_for_line out '^failures=' || fail "wl_basic did not get ready in 10 s"
  kill -s USR2 "$prog"
  sleep 0.3
  kill -0 "$prog" 2>/dev/null || fail "an ignored USR2 ended the program"
  [ -f g.pb.gz ] && fail "a profile on an ignored signal"
  expect_line "$(cat err)" "^culpert: CULPERT_SNAPSHOT_SIGNAL: signal $(kill -l USR2) is already ignored or handled; no snapshots on it$" "ignored signal"
  kill -9 "$prog"
  wait "$prog" 2>/dev/null
  # a bad value: one warning, the exit profile only
  CULPERT_SNAPSHOT_SIGNAL=TERM CULPERT_OUTPUT="$work/b.pb.gz" run_pre "$BIN/wl_basic" >out 2>err ||
    fail "wl_basic failed with a bad CULPERT_SNAPSHOT_SIGNAL"
  expect_line "$(cat err)" '^culpert: CULPERT_SNAPSHOT_SIGNAL=TERM is not USR1, USR2 or a real-time signal' "bad value"
  expect_line "$(cat err)" "^culpert: wrote profile to $work/b.pb.gz \\([0-9]+ samples?\\)$" "exit profile"
  ;;
write_on_signal)
  # CULPERT_WRITE_ON_SIGNAL=1: SIGINT, SIGTERM, SIGHUP, SIGQUIT and
  # SIGABRT (also from abort()) still end the program by the signal, after
  # a forked copy of it has written the exit profile; a program's own
  # handler is left alone; without the variable nothing changes.
  ulimit -c 0 # SIGQUIT and SIGABRT dump core by default
  # run_until_ready NAME ARGS...: start wl_basic in the background
  # (prog=pid) and wait until it has done its work. A shell without job
  # control starts background commands with SIGINT ignored: give it back
  # its default action (and SIGQUIT).
  run_until_ready() {
    local name=$1
    shift
    env --default-signal=INT,QUIT LD_PRELOAD="$LIB" CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/$name.pb.gz" \
      "$BIN/wl_basic" "$@" >"$name.out" 2>"$name.err" &
    prog=$!
    for _ in $(seq 100); do grep -q '^failures=' "$name.out" && return 0; sleep 0.1; done
    fail "$name: wl_basic did not get ready in 10 s"
  }
  # kill_expect SIG WHAT: send SIG to $prog, which must end by it
  kill_expect() {
    kill -s "$1" "$prog"
    wait "$prog"
    local rc=$?
    [ "$rc" -eq $((128 + $(kill -l "$1"))) ] || fail "$2: exit status $rc, want death by SIG$1"
  }
  for sig in INT TERM HUP QUIT ABRT; do
    CULPERT_WRITE_ON_SIGNAL=1 run_until_ready "s$sig" --hang
    # no thread of culpert's: a program may need to stay single-threaded
    threads=$(awk '/^Threads:/ {print $2}' "/proc/$prog/status")
    [ "$threads" = 1 ] || fail "SIG$sig: the program has $threads threads, want 1"
    kill_expect "$sig" "SIG$sig"
    expect_totals "s$sig.pb.gz" handle_request/parse "100 100000 40 40000 100"
    expect_line "$(cat "s$sig.err")" "^culpert: wrote profile to $work/s$sig.pb.gz \\([0-9]+ samples?\\)$" "SIG$sig stderr"
  done
  # abort(): the program raises SIGABRT itself
  out=$(CULPERT_WRITE_ON_SIGNAL=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/abort.pb.gz" \
    run_pre "$BIN/wl_basic" --abort 2>abort.err)
  rc=$?
  [ "$rc" -eq 134 ] || fail "abort(): exit status $rc, want 134 (SIGABRT): $(cat abort.err)"
  expect_line "$out" '^failures=0$' "abort()"
  expect_totals abort.pb.gz handle_request/parse "100 100000 40 40000 100"
  # out of address space under a soft limit (as an uncaught
  # std::bad_alloc would be), then abort(): the copy that writes the
  # profile may go up to the hard limit
  out=$(ulimit -S -v 400000 && CULPERT_WRITE_ON_SIGNAL=1 CULPERT_SAMPLE_RATE=0 \
    CULPERT_OUTPUT="$work/oom.pb.gz" run_pre "$BIN/wl_basic" --exhaust 2>oom.err)
  rc=$?
  [ "$rc" -eq 134 ] || fail "out of memory: exit status $rc, want 134 (SIGABRT): $(cat oom.err)"
  expect_line "$out" '^exhausted after [0-9]+ MiB$' "out of memory"
  expect_totals oom.pb.gz handle_request/parse "100 100000 40 40000 100"
  # the same signal twice at once (to the process and to its group, say)
  # counts as one: the profile is still written
  CULPERT_WRITE_ON_SIGNAL=1 run_until_ready twice --hang
  kill -s TERM "$prog"
  kill -s TERM "$prog"
  wait "$prog"
  rc=$?
  [ "$rc" -eq 143 ] || fail "SIGTERM twice: exit status $rc"
  expect_totals twice.pb.gz handle_request/parse "100 100000 40 40000 100"
  # a thread of the program holds the dynamic loader's lock (inside a
  # dl_iterate_phdr callback) when the signal comes: the forked copy finds
  # the objects without that lock and writes a symbolized profile at once,
  # not after the 60 s limit with none
  CULPERT_WRITE_ON_SIGNAL=1 run_until_ready busy --loader-busy
  started=$(date +%s)
  kill -s TERM "$prog"
  wait "$prog"
  rc=$?
  took=$(($(date +%s) - started))
  [ "$rc" -eq 143 ] || fail "loader lock held: exit status $rc"
  [ "$took" -lt 30 ] || fail "loader lock held: the signal took $took s to end the program"
  expect_totals busy.pb.gz handle_request/parse "100 100000 40 40000 100"
  expect_line "$(profile busy.pb.gz)" ' span=handle_request/parse frames=parse_alloc;handle_request;main;' \
    "loader lock held: symbolized stack"
  # files replaced on disk while the program runs (a package upgrade under
  # a running service): the profile still names the code that is loaded,
  # read through the kernel (/proc/self/exe, map_files) or, where that is
  # not permitted, from memory; never the new file's names
  cp "$BIN/wl_basic" "$work/wl_up"
  cp "$PLUGIN" "$work/plugin_up.so"
  CULPERT_WRITE_ON_SIGNAL=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/up.pb.gz" \
    env LD_PRELOAD="$LIB" "$work/wl_up" --hang >up.out 2>up.err &
  prog=$!
  CULPERT_WRITE_ON_SIGNAL=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/upl.pb.gz" \
    env LD_PRELOAD="$LIB" "$BIN/wl_dlopen" "$work/plugin_up.so" --keep >upl.out 2>upl.err &
  prog2=$!
  for _ in $(seq 100); do
    grep -q '^failures=' up.out && grep -q '^ready' upl.out && break
    sleep 0.1
  done
  rm "$work/wl_up" "$work/plugin_up.so"
  cp "$BIN/wl_threads" "$work/wl_up"
  cp "$LIB" "$work/plugin_up.so"
  kill -s TERM "$prog" "$prog2"
  wait "$prog"
  wait "$prog2"
  expect_line "$(profile up.pb.gz)" ' span=handle_request/parse frames=parse_alloc;handle_request;main;' \
    "executable replaced: stack"
  expect_line "$(profile upl.pb.gz)" ' frames=([^;]*;)?plugin_work;main;' "library replaced: stack"
  # Threads allocating at the instant of the signal (every allocation
  # sampled, so they are often inside culpert): the forked copy writes a
  # readable profile that holds everything the joined threads did.
  for round in 1 2 3 4 5; do
    CULPERT_WRITE_ON_SIGNAL=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/t$round.pb.gz" \
      env LD_PRELOAD="$LIB" "$BIN/wl_threads" --hang >"t$round.out" 2>"t$round.err" &
    prog=$!
    for _ in $(seq 100); do grep -q '^done' "t$round.out" && break; sleep 0.1; done
    sleep 0.2
    kill_expect TERM "threads, round $round"
    expect_totals "t$round.pb.gz" pool/job "200 400000 0 0 200"
    expect_totals "t$round.pb.gz" churn "2000 200000 0 0 2000"
  done
  # without the variable: the signal ends the program, no profile
  run_until_ready plain --hang
  kill_expect INT "plain SIGINT"
  [ -f plain.pb.gz ] && fail "a profile was written on SIGINT without CULPERT_WRITE_ON_SIGNAL"
  # culpert's handlers are hidden: a program that sets up its own only
  # where the action is the default (as Python does for SIGINT) still
  # does, and its handler runs; when it then ends itself by SIGINT with
  # the default action (as Python does), the profile is written
  CULPERT_WRITE_ON_SIGNAL=1 run_until_ready own --handle-int
  kill_expect INT "wl_basic --handle-int"
  expect_line "$(cat own.out)" '^SIGINT default=1$' "sigaction hides culpert's handler"
  expect_line "$(cat own.out)" '^SIGTERM default=1$' "signal hides culpert's handler"
  expect_line "$(cat own.out)" '^handled SIGINT$' "the program's handler"
  expect_totals own.pb.gz handle_request/parse "100 100000 40 40000 100"
  # the program set SIGTERM to the default itself: culpert's handler stays
  CULPERT_WRITE_ON_SIGNAL=1 run_until_ready own2 --handle-int
  kill_expect TERM "SIGTERM after signal(SIGTERM, SIG_DFL)"
  expect_totals own2.pb.gz handle_request/parse "100 100000 40 40000 100"
  # a handler set with SA_RESETHAND (node's): it runs, finds the default
  # action, raises the signal again, and the profile is written as the
  # default action ends the program
  CULPERT_WRITE_ON_SIGNAL=1 run_until_ready once --resethand
  kill_expect TERM "wl_basic --resethand"
  expect_line "$(cat once.out)" '^SIGTERM resethand=1$' "sigaction reports the program's handler"
  expect_line "$(cat once.out)" '^handled SIGTERM default=1$' "the handler, after the reset"
  expect_totals once.pb.gz handle_request/parse "100 100000 40 40000 100"
  # an ignored signal stays ignored
  (
    trap '' HUP
    CULPERT_WRITE_ON_SIGNAL=1 run_until_ready ign --hang
    kill -s HUP "$prog"
    sleep 0.5
    kill -0 "$prog" 2>/dev/null || echo "gone" >ign.gone
    kill -9 "$prog"
  )
  [ -f ign.gone ] && fail "an ignored SIGHUP ended the program"
  ;;
install)
  # cmake --install gives lib/libculpert.so, include/culpert.h, a
  # relocatable pkg-config file and find_package(culpert) -> culpert::culpert.
  cmake --install "$BUILD_DIR" --prefix "$work/inst" --component collector >/dev/null ||
    fail "cmake --install failed"
  for f in lib/libculpert.so include/culpert.h lib/pkgconfig/culpert.pc \
    lib/cmake/culpert/culpertConfig.cmake lib/cmake/culpert/culpertConfigVersion.cmake; do
    [ -f "inst/$f" ] || fail "not installed: $f"
  done
  flags=$(PKG_CONFIG_PATH="$work/inst/lib/pkgconfig" pkg-config --cflags --libs culpert) ||
    fail "pkg-config culpert"
  # shellcheck disable=SC2086
  # optimised, as users build: the example's 100 blocks of 4 KiB must stay
  # (an unused malloc is dropped by the compiler), all in the snapshot
  cc -O2 -o pc "$SRC_DIR/examples/find_package/main.c" $flags -Wl,-rpath,"$work/inst/lib" ||
    fail "cannot build with pkg-config flags"
  out=$(CULPERT_QUIET=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/pc.pb.gz" ./pc pcsnap.pb.gz) ||
    fail "pkg-config build fails"
  expect_line "$out" 'active=1' "linked through pkg-config"
  expect_totals pcsnap.pb.gz consumer_work "100 409600 0 0 100"
  cmake -S "$SRC_DIR/examples/find_package" -B fp -DCMAKE_PREFIX_PATH="$work/inst" \
    -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build fp >/dev/null || fail "find_package(culpert) consumer does not build"
  out=$(CULPERT_QUIET=1 CULPERT_SAMPLE_RATE=0 CULPERT_OUTPUT="$work/fp.pb.gz" fp/consumer fpsnap.pb.gz) ||
    fail "consumer failed"
  expect_line "$out" 'active=1' "find_package consumer"
  expect_totals fpsnap.pb.gz consumer_work "100 409600 0 0 100"
  # The installed header, every call and macro of it, compiles cleanly
  # under strict warnings in C and in C++ (an old-style cast in a macro
  # breaks a C++ build with -Wold-style-cast -Werror).
  cat >api.c <<'EOS'
#include <culpert.h>
int use_all(void);
int use_all(void)
{
  CULPERT_SPAN("scoped");
  culpert_span_enter("outer");
  uint64_t id = culpert_span_current();
  culpert_span_exit();
  culpert_span_enter_child_of("child", id);
  culpert_span_exit();
  unsigned char *buf;
  size_t len;
  int rc = culpert_snapshot(&buf, &len);
  return rc + culpert_snapshot_write("api.pb.gz") + culpert_is_active() + (len > 0);
}
EOS
  cp api.c api.cc
  cc -std=c11 -Wall -Wextra -Wpedantic -Wstrict-prototypes -Wcast-qual -Werror \
    -I"$work/inst/include" -c api.c -o api_c.o || fail "culpert.h warns in C"
  c++ -std=c++11 -Wall -Wextra -Wpedantic -Wold-style-cast -Wzero-as-null-pointer-constant \
    -Werror -I"$work/inst/include" -c api.cc -o api_cc.o 2>cxx_err ||
    fail "culpert.h warns in C++: $(cat cxx_err)"
  ;;
*)
  echo "run.sh: unknown case $case_name" >&2
  exit 2
  ;;
esac
[ "$fails" -eq 0 ]
