#!/usr/bin/env bash
# The WebTorrent tests, from the root of a clone or anywhere:  tests/webtorrent/run.sh
#   1. client.test.mjs  - the bittorrent-tracker npm client: announce, offers relayed, answer
#                         relayed, scrape, stopped (node --test, ~16 s)
#   private.test.mjs    - the same client against shoal in private mode: served with a
#                         passkey URL, refused without one (node --test, ~27 s; only when
#                         SHOAL_WS_CMD is not set: it starts shoal itself)
#   2. run-browser.sh   - two headless Chromium pages exchange a file over WebRTC through the
#                         tracker, in a private network namespace (needs root/sudo, ~11 s)
# Installs what is missing: chromium (apt-get), node_modules (npm ci --ignore-scripts), and
# the shoal tracker (cargo build) when SHOAL_WS_CMD is not set.
# Environment: SHOAL_WS_CMD (tracker command, {port} replaced; see tracker.mjs), SHOAL_BIN
# (the shoal binary of the default command and of private.test.mjs).
# Prints "N passed, N failed" (tests) last; exits non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")"
unset RUST_BACKTRACE
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi

if [ ! -x /usr/bin/chromium ]; then
    echo "==> installing chromium"
    $sudo apt-get update && DEBIAN_FRONTEND=noninteractive \
        $sudo apt-get install -y --no-install-recommends chromium || exit 1
fi
if [ ! -d node_modules ]; then
    echo "==> npm ci --ignore-scripts"
    npm ci --ignore-scripts --no-audit --no-fund || exit 1
fi
if [ -z "${SHOAL_WS_CMD:-}" ]; then
    # The default tracker command is in tracker.mjs (DEFAULT_CMD); build it if missing.
    bin=$(node --input-type=module -e \
        "import { DEFAULT_CMD } from './tracker.mjs'; console.log(DEFAULT_CMD.split(' ')[0])") || exit 1
    if [ ! -x "$bin" ]; then
        echo "==> cargo build --release -p shoal-server --bin shoal (for $bin)"
        (cd ../.. && cargo build --release -p shoal-server --bin shoal) || exit 1
    fi
fi

passed=0
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# run NAME CMD...: runs a node --test suite, adds its counts (a run that dies without a
# summary counts as one failure).
run() {
    local name=$1; shift
    echo "==> $name"
    "$@" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    local p f
    p=$(grep -aE '^(#|ℹ) pass [0-9]+$' "$log" | awk '{s += $NF} END {print s + 0}')
    f=$(grep -aE '^(#|ℹ) (fail|cancelled) [0-9]+$' "$log" | awk '{s += $NF} END {print s + 0}')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    echo "==> $name: $p passed, $f failed (exit $rc)"
    passed=$((passed + p)); failed=$((failed + f))
}
run client.test.mjs timeout -k 5 150 node --test client.test.mjs
if [ -z "${SHOAL_WS_CMD:-}" ]; then
    run private.test.mjs timeout -k 5 150 node --test private.test.mjs
fi
run run-browser.sh ./run-browser.sh

echo "webtorrent: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
