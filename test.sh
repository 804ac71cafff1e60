#!/usr/bin/env bash
# The whole test suite, from a fresh clone on Debian with a Rust toolchain:
#   ./test.sh
# Installs python3-libtorrent and a font if missing (apt-get, needs root or sudo), builds the
# release binaries, runs the Rust tests, then the real-client tests against the release
# shoal binary (tests/real_clients/run.sh).
set -euo pipefail
cd "$(dirname "$0")"
unset RUST_BACKTRACE

step() { echo; echo "==> [$(date +%H:%M:%S)] $*"; }

missing=()
# tests/real_clients drive libtorrent; shoal-bench's PNG chart test needs a font.
/usr/bin/python3 -c 'import libtorrent' >/dev/null 2>&1 || missing+=(python3-libtorrent)
find /usr/share/fonts -name '*.ttf' -print -quit 2>/dev/null | grep -q . || missing+=(fonts-dejavu-core)
if [ ${#missing[@]} -gt 0 ]; then
    step "installing ${missing[*]}"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi

step "cargo build --release --workspace"
cargo build --release --workspace

step "cargo test --workspace"
cargo test --workspace

export SHOAL_BIN="${SHOAL_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/release/shoal}"
if [ ! -x "$SHOAL_BIN" ]; then
    echo "test.sh: $SHOAL_BIN was not built" >&2
    exit 1
fi
step "tests/real_clients/run.sh (tracker: $SHOAL_BIN)"
tests/real_clients/run.sh
step "tests/webtorrent/run.sh (npm client, two Chromium pages over WebRTC)"
tests/webtorrent/run.sh
step "tests/ops/run.sh (Prometheus and the alert rules, check-config, JSON logs, the .deb, the container)"
tests/ops/run.sh

step "tests/status_page (headless Chromium loads the admin status page)"
(cd tests/status_page && { [ -d node_modules ] || npm ci --ignore-scripts --no-audit --no-fund; } && npm test)

step "all tests passed"
