#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Fails when a C or C++ source file differs from what .clang-format asks
# for, and names the files. Fix with: clang-format -i FILE...
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp')
else
  mapfile -t files < <(find include src cli tests examples bench -name '*.[ch]' -o -name '*.cpp')
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [[ ${#bad[@]} -gt 0 ]]; then
  echo "not clang-formatted (run clang-format -i on them):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "${#files[@]} files clang-formatted"
