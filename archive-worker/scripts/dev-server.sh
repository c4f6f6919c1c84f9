#!/bin/sh
# SPDX-License-Identifier: MIT OR Apache-2.0
# Runs the archive locally with `wrangler dev` in the foreground, offline:
#
#   scripts/dev-server.sh PORT DATA_DIR TOKEN [READ_TOKEN]
#
# Listens on http://127.0.0.1:PORT only. DATA_DIR keeps the local R2 and D1
# state (and the secrets file archive.env); it is created if missing and may
# be reused across runs. The D1 migrations are applied before the server
# starts. Environment: MAX_BODY_BYTES overrides the body limit.
#
# Meant to be started in the background by a test harness under `setsid`,
# polled until `GET /v1/profiles` with the token answers 200, and stopped
# with `kill -- -PGID` (wrangler runs workerd as a child process).
set -eu

usage() {
	echo "usage: $0 PORT DATA_DIR TOKEN [READ_TOKEN]" >&2
	exit 2
}
[ $# -ge 3 ] && [ $# -le 4 ] || usage
port=$1
data=$2
token=$3
read_token=${4:-}

case $port in
'' | *[!0-9]*) echo "$0: PORT must be a number, got '$port'" >&2; exit 2 ;;
esac
if [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then
	echo "$0: PORT must be from 1 to 65535, got $port" >&2
	exit 2
fi
# Tokens go into a dotenv file that wrangler also expands ($VAR), so keep
# them to the characters of an RFC 6750 bearer token.
for t in "$token" "$read_token"; do
	case $t in
	*[!A-Za-z0-9._~+/=-]*)
		echo "$0: tokens may only use A-Z a-z 0-9 . _ ~ + / = -" >&2
		exit 2
		;;
	esac
done
[ -n "$token" ] || { echo "$0: TOKEN must not be empty" >&2; exit 2; }
case ${MAX_BODY_BYTES:-1} in
'' | *[!0-9]*) echo "$0: MAX_BODY_BYTES must be a number" >&2; exit 2 ;;
esac

here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$data"
data=$(cd "$data" && pwd)

# Offline and non-interactive: no telemetry, no prompts, no colour, no
# secrets taken from this process's environment.
export CI=true WRANGLER_SEND_METRICS=false NO_COLOR=1 FORCE_COLOR=0
export WRANGLER_LOG_PATH="$data/logs"
unset CLOUDFLARE_INCLUDE_PROCESS_ENV CLOUDFLARE_API_TOKEN CLOUDFLARE_ACCOUNT_ID

sh "$here/scripts/install-deps.sh"

# The secrets file lives in DATA_DIR, not in the checkout, so several
# servers with different tokens can run from one tree.
env_file="$data/archive.env"
(
	umask 077
	{
		printf 'AUTH_TOKEN=%s\n' "$token"
		[ -z "$read_token" ] || printf 'READ_TOKEN=%s\n' "$read_token"
	} >"$env_file"
)

cd "$here"
wrangler=./node_modules/.bin/wrangler
"$wrangler" d1 migrations apply DB --local --persist-to "$data" </dev/null >&2

set -- dev --ip 127.0.0.1 --port "$port" --persist-to "$data" \
	--env-file "$env_file" --show-interactive-dev-session=false \
	--inspector-ip 127.0.0.1
[ -z "${MAX_BODY_BYTES:-}" ] || set -- "$@" --var "MAX_BODY_BYTES:$MAX_BODY_BYTES"
exec "$wrangler" "$@" </dev/null
