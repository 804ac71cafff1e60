#!/usr/bin/env bash
# shoal-bench at internet scale (issue 43, item 3): does the load generator stay out of the
# figures at 10 million torrents and 30 million simulated peers? Each round, against a
# freshly started shoal (one worker, pinned to CPU 0; shoal-bench pinned to CPU 1):
#
#   empty  open loop at RATE requests a second, shoal holding nothing
#   fill   --fill (every simulated peer announces once, closed loop, as fast as shoal
#          answers) with a 5 s open loop after it; shoal's VmRSS after the fill is in the
#          JSON (fill.tracker_rss_kib)
#   filled the same open loop as `empty`, against the filled shoal; shoal's VmRSS after
#          it in rss-after-run-N.txt
#
# FIFO (default none), e.g. FIFO=20, runs the open loops, and the tracker's front-end
# workers during them, at that SCHED_FIFO priority (chrt) on a machine shared with builds,
# so that the figures are the tracker's and shoal-bench's and not the builds'; the fills
# stay at normal priority (they keep a CPU busy for minutes).
#
# Every simulated peer is a peer of its own in the tracker: shoal-bench sends each one's
# address in the announce's IP field (`--peer-ips`: 10.0.0.0 plus its number) and shoal
# runs with `[udp] allow_ip_field = true`. A tracker knows a peer by its address; without
# this, a torrent's peers share shoal-bench's 4 socket addresses and at most 64,000 ports,
# and the 12 million peers that Pareto 0.2 sends to the largest torrent were 64,000 in the
# tracker: before 2026-12-07, "30 million peers" here were 18.1 million in shoal.
#
# With OLD=path/to/an/older/shoal-bench, each round first runs the empty open loop with
# that binary too (it has no --fill): the before/after of docs/benchmarks/scale.
#
#   SHOAL=target/release/shoal BENCH=target/release/shoal-bench bench/scale.sh OUT
#
# Environment (defaults): TORRENTS (10000000), PEERS (30000000), SHAPE (0.2, the Pareto
# shape of torrent popularity), RATE (40000), DUR (20, measured seconds), WARMUP (5),
# ROUNDS (3), PORT (23456), FILL (1; 0 skips the fill runs), FILL_TIMEOUT (10m), EXTRA
# (more shoal-bench udp flags), TOML (more lines of shoal's config, e.g.
# '[http]\nfull_scrape = false\n'). Every run is bounded: DUR + WARMUP seconds, and the fill by
# FILL_TIMEOUT. Loopback only.
set -euo pipefail
SHOAL=${SHOAL:-target/release/shoal}
BENCH=${BENCH:-target/release/shoal-bench}
OLD=${OLD:-}
OUT=${1:-/tmp/scale}
TORRENTS=${TORRENTS:-10000000}
PEERS=${PEERS:-30000000}
SHAPE=${SHAPE:-0.2}
RATE=${RATE:-40000}
DUR=${DUR:-20}
WARMUP=${WARMUP:-5}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-23456}
FILL=${FILL:-1}
FILL_TIMEOUT=${FILL_TIMEOUT:-10m}
EXTRA=${EXTRA:-}
TOML=${TOML:-}
FIFO=${FIFO:-}
PRIO=${FIFO:+chrt -f $FIFO}
mkdir -p "$OUT"

pid=
stop() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        # Bounded: SIGKILL after 60 s.
        for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
        wait "$pid" 2>/dev/null || true
    fi
    pid=
}
trap stop EXIT

printf '[udp]\nallow_ip_field = true\n%b' "$TOML" > "$OUT/scale.toml"

start() {
    # No state file: a fresh, empty store each time, and no snapshot on exit.
    taskset -c 0 "$SHOAL" --udp "127.0.0.1:$PORT" --http "127.0.0.1:$((PORT + 1))" \
        --workers 1 --state-file= --config "$OUT/scale.toml" --log-level debug \
        > "$OUT/shoal-$1.log" 2>&1 &
    pid=$!
    sleep 1
}

prio() { # raise the running tracker's front-end workers (threads udp-N) to SCHED_FIFO
    # Only the workers: its background threads (full scrape, cleaner, sampler) share CPU 0
    # with the worker, and at the same FIFO priority one of them is never preempted. The
    # full scrape's rebuild (a sort and a deflate of every torrent) then held the worker off
    # for 0.5-0.7 s at 5 million torrents: a pause of the harness, not of shoal, which runs
    # its threads under the normal scheduler. Before 2026-12-07 this raised every thread
    # (`chrt -a`), and the open loops on a filled shoal of docs/benchmarks/scale measured that.
    [ -z "$FIFO" ] && return 0
    local t
    for t in /proc/"$pid"/task/*; do
        if true; then chrt -f -p "$FIFO" "${t##*/}"; fi
    done
}

load() { # prefix, binary, json, measured seconds, warm-up seconds, extra flags...
    local pre=$1 bin=$2 json=$3 dur=$4 warmup=$5
    shift 5
    # shellcheck disable=SC2086
    $pre taskset -c 1 "$bin" udp --target "127.0.0.1:$PORT" --torrents "$TORRENTS" \
        --peers "$PEERS" --pareto-shape "$SHAPE" --rate "$RATE" \
        --duration "${dur}s" --warmup "${warmup}s" --tracker-pid "$pid" --quiet \
        --timeout 5s --json "$json" --peer-ips $EXTRA "$@"
}

for round in $(seq "$ROUNDS"); do
    if [ -n "$OLD" ]; then
        start "old-$round"
        prio
        echo "== round $round: old shoal-bench, open loop, empty shoal"
        load "$PRIO" "$OLD" "$OUT/old-empty-$round.json" "$DUR" "$WARMUP" | tee "$OUT/old-empty-$round.txt" ||
            echo "(the older shoal-bench failed)"
        stop
    fi
    start "empty-$round"
    prio
    echo "== round $round: open loop, empty shoal"
    load "$PRIO" "$BENCH" "$OUT/empty-$round.json" "$DUR" "$WARMUP" | tee "$OUT/empty-$round.txt"
    stop
    if [ "$FILL" = 1 ]; then
        start "fill-$round"
        echo "== round $round: fill"
        load "" "$BENCH" "$OUT/fill-$round.json" 5 0 --fill --fill-timeout "$FILL_TIMEOUT" \
            | tee "$OUT/fill-$round.txt"
        prio
        echo "== round $round: open loop, filled shoal"
        load "$PRIO" "$BENCH" "$OUT/filled-$round.json" "$DUR" "$WARMUP" | tee "$OUT/filled-$round.txt"
        grep -E '^Vm(RSS|HWM)' "/proc/$pid/status" > "$OUT/rss-after-run-$round.txt"
        stop
    fi
done
echo "results in $OUT"
