#!/bin/sh
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# `culpert run` end to end with the real libculpert from the build tree:
# the report of a workload with known spans, exit status pass-through
# (plain, signal), the environment PROGRAM gets, the default file name,
# --no-report, SIGTERM forwarding, the profiles of the processes PROGRAM
# starts and of its image before an exec, and the errors (no profile from
# a static binary or static PIE, exec failure, CULPERT_LIB pointing
# nowhere).
#   run_e2e.sh CULPERT WORKLOAD WORKLOAD_STATIC WORKLOAD_STATIC_PIE WORKLOAD_ASAN
culpert=$1 workload=$2 static=$3 static_pie=$4 asan=$5
. "$(dirname "$0")/lib.sh"
# wait_ready WHAT: wait, 60 s at most, until `run_workload wait` has
# created ./ready.
wait_ready() {
  i=0
  while [ ! -e ready ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
  [ -e ready ] || fail "workload never started$1"
}

# 1. Exact report at --rate 0, exit status 0.
"$culpert" run --rate 0 -o "$tmp/a.pb.gz" -- "$workload" >out 2>err
rc=$?
[ $rc -eq 0 ] || fail "run exited $rc, want 0: $(cat err)"
[ -s a.pb.gz ] || fail "no profile at -o a.pb.gz"
has out "Hierarchical span report (350 samples, sample rate every allocation):" || fail "report header: $(head -1 out)"
has out "  Bytes are exact: every allocation was recorded (sample rate 0)." && ! has out "unbiased estimates" ||
  fail "report at rate 0 says its bytes are estimates: $(cat out)"
"$culpert" report --flat "$tmp/a.pb.gz" >out2 2>err || fail "report --flat at rate 0: $(cat err)"
has out2 "  exact: every allocation was recorded (sample rate 0)." && ! has out2 "unbiased estimates" ||
  fail "report --flat at rate 0 says its bytes are estimates: $(cat out2)"
has out "handle_batch                                 900.00 KB   69.23%  (self 100.00 KB)" || fail "handle_batch line: $(cat out)"
has out "└─ decode_frame                              800.00 KB   61.54%  (self 800.00 KB)" || fail "decode_frame line: $(cat out)"
has out "flush_output                                 400.00 KB   30.77%  (self 400.00 KB)" || fail "flush_output line: $(cat out)"
has out "No span in" && fail "a run with spans got the callsite view too: $(cat out)"

# 1b. A program that opens no span: the tree is one line, so the callsites
#     that allocated follow it.
"$culpert" run --rate 0 -o "$tmp/p.pb.gz" -- "$workload" plain >out 2>err
rc=$?
[ $rc -eq 0 ] || fail "plain run exited $rc: $(cat err)"
grep -q '^(no span)  *100\.00 KB  100\.00%  (self 100\.00 KB)$' out || fail "plain run: tree: $(cat out)"
has out "No span in this profile (nothing was allocated inside one): where the bytes" || fail "plain run: no line before the callsites: $(cat out)"
has out "Top callsites in unattributed samples — outside any span (sample rate every allocation):" || fail "plain run: no callsite view: $(cat out)"
grep -Eq '^  churn .*run_workload\.c:[0-9]+\) +100 +100\.00 KB  100\.00%$' out || fail "plain run: the callsite row: $(cat out)"
# `culpert report` of that profile says the same, with its options (two
# files: merged); from standard input, which it cannot read twice, a hint.
"$culpert" report "$tmp/p.pb.gz" >out2 2>err || fail "report of a plain profile: $(cat err)"
sed '/^culpert: /d' out | cmp -s - out2 || fail "report of a plain profile differs from the run's: $(diff out out2)"
cp "$tmp/p.pb.gz" "$tmp/p2.pb.gz"
"$culpert" report --top 0 "$tmp/p.pb.gz" "$tmp/p2.pb.gz" >out 2>err || fail "report of two plain profiles: $(cat err)"
has out "No span in these profiles" || fail "report of two plain profiles: the line: $(cat out)"
grep -Eq '^  churn .*run_workload\.c:[0-9]+\) +200 +200\.00 KB  100\.00%$' out || fail "report of two plain profiles: the callsite row: $(cat out)"
# A directory stands for the profiles in it (not one being written).
mkdir "$tmp/pd" && cp "$tmp/p.pb.gz" "$tmp/pd/p.pb.gz" && cp "$tmp/p.pb.gz" "$tmp/pd/p.pb.gz.77" &&
  echo partial >"$tmp/pd/p.pb.gz.tmp.78"
"$culpert" report --top 0 "$tmp/pd" >out2 2>err || fail "report of a directory: $(cat err)"
cmp -s out out2 || fail "report of a directory differs from its two files': $(diff out out2)"
"$culpert" flamegraph "$tmp/pd" >out2 2>err || fail "flamegraph of a directory: $(cat err)"
grep -Eq ';main;churn 204800$' out2 || fail "flamegraph of a directory: $(cat out2)"
"$culpert" report - <"$tmp/p.pb.gz" >out 2>err || fail "report of a plain profile from stdin: $(cat err)"
has out "No span in this profile: 'culpert report --no-span' shows where its bytes were" || fail "report from stdin: the hint: $(cat out)"
"$culpert" report --inuse "$tmp/p.pb.gz" >out 2>err || fail "report --inuse of a plain profile: $(cat err)"
has out "No span" && fail "report --inuse, nothing in use: the callsite view of nothing: $(cat out)"
"$culpert" report --format json "$tmp/p.pb.gz" >out 2>err || fail "report --format json: $(cat err)"
has out "No span" && fail "report --format json got the callsite view: $(cat out)"
"$culpert" run --rate 0 -o "$tmp/p.pb.gz" -- "$workload" plain >out 2>err
has out "Still in use" && fail "plain run: nothing was left in use, yet: $(cat out)"

# 1c. What was never freed: the report ends with it, and the command that
#     shows where.
"$culpert" run --rate 0 -o "$tmp/l.pb.gz" -- "$workload" leak >out 2>err
rc=$?
[ $rc -eq 0 ] || fail "leak run exited $rc: $(cat err)"
has out "Still in use when the profile was written (exact): 100.00 KB in 10 blocks, peak 101.00 KB;" || fail "leak run: the in-use line: $(cat out)"
has out "to see where: culpert report --inuse $tmp/l.pb.gz" || fail "leak run: the command: $(cat out)"
"$culpert" report --inuse "$tmp/l.pb.gz" >out 2>err || fail "leak: report --inuse: $(cat err)"
grep -q '^cache_fill  *100\.00 KB  100\.00%  (self 100\.00 KB)$' out || fail "leak: report --inuse: $(cat out)"
# A path with a space is quoted for the shell, one with a $ too.
mkdir "$tmp/my dir" "$tmp/a\$b"
"$culpert" run --rate 0 -o "$tmp/my dir/l.pb.gz" -- "$workload" leak >out 2>err || fail "leak run in 'my dir': $(cat err)"
has out "to see where: culpert report --inuse \"$tmp/my dir/l.pb.gz\"" || fail "leak run: the quoted command: $(cat out)"
"$culpert" run --rate 0 -o "$tmp/a\$b/l.pb.gz" -- "$workload" leak >out 2>err || fail "leak run in 'a\$b': $(cat err)"
has out "to see where: culpert report --inuse '$tmp/a\$b/l.pb.gz'" || fail "leak run: the single-quoted command: $(cat out)"

# 1e. PROGRAM runs another program with an LD_PRELOAD of its own: the run
#     says that program went unprofiled, and how to profile it.
"$culpert" run --rate 0 -o "$tmp/u.pb.gz" -- env LD_PRELOAD= "$workload" plain >out 2>err ||
  fail "env LD_PRELOAD= run: $(cat err)"
has err "culpert: note: env ran $workload with an LD_PRELOAD that leaves libculpert out, so $workload was not profiled; $tmp/u.pb.gz holds only what env allocated before that." ||
  fail "env LD_PRELOAD= run: no note: $(cat err)"
has err "LD_PRELOAD=LIB culpert run -- PROGRAM" || fail "env LD_PRELOAD= run: no advice: $(cat err)"

# 1d. Several processes: the report covers them merged (the shell's own
#     profile holds well under 1% of the bytes), and the command names
#     their directory when it holds just the run's files, else every file.
mkdir "$tmp/multi"
"$culpert" run --rate 0 -o "$tmp/multi/m.pb.gz" -- sh -c 'for i in 1 2 3 4 5 6; do "$0" leak; done' "$workload" >out 2>err ||
  fail "six leak runs: $(cat err)"
has out "7 profiles merged" || fail "six leak runs under sh: not merged: $(cat out)"
[ "$(ls "$tmp/multi" | wc -l)" -eq 7 ] || fail "six leak runs under sh: files $(ls "$tmp/multi")"
has out "to see where: culpert report --inuse $tmp/multi
" || fail "six leak runs: the command does not name the directory: $(cat out)"
mkdir "$tmp/multi2" && cp "$tmp/multi/m.pb.gz" "$tmp/multi2/older.pb.gz"
"$culpert" run --rate 0 -o "$tmp/multi2/m.pb.gz" -- sh -c '"$0" leak; "$0" leak' "$workload" >out 2>err ||
  fail "two leak runs: $(cat err)"
line=$(grep '^to see where: culpert report --inuse ' out)
set -- ${line#to see where: culpert report --inuse }
[ $# -eq 3 ] || fail "two leak runs beside another profile: not the run's three files: $line"
for f in "$@"; do
  case "$f" in "$tmp/multi2/m.pb.gz" | "$tmp/multi2/m.pb.gz."[0-9]*) ;; *) fail "two leak runs: $f in: $line" ;; esac
done

# 1c. --peak: beside the profile, k.peak.pb.gz holds the in-use values of
#     the peak (build_index's 500 KiB, freed before the exit), and the run
#     says how to see them; a directory leaves that file out.
"$culpert" run --peak --rate 0 -o "$tmp/k.pb.gz" -- "$workload" peak >out 2>err
rc=$?
[ $rc -eq 0 ] || fail "run --peak exited $rc: $(cat err)"
has out "where the in-use peak was held: culpert report --inuse $tmp/k.peak.pb.gz" ||
  fail "run --peak: no line naming the peak profile: $(cat out)"
"$culpert" report --inuse k.peak.pb.gz >out 2>err || fail "report of the peak profile: $(cat err)"
grep -q '^build_index  *500\.00 KB  100\.00%  (self 500\.00 KB)$' out ||
  fail "peak profile: build_index: $(cat out)"
grep -q '^cache_fill  *0 B ' out || fail "peak profile: cache_fill: $(cat out)"
grep -Eq '^  In-use bytes were still allocated at the in-use peak, 20[0-9-]+ [0-9:]+ UTC\.$' out ||
  fail "peak profile: the header: $(cat out)"
"$culpert" report --inuse k.pb.gz >out 2>err || fail "report of the profile: $(cat err)"
grep -q '^cache_fill  *10\.00 KB  100\.00%' out || fail "profile at exit: cache_fill: $(cat out)"
has out "In-use bytes were still allocated when the profile was written." ||
  fail "profile at exit: the header: $(cat out)"
"$culpert" info k.peak.pb.gz >out 2>err || fail "info of the peak profile: $(cat err)"
grep -Eq '^In-use values: +at the in-use peak, 20[0-9-]+ [0-9:]+ UTC$' out ||
  fail "info of the peak profile: $(cat out)"
has out "culpert.inuse_at_peak" && fail "info lists culpert.inuse_at_peak again under Properties"
mkdir kd kp && cp k.pb.gz k.peak.pb.gz kd/ && cp k.peak.pb.gz kp/
"$culpert" report --inuse kd >out 2>err || fail "report of a directory with a peak profile: $(cat err)"
"$culpert" report --inuse k.pb.gz >out2 2>&1
cmp -s out out2 || fail "a directory read its peak profile too: $(diff out out2)"
"$culpert" report kp >out 2>err
[ $? -eq 2 ] && has err "kp: a directory of in-use-at-peak profiles only (NAME.peak.pb.gz)" ||
  fail "a directory of peak profiles only: $(cat err)"
"$culpert" run --rate 0 -o "$tmp/n.pb.gz" -- "$workload" peak >out 2>err
[ ! -e n.peak.pb.gz ] || fail "a peak profile without --peak"
has out "in-use peak" && fail "a run without --peak speaks of the peak: $(cat out)"

# 2. The program's exit status passes through, report still printed.
"$culpert" run --rate 4K -o b.pb.gz -- "$workload" 7 >out 2>err
rc=$?
[ $rc -eq 7 ] || fail "exit status 7 not passed through (got $rc)"
has out "decode_frame" || fail "no report after a failing program"
has out "  Bytes are unbiased estimates scaled up from the sampled allocations." ||
  fail "report at rate 4K does not say its bytes are estimates: $(cat out)"

# 3. The environment PROGRAM runs with; LD_PRELOAD keeps what was there.
# (ASAN_OPTIONS: an ASan-built culpert must accept the foreign LD_PRELOAD.)
ASAN_OPTIONS=verify_asan_link_order=0 CULPERT_ROOT_PID=1 LD_PRELOAD=libm.so.6 "$culpert" run --rate 512KiB --stack fp -o c.pb.gz --no-report -- "$workload" env >out 2>err
rc=$?
[ $rc -eq 0 ] || fail "env run exited $rc: $(cat err)"
grep -q '^LD_PRELOAD=/.*/libculpert\.so libm\.so\.6$' out || fail "LD_PRELOAD not prepended: $(grep LD_PRELOAD out)"
has out "CULPERT_OUTPUT=$tmp/c.pb.gz" || fail "CULPERT_OUTPUT: $(grep OUTPUT out)"
has out "CULPERT_SAMPLE_RATE=524288" || fail "--rate 512KiB not passed as 524288: $(grep RATE out)"
has out "CULPERT_STACK=fp" || fail "--stack fp not passed: $(grep STACK out)"
# An inherited CULPERT_ROOT_PID would make PROGRAM think it is a child.
grep -qx "CULPERT_ROOT_PID=1" out && fail "CULPERT_ROOT_PID from culpert's environment reached PROGRAM"
has out "CULPERT_WRITE_ON_SIGNAL=1" || fail "CULPERT_WRITE_ON_SIGNAL not set: $(cat out)"
[ "$(grep -c . out)" -eq 6 ] || fail "--no-report printed a report: $(cat out)"

# 4. Default file name culpert.<program>.<pid>.pb.gz in the current directory.
"$culpert" run --no-report -- "$workload" >out 2>err
n=$(ls culpert.run_workload.*.pb.gz 2>/dev/null | wc -l)
[ "$n" -eq 1 ] || fail "default profile name: $(ls)"
[ -s out ] && fail "--no-report printed: $(cat out)"

# 5. SIGTERM to culpert reaches PROGRAM, which writes its profile before the
#    signal ends it: the report is printed and culpert exits 128+15. With
#    CULPERT_WRITE_ON_SIGNAL=0 it writes none, and culpert says so.
for mode in 1 0; do
  rm -f ready d.pb.gz
  CULPERT_WRITE_ON_SIGNAL=$mode "$culpert" run --rate 0 -o d.pb.gz -- "$workload" wait "$tmp/ready" >out 2>err &
  pid=$!
  wait_ready
  kill -TERM $pid
  wait $pid
  rc=$?
  [ $rc -eq 143 ] || fail "SIGTERM ($mode): culpert exited $rc, want 143"
  if [ $mode = 1 ]; then
    [ -f d.pb.gz ] || fail "SIGTERM: no profile written: $(cat err)"
    has out "handle_batch" || fail "SIGTERM: no report: $(cat out)"
  else
    has err "was killed by signal SIGTERM (status 143) and wrote no profile" || fail "SIGTERM: no note: $(cat err)"
  fi
done

# 5a. PROGRAM ends with abort(): it writes its profile first, the report
#     is printed, and culpert exits 128+6. SIGQUIT (Ctrl-\) sent to culpert
#     is passed on and does the same (a background job of a shell
#     without job control starts with SIGQUIT ignored: not here).
ulimit -c 0
"$culpert" run --rate 0 -o a.pb.gz -- "$workload" abort >out 2>err
rc=$?
[ $rc -eq 134 ] || fail "abort(): culpert exited $rc, want 134: $(cat err)"
has out "handle_batch                                 900.00 KB   69.23%  (self 100.00 KB)" || fail "abort(): no report: $(cat out) $(cat err)"
rm -f ready
env --default-signal=QUIT "$culpert" run --rate 0 -o q.pb.gz -- "$workload" wait "$tmp/ready" >out 2>err &
pid=$!
wait_ready " (QUIT)"
kill -QUIT $pid
wait $pid
rc=$?
[ $rc -eq 131 ] || fail "SIGQUIT: culpert exited $rc, want 131: $(cat err)"
has out "handle_batch" || fail "SIGQUIT: no report: $(cat out) $(cat err)"

# 5b. USR2 sent to culpert reaches PROGRAM too: with
#     CULPERT_SNAPSHOT_SIGNAL=USR2 the profile is written while PROGRAM runs
#     on. A signal culpert was started with ignored (nohup's SIGHUP) stays
#     ignored in PROGRAM and is not forwarded.
rm -f ready u.pb.gz
CULPERT_SNAPSHOT_SIGNAL=USR2 env --ignore-signal=HUP "$culpert" run --rate 0 -o u.pb.gz -- "$workload" wait "$tmp/ready" >out 2>err &
pid=$!
wait_ready " (USR2)"
kill -USR2 $pid
i=0
while [ ! -e u.pb.gz ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -e u.pb.gz ] || fail "USR2 to culpert: no snapshot from PROGRAM: $(cat err)"
prog=$(pgrep -P $pid | head -1)
kill -HUP $pid
[ -n "$prog" ] && kill -HUP "$prog"
sleep 0.2
kill -0 $pid 2>/dev/null || fail "USR2 or an ignored SIGHUP ended the run: $(cat err)"
[ -n "$prog" ] && { kill -0 "$prog" 2>/dev/null || fail "PROGRAM did not inherit SIGHUP ignored"; }
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 143 ] || fail "SIGTERM after USR2: culpert exited $rc, want 143: $(cat err)"
has out "handle_batch" || fail "SIGTERM after USR2: no report: $(cat out)"

# 5b. A profile directory that does not exist: exit 2 before PROGRAM runs.
"$culpert" run -o "$tmp/nodir/x.pb.gz" -- "$workload" env >out 2>err
rc=$?
[ $rc -eq 2 ] || fail "missing profile directory: exit $rc, want 2"
has err "culpert: error: cannot write a profile in $tmp/nodir: No such file or directory" || fail "missing profile directory: message: $(cat err)"
[ -s out ] && fail "missing profile directory: PROGRAM ran anyway: $(cat out)"

# 5c. -o naming a directory (one that exists, or any name ending in /):
#     exit 2 before PROGRAM runs, suggesting a file name in it.
mkdir -p "$tmp/profdir"
for o in "$tmp/profdir" "$tmp/profdir/"; do
  "$culpert" run -o "$o" -- "$workload" env >out 2>err
  rc=$?
  [ $rc -eq 2 ] || fail "-o $o: exit $rc, want 2"
  has err "culpert: error: -o $o names a directory: give a file name, such as $tmp/profdir/app.pb.gz" || fail "-o $o: message: $(cat err)"
  [ -s out ] && fail "-o $o: PROGRAM ran anyway: $(cat out)"
done

# 6. A static binary could write no profile: exit 2 before it runs.
"$culpert" run -o e.pb.gz -- "$static" env >out 2>err
rc=$?
[ $rc -eq 2 ] || fail "static binary: exit $rc, want 2"
has err "culpert: error: $static is statically linked: libculpert, loaded by LD_PRELOAD, sees only dynamically linked programs" || fail "static binary message: $(cat err)"
[ -s out ] && fail "static binary: it ran anyway: $(cat out)"

# 6b. A program built with AddressSanitizer aborts when LD_PRELOAD puts a
#     library before its runtime: exit 2 before it runs, naming the flag.
"$culpert" run -o e.pb.gz -- "$asan" plain >out 2>err
rc=$?
[ $rc -eq 2 ] || fail "AddressSanitizer program: exit $rc, want 2: $(cat err)"
has err "culpert: error: $asan is built with AddressSanitizer (it needs libasan.so." || fail "AddressSanitizer message: $(cat err)"
has err "build it without -fsanitize=address to profile it" || fail "AddressSanitizer advice: $(cat err)"
[ -s out ] && fail "AddressSanitizer program: it ran anyway: $(cat out)"

# 6a. A static PIE as well; the dynamic loader run as a command, which has
#     no PT_INTERP either, still runs (and profiles what it loads).
"$culpert" run -o e.pb.gz -- "$static_pie" env >out 2>err
rc=$?
[ $rc -eq 2 ] || fail "static PIE: exit $rc, want 2"
has err "culpert: error: $static_pie is statically linked: libculpert, loaded by LD_PRELOAD, sees only dynamically linked programs" || fail "static PIE message: $(cat err)"
[ -s out ] && fail "static PIE: it ran anyway: $(cat out)"
ldso=$(sed -n 's/^ *\(\/[^ ]*ld-linux[^ ]*\) .*/\1/p' /proc/self/maps 2>/dev/null | head -n 1)
[ -n "$ldso" ] || ldso=/lib64/ld-linux-x86-64.so.2
"$culpert" run --no-report -o ld.pb.gz -- "$ldso" "$workload" env >out 2>err
rc=$?
[ $rc -eq 0 ] || fail "PROGRAM run by the loader: exit $rc, want 0: $(cat err)"
"$culpert" info ld.pb.gz >out 2>err || fail "PROGRAM run by the loader: no profile: $(cat err)"

# 6b. A set-user-ID PROGRAM: the loader ignores LD_PRELOAD for it, so exit
#     2 before it runs. A copy owned by someone else takes root to make,
#     and a file system mounted nosuid to be of no use.
opts=$(findmnt -n -o OPTIONS -T "$tmp" 2>/dev/null) || opts=nosuid
if [ "$(id -u)" -eq 0 ] && [ "${opts#*nosuid}" = "$opts" ] && cp "$workload" "$tmp/suid" &&
  chown 65534 "$tmp/suid" && chmod 4755 "$tmp/suid"; then
  "$culpert" run -o s.pb.gz -- "$tmp/suid" env >out 2>err
  rc=$?
  [ $rc -eq 2 ] || fail "set-user-ID program: exit $rc, want 2"
  has err "culpert: error: $tmp/suid is set-user-ID: the dynamic loader ignores LD_PRELOAD for it, so libculpert would see nothing" ||
    fail "set-user-ID program: message: $(cat err)"
  [ -s out ] && fail "set-user-ID program: it ran anyway: $(cat out)"
fi

# 7. Processes PROGRAM starts write <profile>.<pid>: the ones this run
#    wrote are listed after the report, largest first (the fork child ran
#    the spans twice, the exec'd copy once); an older file of that name
#    and a name that is not <profile>.<pid> are not.
touch -d '2020-01-01' "$tmp/k.pb.gz.12345"
: >"$tmp/k.pb.gz.x1"
"$culpert" run --rate 0 -o "$tmp/k.pb.gz" -- "$workload" children "$tmp/pids" >out 2>err
rc=$?
[ $rc -eq 0 ] || fail "children run exited $rc: $(cat err)"
read -r forked execd <"$tmp/pids" || fail "no pids from the children run"
grep -q '^flush_output  *400\.00 KB ' out || fail "children run: the parent's report: $(cat out)"
has out "Other processes of this run wrote profiles of their own (2), largest first;" || fail "children run: no list of the others: $(cat out)"
sed -n '/^Other processes/,$p' out >list
sed -n 3p list | grep -qx "  run_workload (pid $forked)  *2\.54 MB  700 samples  $tmp/k\.pb\.gz\.$forked" ||
  fail "children run: first row is not the fork child's: $(cat list)"
sed -n 4p list | grep -qx "  run_workload (pid $execd)  *1\.27 MB  350 samples  $tmp/k\.pb\.gz\.$execd" ||
  fail "children run: second row is not the exec'd child's: $(cat list)"
[ "$(wc -l <list)" -eq 4 ] || fail "children run: listed more than the two children: $(cat list)"
"$culpert" report "$tmp/k.pb.gz.$forked" >rep 2>&1 || fail "report of the fork child's profile: $(cat rep)"
has rep "handle_batch                                   1.76 MB   69.23%  (self 200.00 KB)" || fail "the fork child's profile: $(cat rep)"

# 7a. Without CULPERT_QUIET in culpert's environment, PROGRAM and the
#     processes it starts still run quiet (each would print a line into
#     PROGRAM's output); culpert says once what was written, and with
#     --no-report lists the others there.
env -u CULPERT_QUIET "$culpert" run --rate 0 -o "$tmp/m.pb.gz" -- "$workload" children "$tmp/pids2" >out 2>err
rc=$?
[ $rc -eq 0 ] || fail "loud children run exited $rc: $(cat err)"
[ "$(grep -c 'wrote profile' err)" -eq 1 ] || fail "want one line about the profiles written: $(cat err)"
grep -qx "culpert: wrote profile to $tmp/m\.pb\.gz ([0-9]* samples)" err || fail "the line for PROGRAM's profile: $(cat err)"
env -u CULPERT_QUIET "$culpert" run --rate 0 --no-report -o "$tmp/n.pb.gz" -- "$workload" children "$tmp/pids3" >out 2>err
rc=$?
[ $rc -eq 0 ] || fail "--no-report children run exited $rc: $(cat err)"
read -r forked3 execd3 <"$tmp/pids3" || fail "no pids from the --no-report children run"
grep -qx "culpert: wrote profile to $tmp/n\.pb\.gz ([0-9]* samples)" err || fail "--no-report: the line for PROGRAM's profile: $(cat err)"
has err "culpert: other processes of this run wrote profiles of their own (2):" || fail "--no-report: no list of the others: $(cat err)"
grep -q "^  run_workload (pid $forked3) .* $tmp/n\.pb\.gz\.$forked3\$" err || fail "--no-report: the fork child's row: $(cat err)"
grep -q "^  run_workload (pid $execd3) .* $tmp/n\.pb\.gz\.$execd3\$" err || fail "--no-report: the exec'd child's row: $(cat err)"
[ -s out ] && fail "--no-report printed on stdout: $(cat out)"
# CULPERT_QUIET=0 from the caller passes through: libculpert names each
# of the three files, and culpert adds no line of its own.
CULPERT_QUIET=0 "$culpert" run --rate 0 --no-report -o "$tmp/l.pb.gz" -- "$workload" children "$tmp/pids4" >out 2>err
rc=$?
[ $rc -eq 0 ] || fail "CULPERT_QUIET=0 children run exited $rc: $(cat err)"
[ "$(grep -c '^culpert: wrote profile to ' err)" -eq 3 ] || fail "CULPERT_QUIET=0: want libculpert's three lines: $(cat err)"
has err "other processes of this run" && fail "CULPERT_QUIET=0: culpert listed the others too: $(cat err)"

# 7c. A launcher: PROGRAM's own profile holds under 1% of what the run
#     allocated, so the report covers all the processes, merged, after a
#     note that says so (a compiler driver at a low rate, a shell).
"$culpert" run --rate 0 -o "$tmp/h.pb.gz" -- "$workload" launcher >out 2>err
rc=$?
[ $rc -eq 0 ] || fail "launcher run exited $rc: $(cat err)"
grep -q "^culpert: note: $workload's own profile ($tmp/h\.pb\.gz) holds [0-9.]* [KB]*, under 1% of the 1\.2[0-9] MB this run allocated; 1 other process wrote the rest, and the report covers them all:\$" err ||
  fail "launcher note: $(cat err)"
grep -qx "  run_workload (pid [0-9]*)  1\.27 MB  350 samples  $tmp/h\.pb\.gz\.[0-9]*" err || fail "launcher row: $(cat err)"
has out "sample rate every allocation, 2 profiles merged):" || fail "launcher report not merged: $(head -1 out)"
grep -q '^launch  ' out || fail "launcher report: PROGRAM's own span missing: $(cat out)"
grep -q '^handle_batch  *900\.00 KB ' out || fail "launcher report: the child's spans missing: $(cat out)"

# 7d. A shell that starts twelve programs (its own profile holds well
#     under 1% of the run): the list shows the ten largest files, then how
#     many more there are; with --no-report the note promises no report.
"$culpert" run --rate 0 --no-report -o "$tmp/many.pb.gz" -- sh -c 'for i in 1 2 3 4 5 6 7 8 9 10 11 12; do "$0"; done' "$workload" >out 2>err
rc=$?
[ $rc -eq 0 ] || fail "twelve children run exited $rc: $(cat err)"
[ "$(grep -c "^  run_workload (pid [0-9]*) .* $tmp/many\.pb\.gz\.[0-9]*\$" err)" -eq 10 ] ||
  fail "twelve children: want ten rows: $(cat err)"
grep -qx '  \.\.\. (2 more)' err || fail "twelve children: the two not shown are not counted: $(cat err)"
grep -q "^culpert: note: sh's own profile .* 12 other processes wrote the rest:\$" err ||
  fail "twelve children, --no-report: the note promises a report or is missing: $(cat err)"

# 7b. PROGRAM execs another program (here a copy of itself): the report is
#     the last image's, and the image before the exec, written to
#     <profile>.exec1, is listed with the others. When the program it
#     execs samples nothing, the note names it.
"$culpert" run --rate 0 -o "$tmp/x.pb.gz" -- "$workload" reexec >out 2>err
rc=$?
[ $rc -eq 0 ] || fail "reexec run exited $rc: $(cat err)"
has out "handle_batch                                 900.00 KB   69.23%  (self 100.00 KB)" || fail "reexec run: not the last image's report: $(cat out)"
sed -n '/^Other processes/,$p' out >list
grep -qx "  run_workload (pid [0-9]*, before exec 1)  900\.00 KB  300 samples  $tmp/x\.pb\.gz\.exec1" list ||
  fail "reexec run: no row for the image before the exec: $(cat out)"
[ "$(wc -l <list)" -eq 3 ] || fail "reexec run: listed more than the image before the exec: $(cat list)"
# The program it execs (true) samples nothing: a note says so, and the
# report is the image before the exec.
"$culpert" run --rate 0 -o "$tmp/y.pb.gz" -- "$workload" reexec-true >out 2>err
rc=$?
[ $rc -eq 0 ] || fail "reexec-true run exited $rc: $(cat err)"
has err "culpert: note: the program $workload exec'd wrote $tmp/y.pb.gz, which holds no samples, but 1 other process of the run wrote one:" || fail "reexec-true note: $(cat err)"
has out "handle_batch                                 900.00 KB  100.00%  (self 100.00 KB)" || fail "reexec-true run: not the first image's report: $(cat out)"

# 8. PROGRAM writes no profile of its own (it ends by the exit system call
#    itself) but a child does: a note lists the child's file, the report is
#    the child's, and PROGRAM's status (0) stands.
"$culpert" run --rate 0 -o "$tmp/o.pb.gz" -- "$workload" orphan raw >out 2>err
rc=$?
[ $rc -eq 0 ] || fail "orphan run exited $rc, want 0: $(cat err)"
has err "culpert: note: $workload wrote no profile of its own ($tmp/o.pb.gz: it ended without running exit handlers), but 1 other process of the run did:" || fail "orphan note: $(cat err)"
grep -qx "  run_workload (pid [0-9]*)  1\.27 MB  350 samples  $tmp/o\.pb\.gz\.[0-9]*" err || fail "orphan row: $(cat err)"
has out "handle_batch                                 900.00 KB   69.23%  (self 100.00 KB)" || fail "orphan run: no report of the child's profile: $(cat out)"

# 8b. PROGRAM's own profile holds no samples (a launcher, a shell script)
#     but a child's does: the same, with a note saying so.
"$culpert" run --rate 0 -o "$tmp/e.pb.gz" -- "$workload" orphan >out 2>err
rc=$?
[ $rc -eq 0 ] || fail "empty-profile run exited $rc, want 0: $(cat err)"
[ -s "$tmp/e.pb.gz" ] || fail "the launcher wrote no profile of its own (it ends with _exit): $(ls "$tmp")"
has err "culpert: note: $workload's own profile ($tmp/e.pb.gz) holds no samples, but 1 other process of the run wrote one:" || fail "empty-profile note: $(cat err)"
grep -qx "  run_workload (pid [0-9]*)  1\.27 MB  350 samples  $tmp/e\.pb\.gz\.[0-9]*" err || fail "empty-profile row: $(cat err)"
has out "handle_batch                                 900.00 KB   69.23%  (self 100.00 KB)" || fail "empty-profile run: no report of the child's profile: $(cat out)"

# 9. -o takes CULPERT_OUTPUT's %p, %e and %%: culpert expands them itself,
#    finds the profile, and the children's files carry .PID after it.
"$culpert" run --rate 0 -o "$tmp/t.%p.%e.pb.gz" -- "$workload" children "$tmp/pids" >out 2>err
rc=$?
[ $rc -eq 0 ] || fail "-o with %p %e: exit $rc: $(cat err)"
read -r forked execd <"$tmp/pids"
n=$(ls "$tmp"/t.*.run_workload.pb.gz 2>/dev/null | wc -l)
[ "$n" -eq 1 ] || fail "-o with %p %e: $(ls "$tmp")"
grep -q '^flush_output  *400\.00 KB ' out || fail "-o with %p %e: no report: $(cat out)"
grep -q "  run_workload (pid $forked)  .* $tmp/t\.[0-9]*\.run_workload\.pb\.gz\.$forked\$" out ||
  fail "-o with %p %e: the fork child's file: $(cat out) $(ls "$tmp")"
"$culpert" run -o "$tmp/pct%%p.pb.gz" --no-report -- "$workload" >out 2>err
rc=$?
[ $rc -eq 0 ] && [ -s "$tmp/pct%p.pb.gz" ] || fail "-o with %%: exit $rc: $(cat err) $(ls "$tmp")"

# 10. PROGRAM cannot be started: exit 2.
"$culpert" run -- ./no-such-program >out 2>err
rc=$?
[ $rc -eq 2 ] || fail "missing program: exit $rc, want 2"
has err "culpert: error: cannot run ./no-such-program: No such file or directory" || fail "missing program message: $(cat err)"
# A directory, or a file without execute permission: exec says only
# "Permission denied"; the message says which.
mkdir "$tmp/adir" && echo 'echo hi' >"$tmp/noexec.sh"
"$culpert" run -- "$tmp/adir" >out 2>err
[ $? -eq 2 ] && has err "culpert: error: cannot run $tmp/adir: it is a directory" ||
  fail "directory as PROGRAM: $(cat err)"
"$culpert" run -- "$tmp/noexec.sh" >out 2>err
[ $? -eq 2 ] && has err "culpert: error: cannot run $tmp/noexec.sh: Permission denied (the file is not executable)" ||
  fail "non-executable PROGRAM: $(cat err)"

# 11. CULPERT_LIB pointing nowhere: exit 2 naming it.
CULPERT_LIB=$tmp/nope.so "$culpert" run -- "$workload" >out 2>err
rc=$?
[ $rc -eq 2 ] || fail "bad CULPERT_LIB: exit $rc, want 2"
has err "culpert: error: CULPERT_LIB=$tmp/nope.so: No such file or directory" || fail "bad CULPERT_LIB message: $(cat err)"
# ... or to a directory or a file that is not a library, which the loader
# would skip with a warning of its own, running PROGRAM unprofiled:
# refused before PROGRAM runs.
mkdir "$tmp/libdir" && echo 'not a library' >"$tmp/notlib.so"
for lib in "$tmp/libdir" "$tmp/notlib.so"; do
  CULPERT_LIB=$lib "$culpert" run -- "$workload" >out 2>err
  rc=$?
  [ $rc -eq 2 ] && [ ! -s out ] || fail "CULPERT_LIB=$lib: exit $rc, want 2, and no run: $(cat out)"
  has err "culpert: error: CULPERT_LIB=$lib is not libculpert.so:" && ! has err "ld.so" ||
    fail "CULPERT_LIB=$lib: $(cat err)"
done
# A %p in the directory's name is not checked before the run (PROGRAM may
# make that directory); when nothing made it, the error says so rather than
# guess at a static program.
"$culpert" run --no-report -o "$tmp/d%p/x.pb.gz" -- "$workload" plain >out 2>err
rc=$?
[ $rc -eq 2 ] || fail "-o in a %p directory nobody made: exit $rc, want 2"
grep -q "culpert: error: $workload wrote no profile at $tmp/d[0-9]*/x.pb.gz: its directory does not exist" err ||
  fail "-o in a %p directory nobody made: $(cat err)"
# No CULPERT_LIB and no library next to the binary: exit 2, naming every
# directory looked in (the multiarch one of an install under /usr too).
mkdir -p "$tmp/lonely/bin" && cp "$culpert" "$tmp/lonely/bin/culpert"
"$tmp/lonely/bin/culpert" run -- "$workload" >out 2>err
rc=$?
[ $rc -eq 2 ] && [ ! -s out ] || fail "no libculpert: exit $rc, want 2, and no run: $(cat out)"
case $(uname -m) in
x86_64) multiarch="../lib/x86_64-linux-gnu, " ;;
aarch64) multiarch="../lib/aarch64-linux-gnu, " ;;
*) multiarch= ;;
esac
has err "culpert: error: cannot find libculpert.so next to $tmp/lonely/bin (looked in ../lib, ../lib64, ${multiarch}and ../src); set CULPERT_LIB to its path" ||
  fail "no libculpert: $(cat err)"
# A relative CULPERT_LIB is made absolute: a process that changes
# directory before it execs a program still preloads it.
(cd "$(dirname "$culpert")/.." && CULPERT_LIB=src/libculpert.so cli/culpert run --no-report \
  -o "$tmp/rel.pb.gz" -- sh -c 'cd / && exec true' >"$tmp/out" 2>"$tmp/err")
rc=$?
[ $rc -eq 0 ] && ! has err "ld.so" || fail "relative CULPERT_LIB: exit $rc: $(cat err)"
# ... or to a path the loader would split (at a space or a colon): refused
# before PROGRAM runs unprofiled.
mkdir "$tmp/sp ace" && ln -s "$(dirname "$culpert")/../src/libculpert.so" "$tmp/sp ace/libculpert.so"
CULPERT_LIB="$tmp/sp ace/libculpert.so" "$culpert" run -- "$workload" >out 2>err
rc=$?
[ $rc -eq 2 ] && [ ! -s out ] || fail "CULPERT_LIB with a space: exit $rc, want 2, and no run: $(cat out)"
has err "culpert: error: $tmp/sp ace/libculpert.so cannot be preloaded: its path holds a space or ':'" ||
  fail "CULPERT_LIB with a space: $(cat err)"

# A pipe nobody reads any more as culpert's stderr (then stdout), SIGPIPE
# at its default action: PROGRAM's status stands (and a report that cannot
# be written is exit 2, as on a full disk), where culpert used to end by
# SIGPIPE, status 141. A FIFO opened for reading and writing, then closed
# for reading, is such a pipe.
mkfifo "$tmp/gone" && exec 3<>"$tmp/gone" 4>"$tmp/gone" && exec 3<&-
env -u CULPERT_QUIET --default-signal=PIPE "$culpert" run --no-report -o "$tmp/gone.pb.gz" -- \
  sh -c 'exit 3' >out 2>&4
rc=$?
[ $rc -eq 3 ] || fail "stderr a broken pipe: exit $rc, want PROGRAM's 3"
env --default-signal=PIPE "$culpert" run -o "$tmp/gone.pb.gz" -- "$workload" >&4 2>err
rc=$?
[ $rc -eq 2 ] || fail "stdout a broken pipe: exit $rc, want 2"
has err "culpert: error: cannot write to standard output: Broken pipe" || fail "stdout a broken pipe: $(cat err)"
exec 4>&-

if [ $failures -ne 0 ]; then
  echo "$failures run check(s) failed"
  exit 1
fi
echo "culpert run: all end-to-end checks passed"
