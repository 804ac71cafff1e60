#!/usr/bin/env bash
# shoal's memory under an hour of churn at internet scale (issue 43, item 1): one shoal
# (one worker on CPU 0, the full scrape on, as shipped), filled with PEERS distinct
# simulated peers over TORRENTS torrents (Pareto SHAPE), then an open loop at RATE
# requests a second for DURATION seconds (shoal-bench's mix: re-announces, 2% `completed`,
# 2% `stopped` and the peer back later, scrapes), VmRSS sampled every STEP seconds from
# /proc to OUT/rss.tsv (seconds since the fill ended, VmRSS KiB, VmHWM KiB), shoal's log
# (its cleaner's counts, at debug) in OUT/shoal.log, shoal-bench's in OUT/open.txt.
#
# Every simulated peer is its own peer in shoal (`--peer-ips` and `[udp] allow_ip_field`,
# as bench/scale.sh does).
#
#   SHOAL=target/release/shoal BENCH=target/release/shoal-bench bench/churn.sh OUT
#
# Environment (defaults): TORRENTS (10000000), PEERS (30000000), SHAPE (0.2), RATE (20000),
# DURATION (3600), STEP (60), PORT (23760), FILL_TIMEOUT (20m). Bounded: the fill by
# FILL_TIMEOUT, the open loop by DURATION, the stop by 120 s then SIGKILL. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
SHOAL=${SHOAL:-target/release/shoal}
BENCH=${BENCH:-target/release/shoal-bench}
OUT=${1:-/tmp/churn}
TORRENTS=${TORRENTS:-10000000}
PEERS=${PEERS:-30000000}
SHAPE=${SHAPE:-0.2}
RATE=${RATE:-20000}
DURATION=${DURATION:-3600}
STEP=${STEP:-60}
PORT=${PORT:-23760}
FILL_TIMEOUT=${FILL_TIMEOUT:-20m}
mkdir -p "$OUT"
printf 'log_level = "info,shoal_server=debug"\n[udp]\nallow_ip_field = true\n' >"$OUT/shoal.toml"

taskset -c 0 "$SHOAL" --udp "127.0.0.1:$PORT" --http "127.0.0.1:$((PORT + 1))" --workers 1 \
    --state-file= --config "$OUT/shoal.toml" >"$OUT/shoal.log" 2>&1 &
pid=$!
sampler=
finish() {
    [ -z "$sampler" ] || kill "$sampler" 2>/dev/null || true
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        for _ in $(seq 1200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    fi
    wait "$pid" 2>/dev/null || true
}
trap finish EXIT
sleep 1

load() { # JSON SECONDS FLAGS...
    local json=$1 dur=$2
    shift 2
    taskset -c 1 "$BENCH" udp --target "127.0.0.1:$PORT" --torrents "$TORRENTS" --peers "$PEERS" \
        --pareto-shape "$SHAPE" --rate "$RATE" --duration "${dur}s" --warmup 0s \
        --tracker-pid "$pid" --quiet --timeout 5s --json "$json" --peer-ips "$@"
}

load "$OUT/fill.json" 5 --fill --fill-timeout "$FILL_TIMEOUT" --inflight 256 | tee "$OUT/fill.txt"
printf 'seconds\tvmrss_kib\tvmhwm_kib\n' >"$OUT/rss.tsv"
(
    start=$(date +%s)
    while kill -0 "$pid" 2>/dev/null; do
        printf '%s\t%s\t%s\n' "$(($(date +%s) - start))" \
            "$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")" \
            "$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")" >>"$OUT/rss.tsv"
        sleep "$STEP"
    done
) &
sampler=$!
load "$OUT/open.json" "$DURATION" | tee "$OUT/open.txt"
grep -E '^Vm(RSS|HWM)' "/proc/$pid/status" | tee "$OUT/rss-after.txt"
