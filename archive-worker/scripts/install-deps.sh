#!/bin/sh
# SPDX-License-Identifier: MIT OR Apache-2.0
# Installs archive-worker's npm dependencies with `npm ci`, but only when
# node_modules is missing or package-lock.json changed since the last install
# (a stamp in node_modules records the lock's checksum). Non-interactive;
# concurrent callers wait for one another instead of installing twice.
set -eu
cd "$(dirname "$0")/.."

stamp=node_modules/.culpert-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
current() { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; }
current && exit 0

if command -v flock >/dev/null 2>&1; then
	exec 9>.install-deps.lock
	flock 9
	current && exit 0
fi
echo "archive-worker: npm ci (package-lock.json changed or node_modules missing)" >&2
# Optional dependencies stay in: workerd's binary is one.
npm ci --no-audit --no-fund </dev/null >&2
printf '%s\n' "$want" >"$stamp"
