#!/usr/bin/env bash
# shoal as a UNIT3D site's announce server against UNIT3D-Announce, on the same MariaDB
# with UNIT3D's tables, the same 10,000 members (group 'user', 32-character passkeys) and
# 10,000 approved torrents, inserted as the site inserts them:
#
#   SHOAL_BIN=target/release/shoal U3A_BIN=/work/u3a/target/release/unit3d-announce \
#     bench/unit3d.sh /tmp/unit3d-bench
#
# 7 rounds (ROUNDS); each round starts, loads and stops, in turn, shoal (`--private --schema
# unit3d --database mysql://...`) under shoal-bench's HTTP keep-alive load, UNIT3D-Announce
# under the same load (only where U3A_BIN is given), and shoal under the same load over UDP.
# Before each run the site's activity (peers, history, counters) is emptied; the tracker
# runs on CPU 0 (all its threads; UNIT3D-Announce with one tokio worker, shoal with one
# worker), shoal-bench on CPU 1, MariaDB on CPU 1. The load: announces only (UNIT3D-Announce
# has no scrape), `--passkey-path '/announce/{passkey}'`, `--user-agent qBittorrent/4.6.5`,
# 100,000 simulated peers, DURATION (20s) after WARMUP (5s). Both trackers run with
# UNIT3D-Announce's defaults except a 1-second minimum announce interval (the load's peers
# announce every few seconds), and shoal without the per-user peer-list rate limits that
# this UNIT3D-Announce lacks.
#
# Reported (OUT/report.md, OUT/results.json): responses per tracker CPU-second, min / median
# / max over the rounds, shoal's ratio to UNIT3D-Announce round by round, responses/s,
# tracker CPU, and the database writes per second over each run (MariaDB's Com_insert +
# Com_update + Com_delete statements, and rows written: Handler_write + Handler_update +
# Handler_delete).
#
# Environment: SHOAL_BIN (left out: UNIT3D-Announce alone), SHOAL_COMMIT (the commit its
# binary was built from, for the report; default this checkout's), U3A_BIN, BENCH_BIN
# (target/release/shoal-bench), DDL (UNIT3D's tables: the test fixture
# tests/fixtures/unit3d.sql), ROUNDS, DURATION, WARMUP, CONNECTIONS (128), U3A_VERSION (what
# the report calls it; default the commit of the checkout two folders above the binary),
# U3A_BATCHES (v0.3's MAX_BATCHES_PER_FLUSH, 1 as in its .env.example: at this load one
# batch a flush writes a quarter of the rows shoal writes and the rest waits in its queue;
# 64 lets it write all of them).
# Needs mariadb-server (installed when missing), taskset and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
. bench/lib/site.sh
site_db unit3d
speed_args "${1:-/tmp/unit3d-bench}"
if [ -n "${U3A_BIN:-}" ]; then
    args+=(--u3a "$U3A_BIN")
    v=${U3A_VERSION:-$(git -C "$(dirname "$U3A_BIN")/../.." log -1 --format='%h (%cs)' 2>/dev/null || true)}
    [ -z "$v" ] || args+=(--u3a-version "$v")
    [ -z "${U3A_BATCHES:-}" ] || args+=(--u3a-batches "$U3A_BATCHES")
fi
exec python3 bench/unit3d/speed.py "${args[@]}"
