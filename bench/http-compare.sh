#!/usr/bin/env bash
# Compare HTTP(S) trackers (keep-alive, Connection: close, TLS) (protocol: docs/benchmarking.md).
# See bench/README.md, or bench/http-compare.sh --help.
set -euo pipefail
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
cd "$(dirname "$0")/.."
exec python3 bench/http_compare.py "$@"
