#!/bin/sh
# SPDX-License-Identifier: MIT OR Apache-2.0
# Runs archive-worker's tests (vitest inside workerd), installing the npm
# dependencies first when needed. Works from a clean clone with CI=true and
# no standard input; needs Node 20+ and the npm registry, nothing else.
# Ends with a plain "archive-worker: N passed, N failed" line and exits
# non-zero when a test failed or none ran.
set -eu
cd "$(dirname "$0")/.."
export CI=true WRANGLER_SEND_METRICS=false NO_COLOR=1
sh scripts/install-deps.sh

report=$(mktemp)
trap 'rm -f "$report"' EXIT
status=0
npx --no-install vitest run --reporter=default --reporter=json --outputFile.json="$report" </dev/null || status=$?
node -e '
	const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
	console.log(`archive-worker: ${r.numPassedTests} passed, ${r.numFailedTests} failed`);
	if (r.numTotalTests === 0) process.exit(1);
' "$report" || status=1
exit "$status"
