#!/bin/sh
# SPDX-License-Identifier: MIT OR Apache-2.0
#
# One golden-file test of the culpert command.
#   run_golden.sh CULPERT MKPROFILE FIXTURE GOLDEN EXIT [ARGS...]
# Builds FIXTURE (mkprofile text; "*.plain.txt" is written as plain
# protobuf, "-" builds nothing) into profile.pb.gz in a scratch directory,
# runs `CULPERT ARGS...` there with every @PROFILE@ replaced by that file,
# and compares stdout, then "--- stderr" and stderr when there is any, with
# GOLDEN byte for byte; the exit status must be EXIT.
# CULPERT_UPDATE_GOLDEN=1 rewrites GOLDEN from the actual output instead.
set -u
culpert=$1 mkprofile=$2 fixture=$3 golden=$4 want=$5
shift 5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ "$fixture" != - ]; then
  case $fixture in
  *.plain.txt) plain=--plain ;;
  *) plain= ;;
  esac
  "$mkprofile" "$fixture" "$tmp/profile.pb.gz" $plain || { echo "FAIL: mkprofile $fixture"; exit 1; }
fi
for a do
  shift
  [ "$a" = @PROFILE@ ] && a=profile.pb.gz
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
