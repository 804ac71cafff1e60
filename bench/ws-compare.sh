#!/usr/bin/env bash
# Compare WebTorrent trackers (wss throughput, idle-connection memory) (protocol: docs/benchmarking.md).
# See bench/README.md, or bench/ws-compare.sh --help.
set -euo pipefail
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
cd "$(dirname "$0")/.."
exec python3 bench/ws_compare.py "$@"
