#!/bin/sh
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# Where the commands' output goes. Output that cannot be written (standard
# output on a full device) is an error, exit 2, whatever the command found
# (a diff's regression too, so a CI gate never passes on a report nobody
# got). -o through a symbolic link replaces the file it names and keeps the
# link; -o a FIFO or a device writes through it and leaves it as it was;
# culpert run refuses -o a FIFO, from which it could not read the profile
# back for its report.
#   outputs.sh CULPERT MKPROFILE
culpert=$1 mkprofile=$2
. "$(dirname "$0")/lib.sh"

cat >before.txt <<'EOF'
rate 65536
span 1 - handle_request
sample span=1 bytes=524288 samples=8 stack=main;handle_request;malloc
EOF
sed 's/bytes=524288 samples=8/bytes=5242880 samples=80/' before.txt >after.txt
"$mkprofile" before.txt before.pb.gz && "$mkprofile" after.txt after.pb.gz || exit 1

# 1. Standard output on a full device: exit 2 and a line saying so.
full() { # DESCRIPTION ARGS...
  what=$1
  shift
  "$culpert" "$@" >/dev/full 2>err
  rc=$?
  [ $rc -eq 2 ] && has err "culpert: error: cannot write to standard output: No space left on device" ||
    fail "$what to /dev/full: exit $rc, stderr: $(cat err)"
}
full "report" report before.pb.gz
full "info" info before.pb.gz
full "diff without a regression" diff before.pb.gz before.pb.gz
full "diff with a regression" diff before.pb.gz after.pb.gz
full "diff --format json" diff --format json before.pb.gz after.pb.gz
full "diff --format markdown" diff --format markdown before.pb.gz before.pb.gz
full "diff --tree" diff --tree before.pb.gz after.pb.gz
full "flamegraph" flamegraph before.pb.gz
full "--help" --help
full "--version" --version
# the same diffs to a file: 1 for the regression, 0 without
"$culpert" diff before.pb.gz after.pb.gz >out 2>err
[ $? -eq 1 ] || fail "diff with a regression to a file does not exit 1: $(cat err)"

# 2. -o through a symbolic link: the link stays, its target is replaced.
for cmd in flamegraph merge; do
  echo old >"$cmd.target"
  ln -s "$cmd.target" "$cmd.link"
  "$culpert" $cmd -o "$cmd.link" before.pb.gz 2>err || fail "$cmd -o LINK: $(cat err)"
  [ -L "$cmd.link" ] || fail "$cmd -o LINK replaced the link with a file"
  ! has "$cmd.target" old || fail "$cmd -o LINK left the link's target as it was"
done
"$culpert" report merge.target >out 2>err || fail "merge -o LINK wrote no profile: $(cat err)"

# 3. -o a FIFO: its reader gets the output, the FIFO stays a FIFO.
for cmd in flamegraph merge; do
  mkfifo "$cmd.fifo"
  timeout 30 cat "$cmd.fifo" >"$cmd.read" &
  reader=$!
  timeout 30 "$culpert" $cmd -o "$cmd.fifo" before.pb.gz 2>err || fail "$cmd -o FIFO: $(cat err)"
  wait $reader
  [ -p "$cmd.fifo" ] || fail "$cmd -o FIFO replaced the FIFO with a file"
  [ -s "$cmd.read" ] || fail "$cmd -o FIFO: its reader got nothing"
done
"$culpert" flamegraph before.pb.gz >direct.folded
cmp -s direct.folded flamegraph.read || fail "flamegraph -o FIFO: the reader got other bytes"
"$culpert" report merge.read >out 2>err || fail "merge -o FIFO: the reader got no profile: $(cat err)"

# 4. -o a null device (our own: mknod needs root; never the system's, which
#    a regression here would replace): it stays a device.
if mknod null c 1 3 2>/dev/null; then
  for cmd in flamegraph merge; do
    "$culpert" $cmd -o null before.pb.gz 2>err || fail "$cmd -o a null device: $(cat err)"
    [ -c null ] || fail "$cmd -o a null device replaced it with a file"
  done
fi

# 5. culpert run -o a FIFO: refused before the program runs.
mkfifo run.fifo
"$culpert" run -o run.fifo -- sh -c 'echo ran >ran' >out 2>err
rc=$?
[ $rc -eq 2 ] && has err "culpert: error: -o run.fifo is not a regular file" ||
  fail "run -o FIFO: exit $rc, stderr: $(cat err)"
[ ! -e ran ] || fail "run -o FIFO ran the program"
[ -p run.fifo ] || fail "run -o FIFO replaced the FIFO"

# 6. flamegraph -o one of the profiles it reads (named, through a link, as
#    --diff-base, or in a directory it reads): refused, the profile intact.
mkdir prof
cp before.pb.gz prof/app.pb.gz
cp before.pb.gz in.pb.gz
ln -s in.pb.gz in.link
for args in "-o in.pb.gz in.pb.gz" "-o in.link in.pb.gz" "-o in.pb.gz --diff-base in.pb.gz after.pb.gz" \
  "--format svg -o prof/app.pb.gz prof"; do
  # shellcheck disable=SC2086 # the words of $args are the arguments
  "$culpert" flamegraph $args >out 2>err
  rc=$?
  [ $rc -eq 2 ] && has err "culpert: error: -o '" && has err "would replace it" ||
    fail "flamegraph $args: exit $rc, stderr: $(cat err)"
done
cmp -s in.pb.gz before.pb.gz && cmp -s prof/app.pb.gz before.pb.gz ||
  fail "flamegraph -o one of its profiles changed that profile"
# A new file in a directory it reads (as FILE or --diff-base) is refused
# too: every command given the directory would then read the graph as one
# of its profiles. Beside the directory is fine.
for args in "-o prof/fg.svg prof" "-o prof/fg.folded --diff-base prof in.pb.gz"; do
  # shellcheck disable=SC2086 # the words of $args are the arguments
  "$culpert" flamegraph $args >out 2>err
  rc=$?
  [ $rc -eq 2 ] && has err "is in the directory 'prof' this flame graph reads" ||
    fail "flamegraph $args: exit $rc, stderr: $(cat err)"
done
[ "$(ls prof)" = app.pb.gz ] || fail "flamegraph -o into a directory it reads wrote: $(ls prof)"
"$culpert" flamegraph -o fg.svg prof 2>err || fail "flamegraph -o beside the directory: $(cat err)"

[ $failures -eq 0 ] || exit 1
echo "all output checks passed"
