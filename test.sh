#!/usr/bin/env bash
# The whole test suite, from a fresh clone on Debian with a Rust toolchain:
#   ./test.sh
# Installs python3-libtorrent and a font if missing (apt-get, needs root or sudo), runs the
# house checks (tests/house: no source file over 600 lines before its tests), runs the Rust
# tests, builds the release binaries, then runs the real-client tests against the release
# shoal binary (tests/real_clients/run.sh), and every fuzz target for a short time
# (fuzz/run.sh; SHOAL_FUZZ_SECONDS each, 20 by default) where the nightly toolchain and
# cargo-fuzz are installed: without them the fuzz step says it was skipped, there and in
# the last line.
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

step "tests/house/file_lengths.sh (no source file over 600 lines before its tests)"
tests/house/file_lengths.sh

step "cargo test --workspace"
cargo test --workspace

# CI (.ci/run) sets SHOAL_PRUNE_DEBUG=1: nothing after this step uses the debug build, and
# without it the release build below needs the disk that the test binaries hold.
if [ "${SHOAL_PRUNE_DEBUG:-0}" = 1 ]; then
    step "removing ${CARGO_TARGET_DIR:-target}/debug (SHOAL_PRUNE_DEBUG=1; $(du -sh "${CARGO_TARGET_DIR:-target}/debug" | cut -f1))"
    rm -rf "${CARGO_TARGET_DIR:-target}/debug"
fi

step "cargo build --release --workspace"
cargo build --release --workspace

fuzz_seconds="${SHOAL_FUZZ_SECONDS:-20}"
step "fuzz/run.sh $fuzz_seconds (every fuzz target for ${fuzz_seconds}s from the seed corpora)"
fuzz_start=$(date +%s)
fuzz_log="$(mktemp)"
SHOAL_SKIP_FUZZ=1 fuzz/run.sh "$fuzz_seconds" | tee "$fuzz_log"
if grep -q '^fuzz/run.sh: SKIPPED' "$fuzz_log"; then
    fuzz_note=" (FUZZ STEP SKIPPED: $(sed -n 's/^fuzz\/run.sh: SKIPPED (SHOAL_SKIP_FUZZ=1): //p' "$fuzz_log"))"
else
    fuzz_note=" (fuzz step: $(( $(date +%s) - fuzz_start ))s)"
fi
rm -f "$fuzz_log"
echo "fuzz step${fuzz_note}"

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
step "tests/opentracker/run.sh (/stats against opentracker's on the same announces, the exporter)"
tests/opentracker/run.sh

step "tests/status_page (headless Chromium loads the admin status page)"
(cd tests/status_page && { [ -d node_modules ] || npm ci --ignore-scripts --no-audit --no-fund; } && npm test)

step "all tests passed${fuzz_note}"
