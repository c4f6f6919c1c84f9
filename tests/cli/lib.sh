# SPDX-License-Identifier: MIT OR Apache-2.0
#
# What the CLI's shell tests share, sourced after they read their
# arguments: a scratch directory to work in (gone at exit), quiet
# libculpert, and a failure count with its helpers.
set -u
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
failures=0
export CULPERT_QUIET=1
# fail MESSAGE: say what failed and count it.
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# has FILE TEXT: FILE contains the fixed string TEXT.
has() { grep -qF -- "$2" "$1"; }
