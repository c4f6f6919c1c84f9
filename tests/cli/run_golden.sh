#!/bin/sh
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# One golden-file test of the culpert command.
#   run_golden.sh CULPERT MKPROFILE FIXTURE GOLDEN EXIT [ARGS...]
# Builds FIXTURE (mkprofile text; "*.plain.txt" is written as plain
# protobuf, "-" builds nothing; "A:B" builds B too, as profile2.pb.gz for
# @PROFILE2@) into profile.pb.gz in a scratch directory,
# runs `CULPERT ARGS...` there with every @PROFILE@ replaced by that file,
# and compares stdout, then "--- stderr" and stderr when there is any, with
# GOLDEN byte for byte; the exit status must be EXIT.
# CULPERT_UPDATE_GOLDEN=1 rewrites GOLDEN from the actual output instead.
set -u
culpert=$1 mkprofile=$2 fixture=$3 golden=$4 want=$5
shift 5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# FIXTURE may be two fixtures joined by ':' (the second for @PROFILE2@).
build() {
  case $1 in
  *.plain.txt) plain=--plain ;;
  *) plain= ;;
  esac
  "$mkprofile" "$1" "$2" $plain || { echo "FAIL: mkprofile $1"; exit 1; }
}
if [ "$fixture" != - ]; then
  case $fixture in
  *:*)
    build "${fixture%%:*}" "$tmp/profile.pb.gz"
    build "${fixture#*:}" "$tmp/profile2.pb.gz"
    ;;
  *) build "$fixture" "$tmp/profile.pb.gz" ;;
  esac
fi
for a do
  shift
  [ "$a" = @PROFILE@ ] && a=profile.pb.gz
  [ "$a" = @PROFILE2@ ] && a=profile2.pb.gz
  set -- "$@" "$a"
done

# stdin is the profile too, for FILE = "-".
[ -e "$tmp/profile.pb.gz" ] || : >"$tmp/profile.pb.gz"
(cd "$tmp" && "$culpert" "$@" <profile.pb.gz >stdout 2>stderr)
rc=$?
{
  cat "$tmp/stdout"
  if [ -s "$tmp/stderr" ]; then
    echo "--- stderr"
    cat "$tmp/stderr"
  fi
} >"$tmp/actual"

if [ "${CULPERT_UPDATE_GOLDEN:-0}" = 1 ]; then
  cp "$tmp/actual" "$golden"
  echo "updated $golden"
elif ! cmp -s "$tmp/actual" "$golden"; then
  echo "FAIL: output of 'culpert $*' differs from $golden:"
  diff -u "$golden" "$tmp/actual"
  exit 1
fi
if [ "$rc" -ne "$want" ]; then
  echo "FAIL: 'culpert $*' exited $rc, expected $want"
  cat "$tmp/actual"
  exit 1
fi
exit 0
