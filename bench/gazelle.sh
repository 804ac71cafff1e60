#!/usr/bin/env bash
# shoal as a Gazelle site's announce server against Ocelot, on the same MariaDB with
# Gazelle's tables in Gazelle's strict sql_mode, the same 10,000 members (32-character
# passkeys, enabled) and 10,000 torrents (each with its torrents_leech_stats row), inserted
# as the site inserts them:
#
#   SHOAL_BIN=target/release/shoal OCELOT_BIN=/tmp/ocelot-build/build/ocelot \
#     bench/gazelle.sh /tmp/gazelle-bench
#
# 7 rounds (ROUNDS); each round starts, loads and stops, in turn, shoal (`--private
# --schema gazelle --database mysql://...`) under shoal-bench's HTTP load without
# keep-alive (`--no-keep-alive`: a new connection per announce, as Ocelot closes every
# connection by default), Ocelot under the same load (only where OCELOT_BIN is given),
# and shoal under the same load over UDP. Before each run the site's activity (peers,
# snatches, counters) is emptied; the tracker runs on CPU 0 (all its threads; shoal with
# one worker), shoal-bench on CPU 1, MariaDB on CPU 1. The load: announces only,
# `--passkey-path '/{passkey}/announce'` (Gazelle's announce URL), `--user-agent
# qBittorrent/4.6.5`, 100,000 simulated peers, DURATION (20s) after WARMUP (5s). Both
# trackers run with Ocelot's defaults (interval 1800 + jitter 240, at most 50 peers,
# writes every 3 s). Building Ocelot: bench/gazelle/README.md.
#
# Reported (OUT/report.md, OUT/results.json): responses per tracker CPU-second, min / median
# / max over the rounds, shoal's ratio to Ocelot round by round, responses/s, tracker CPU,
# and the database writes per second over each run (MariaDB's Com_insert + Com_update +
# Com_delete statements, and rows written: Handler_write + Handler_update +
# Handler_delete).
#
# Environment: SHOAL_BIN (left out, or a shoal without `--schema gazelle`: Ocelot alone),
# SHOAL_COMMIT (the commit its binary was built from, for the report; default this
# checkout's), OCELOT_BIN, BENCH_BIN (target/release/shoal-bench), DDL (Gazelle's tables:
# the test fixture tests/fixtures/gazelle.sql), ROUNDS, DURATION, WARMUP, CONNECTIONS (128),
# KEEP_ALIVE=1 (reuse connections instead; Ocelot then gets keepalive_timeout = 60).
# Needs mariadb-server (installed when missing), taskset and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
. bench/lib/site.sh
site_db gazelle
speed_args "${1:-/tmp/gazelle-bench}"
[ -z "${KEEP_ALIVE:-}" ] || args+=(--keep-alive)
if [ -n "${OCELOT_BIN:-}" ]; then
    args+=(--ocelot "$OCELOT_BIN")
    v=$("$OCELOT_BIN" -V 2>/dev/null | sed -n 's/^Ocelot version \([^,]*\).*/\1/p' || true)
    [ -z "$v" ] || args+=(--ocelot-version "$v")
fi
exec python3 bench/gazelle/speed.py "${args[@]}"
