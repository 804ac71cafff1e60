#!/usr/bin/env bash
# Compare UDP trackers under aquatic_udp_load_test (protocol: docs/benchmarking.md).
# Usage: bench/udp-compare.sh [--rounds 5] [--duration 20] [--warmup 5]
#          [--contenders shoal,aquatic_udp,io-limit] [--shoal BIN] [--out DIR] ...
# See bench/README.md, or bench/udp-compare.sh --help.
set -euo pipefail
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
cd "$(dirname "$0")/.."
exec python3 bench/udp_compare.py "$@"
