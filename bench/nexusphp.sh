#!/usr/bin/env bash
# shoal as a NexusPHP site's announce server against shoal's own UNIT3D mode (issue 45, the
# speed check), on one MariaDB server holding NexusPHP's schema as it ships (database
# `nexusphp`, the fixture tests/fixtures/nexusphp.sql) and UNIT3D's tables (database
# `unit3d`), the same 10,000 members (32-hex passkeys) and 10,000 torrents in each:
#
#   flock /tmp/shoal-bench.lock bench/nexusphp.sh /tmp/nexusphp-bench
#
# 7 rounds (ROUNDS); each round starts, loads and stops, in turn, shoal `--private --schema
# nexusphp --database mysql://...` under shoal-bench's HTTP keep-alive load with the
# passkey in the query as NexusPHP's clients send it (`--passkey-path
# '/announce.php?passkey={passkey}'`), shoal `--schema unit3d` on the UNIT3D database under
# the same load on UNIT3D's URL (`/announce/{passkey}`), and shoal NexusPHP mode under the
# same load over UDP (the same path and query as BEP 41 URL data). Before each run the
# site's activity (peers, snatches or history, counters) is emptied; the tracker runs on
# CPU 0 (all its threads, one worker), shoal-bench and MariaDB on CPU 1. Announces only,
# `--user-agent qBittorrent/4.6.5`, DURATION (20s) after WARMUP (5s).
#
# The load, and NexusPHP's limits: NexusPHP refuses a member's second announce on one
# torrent within 30 s ("Request too frequent", unless `completed` or `stopped`), answers
# one within 5 s without peers and without writing (a re-announce), and refuses a plain
# announce of a client whose announce before last was under 300 s ago ("There is a minimum
# announce time of 300 seconds"). These are constants of public/announce.php and
# TrackerRepository, not rows of `settings`: no setting lets a member announce a torrent
# every few seconds (UNIT3D's `announce_min = 1`, which bench/unit3d.sh sets, has no
# NexusPHP counterpart). The settings the load does depend on are written as the installer
# writes them (bench/nexusphp/site_db.py: no wait system, no download slots, no hit and
# run, no paid torrents), with a client family for shoal-bench's peer ids. So the load keeps
# within the limits instead: `shoal-bench --sweep` announces its PEERS (4,000,000) simulated
# peers in turn, peer i (member i mod 10,000) on torrent (i mod 10,000 + i / 10,000) mod
# 10,000, so each (member, torrent) has one client, and with more peers than a run
# announces, each announce is a client's first (`started`), answered with the peers of its
# torrent. Both modes get that same load (UNIT3D mode with bench/unit3d.sh's rules: a
# 1-second minimum interval, no per-user peer-list rate limits); the report says how many
# announces each run sent, and the failures each run got (expected about 0: the few ports
# each site blacklists).
#
# Reported (OUT/report.md, OUT/results.json): responses per tracker CPU-second in the
# measured window, min / median / max over the rounds, NexusPHP / UNIT3D round by round;
# all the work (the announces each tracker answered from the load's start per CPU-second
# it spent until it exited after SIGTERM, its last writes done), NexusPHP / UNIT3D round by
# round and whether the median is at least 0.9x (the verdict: neither mode's writes keep
# up with this load, and the window holds a different share of each mode's writing);
# responses/s, tracker CPU, peers per answer, failures, and the database writes per second
# over each run (MariaDB's counters, the whole server).
#
# Environment: SHOAL_BIN (target/release/shoal), SHOAL_COMMIT (the commit its binary was
# built from, for the report; default this checkout's), BENCH_BIN
# (target/release/shoal-bench), DDL (NexusPHP's tables: tests/fixtures/nexusphp.sql),
# UNIT3D_DDL (tests/fixtures/unit3d.sql), ROUNDS, DURATION, WARMUP, CONNECTIONS (128),
# PEERS. Needs mariadb-server (installed when missing), taskset and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUST_BACKTRACE RUST_LIB_BACKTRACE
. bench/lib/site.sh
site_db nexusphp
UNIT3D_DDL=${UNIT3D_DDL:-tests/fixtures/unit3d.sql}
[ -f "$UNIT3D_DDL" ] || { echo "no DDL at $UNIT3D_DDL (set UNIT3D_DDL)" >&2; exit 2; }
SHOAL_BIN=${SHOAL_BIN:-target/release/shoal}
[ -x "$SHOAL_BIN" ] || { echo "no shoal at $SHOAL_BIN (cargo build --release -p shoal-server)" >&2; exit 2; }
speed_args "${1:-/tmp/nexusphp-bench}"
args+=(--unit3d-ddl "$UNIT3D_DDL" --peers "${PEERS:-4000000}")
exec python3 bench/nexusphp/speed.py "${args[@]}"
