#!/usr/bin/env bash
# One command for every benchmark report in docs/benchmarks/ and the README's numbers table,
# all made by shoal-bench:
#
#   bench/report.sh                        # everything, about 50 minutes on 2 cores
#   bench/report.sh udp-aquatic ws-idle    # only some reports (names below), no README table
#   bench/report.sh headline               # only the README table, from the results on disk
#
# Every report is `shoal-bench compare`: each contender started fresh pinned to CPU 0, the
# load generator on CPU 1, contenders alternating over the rounds, min / median / max, CPU
# of tracker, load generator and everything else over the same window, runs where other
# processes used more than 10% of a core dropped and run again. Each writes
# docs/benchmarks/NAME/{report.md,results.json,...}; report.md says the date and the exact
# command.
#
#   compare-udp     shoal-bench's UDP load at LEVELS workers: shoal, aquatic_udp, opentracker,
#                   torrust-tracker (and aquatic_udp_load_test against shoal, to compare
#                   load generators)
#   compare-http    shoal-bench's HTTP load over HTTP_CLIENTS connections: shoal,
#                   aquatic_http, opentracker, torrust-tracker
#   compare-ws      shoal-bench's WebTorrent load over WS_CLIENTS connections: shoal,
#                   aquatic_ws, the npm bittorrent-tracker (bench/peers)
#   udp-aquatic     aquatic_udp_load_test (its defaults: 1M torrents, 50:50:1 connect,
#                   announce, scrape): shoal, aquatic_udp, io-limit (bench/io-limit, the
#                   kernel's I/O limit), torrust-tracker
#   http-aquatic    aquatic_http_load_test, keep-alive: shoal, aquatic_http
#   https-aquatic   the same over TLS (self-signed certificate made with openssl)
#   http-wrk        wrk -H 'Connection: close' on one announce URL, trackers with keep-alive
#                   off: shoal, aquatic_http, opentracker
#   ws-aquatic      aquatic_ws_load_test over wss: shoal, aquatic_ws
#   ws-idle         IDLE idle WebSocket connections, ws and wss: KiB per connection
#   sweep-ws        shoal-bench sweep, 1 to 128 WebSocket clients against shoal with its
#                   embedded defaults (seed 004's table); sweep loads a running tracker,
#                   so this one starts shoal itself, pinned like the others
#   udp-baseline    only when BASELINE_SHOAL names another shoal binary (say, the last
#                   release): the same load as udp-aquatic, shoal against that binary, so a
#                   change's effect on UDP throughput is measured in one run
#   ws-baseline     the same for WebTorrent under shoal-bench's own load (WS_BASELINE_CLIENTS)
#   headline        the README's table between <!-- numbers:begin --> and <!-- numbers:end -->,
#                   from the six reports above and the swarm memory example
#
# Opentracker (Debian's, whitelist-only) gets the workload's info hashes as its whitelist
# (`shoal-bench info-hashes`); wrk's URL announces the first of them.
# Needs: aquatic binaries in $BIN_DIR (default /work/tools/bin, else installed into
# target/peers with cargo install), torrust-tracker 3.0.0 in $BIN_DIR or $PEER_BIN_DIR
# (default /work/peers/bin, else installed into target/peers with `cargo install --locked`:
# without its lock file a newer zerocopy breaks its primitives crate), opentracker and wrk
# (apt-get), openssl, cc, and npm for compare-ws.
# Environment: ROUNDS (3, compare-*), DURATION (10s) and WARMUP (5s) for compare-*,
# GEN_ROUNDS (3; udp-aquatic and udp-baseline: UDP_GEN_ROUNDS, 7; ws-aquatic: WS_GEN_ROUNDS, 7),
# GEN_DURATION (15s) and GEN_WARMUP (5s)
# for the runs under aquatic's testers and wrk (multiples of 5 s), LEVELS (1,2),
# HTTP_CLIENTS (64,256,1024), WS_CLIENTS (16,64,256,1024), WRK_CLIENTS (64),
# TORRENTS (10000), IDLE (10000), BASELINE_SHOAL (udp-baseline), BASELINE_DIR (earlier
# docs/benchmarks, for the "comparison with the previous run" tables of compare-*),
# TRACKER_WORKERS (tiers of tracker workers for every load report, e.g. 1,2,4,8 on a
# 16-core machine: `compare --tracker-workers`; unset, one tier of one worker, as on 2
# cores). Each report directory keeps a history.jsonl that every run appends to.
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUST_BACKTRACE RUST_LIB_BACKTRACE

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-5s}
GEN_ROUNDS=${GEN_ROUNDS:-3}
UDP_GEN_ROUNDS=${UDP_GEN_ROUNDS:-7}
WS_GEN_ROUNDS=${WS_GEN_ROUNDS:-7}
GEN_DURATION=${GEN_DURATION:-15s}
GEN_WARMUP=${GEN_WARMUP:-5s}
LEVELS=${LEVELS:-1,2}
HTTP_CLIENTS=${HTTP_CLIENTS:-64,256,1024}
WS_CLIENTS=${WS_CLIENTS:-16,64,256,1024}
WRK_CLIENTS=${WRK_CLIENTS:-64}
TORRENTS=${TORRENTS:-10000}
IDLE=${IDLE:-10000}
headline_reports=(udp-aquatic http-aquatic http-wrk https-aquatic ws-aquatic ws-idle)
all=(compare-udp compare-http compare-ws "${headline_reports[@]}" sweep-ws)
[ -z "${BASELINE_SHOAL:-}" ] || all+=(udp-baseline ws-baseline)
all+=(headline)
reports=("$@")
[ ${#reports[@]} -gt 0 ] || reports=("${all[@]}")
wants() { [[ " ${reports[*]} " == *" $1 "* ]]; }

BIN_DIR=${BIN_DIR:-/work/tools/bin}
if [ ! -x "$BIN_DIR/aquatic_udp" ]; then
    BIN_DIR=$PWD/target/peers/bin
    for tool in aquatic_udp aquatic_http aquatic_ws; do
        [ -x "$BIN_DIR/$tool" ] || cargo install --version 0.9.0 --root target/peers "$tool"
    done
    for tool in aquatic_udp_load_test aquatic_http_load_test aquatic_ws_load_test; do
        [ -x "$BIN_DIR/$tool" ] || cargo install --locked --version 0.9.0 --root target/peers "$tool"
    done
fi
PEER_BIN_DIR=${PEER_BIN_DIR:-/work/peers/bin}
if { wants compare-udp || wants compare-http || wants udp-aquatic; } \
    && [ ! -x "$BIN_DIR/torrust-tracker" ] \
    && [ ! -x "$PEER_BIN_DIR/torrust-tracker" ]; then
    PEER_BIN_DIR=$PWD/target/peers/bin
    [ -x "$PEER_BIN_DIR/torrust-tracker" ] \
        || cargo install --locked --version 3.0.0 --root target/peers torrust-tracker
fi
for tool in opentracker wrk; do
    if ! command -v $tool >/dev/null; then
        sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
        $sudo apt-get update && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y $tool
    fi
done

# The JavaScript reference WebTorrent tracker, from bench/peers/package-lock.json.
bt_tracker=bench/peers/node_modules/bittorrent-tracker/bin/cmd.js
if wants compare-ws && [ ! -f "$bt_tracker" ]; then
    npm ci --prefix bench/peers --no-audit --no-fund
fi

cargo build --release -p shoal-server -p shoal-bench
export PATH="$PWD/target/release:$PATH"
bench=target/release/shoal-bench

# opentracker chroots into -d before it reads the whitelist: keep both in one directory.
wl_dir=$PWD/target/bench/opentracker
mkdir -p "$wl_dir"
$bench info-hashes --torrents "$TORRENTS" > "$wl_dir/whitelist"
opentracker_udp="opentracker=opentracker -i 127.0.0.1 -P {port} -d $wl_dir -w whitelist"
opentracker_http="opentracker=opentracker -i 127.0.0.1 -p {port} -d $wl_dir -w whitelist"

compare() { # NAME PORT ARGS...: one report into docs/benchmarks/NAME
    local name=$1 port=$2; shift 2
    local baseline=()
    if [ -n "${BASELINE_DIR:-}" ] && [ -f "$BASELINE_DIR/$name/results.json" ]; then
        baseline=(--baseline "$BASELINE_DIR/$name/results.json")
    fi
    local tiers=()
    if [ -n "${TRACKER_WORKERS:-}" ] && [[ " $* " != *" --idle-connections "* ]]; then
        tiers=(--tracker-workers "$TRACKER_WORKERS")
    fi
    $bench compare --bin-dir "$BIN_DIR" --bin-dir "$PEER_BIN_DIR" --out "docs/benchmarks/$name" \
        --port "$port" "${baseline[@]}" "${tiers[@]}" "$@"
    echo "==> docs/benchmarks/$name/report.md"
}
load=(--duration "$DURATION" --warmup "$WARMUP" --torrents "$TORRENTS")
gen=(--duration "$GEN_DURATION" --warmup "$GEN_WARMUP" --torrents "$TORRENTS")

# One port per report: an HTTP run leaves TIME_WAIT sockets that would slow the next.
for report in "${reports[@]}"; do
    case $report in
        compare-udp)
            compare "$report" 3100 --rounds "$ROUNDS" --png --levels "$LEVELS" \
                --vs-aquatic-load-test --tracker shoal --tracker aquatic_udp \
                --tracker "$opentracker_udp" --tracker torrust \
                udp --target 127.0.0.1:3100 "${load[@]}" ;;
        compare-http)
            compare "$report" 3200 --rounds "$ROUNDS" --png --clients "$HTTP_CLIENTS" \
                --tracker shoal --tracker aquatic_http --tracker "$opentracker_http" \
                --tracker torrust http --target http://127.0.0.1:3200/announce "${load[@]}" ;;
        compare-ws)
            compare "$report" 3300 --rounds "$ROUNDS" --png --clients "$WS_CLIENTS" \
                --tracker shoal --tracker aquatic_ws \
                --tracker "bittorrent-tracker=node $bt_tracker --ws --http-hostname 127.0.0.1 --port {port} --quiet" \
                ws --target ws://127.0.0.1:3300 "${load[@]}" ;;
        udp-aquatic)
            compare "$report" 3400 --generator aquatic --rounds "$UDP_GEN_ROUNDS" \
                --tracker shoal --tracker aquatic_udp --tracker io-limit --tracker torrust \
                udp --target 127.0.0.1:3400 "${gen[@]}" ;;
        udp-baseline)
            [ -x "${BASELINE_SHOAL:-}" ] || { echo "udp-baseline: BASELINE_SHOAL is not an executable" >&2; exit 2; }
            compare "$report" 3450 --generator aquatic --rounds "$UDP_GEN_ROUNDS" \
                --tracker shoal \
                --tracker "shoal-baseline=$BASELINE_SHOAL --udp 127.0.0.1:{port} --workers 1 --state-file=" \
                udp --target 127.0.0.1:3450 "${gen[@]}" ;;
        ws-baseline)
            [ -x "${BASELINE_SHOAL:-}" ] || { echo "ws-baseline: BASELINE_SHOAL is not an executable" >&2; exit 2; }
            compare "$report" 3460 --rounds "$ROUNDS" --clients "${WS_BASELINE_CLIENTS:-16,1024}" \
                --tracker shoal \
                --tracker "shoal-baseline=$BASELINE_SHOAL --http 127.0.0.1:{port} --workers 1 --state-file=" \
                ws --target ws://127.0.0.1:3460 "${load[@]}" ;;
        http-aquatic)
            compare "$report" 3500 --generator aquatic --rounds "$GEN_ROUNDS" \
                --tracker shoal --tracker aquatic_http \
                http --target http://127.0.0.1:3500/announce "${gen[@]}" ;;
        https-aquatic)
            compare "$report" 3600 --generator aquatic --rounds "$GEN_ROUNDS" \
                --tracker shoal --tracker aquatic_http \
                http --target https://127.0.0.1:3600/announce "${gen[@]}" ;;
        http-wrk)
            compare "$report" 3700 --generator wrk --rounds "$GEN_ROUNDS" --clients "$WRK_CLIENTS" \
                --tracker shoal --tracker aquatic_http --tracker "$opentracker_http" \
                http --target http://127.0.0.1:3700/announce "${gen[@]}" ;;
        ws-aquatic)
            # Both trackers at their default configs (issue 14): aquatic_ws_load_test
            # announces every torrent it picks on each of its connections, which shoal's
            # default ws.max_torrents_per_connection (10,000, least recently announced
            # evicted past it) serves without refusals. shoal's admin listener gives the
            # report its counters round by round (answers dropped, failure reasons sent).
            compare "$report" 3800 --generator aquatic --rounds "$WS_GEN_ROUNDS" \
                --tracker "shoal=target/release/shoal --https 127.0.0.1:{port} --workers {workers} --state-file= --tls-cert {cert} --tls-key {key} --admin 127.0.0.1:3811" \
                --tracker aquatic_ws \
                ws --target wss://127.0.0.1:3800 "${gen[@]}" ;;
        ws-idle)
            compare "$report" 3900 --idle-connections "$IDLE" --idle-modes ws,wss \
                --tracker shoal --tracker aquatic_ws ws --target ws://127.0.0.1:3900 ;;
        sweep-ws)
            config=target/bench/sweep-ws.toml
            mkdir -p target/bench
            printf '%s\n' 'workers = 1' '[udp]' 'listen = []' '[http]' \
                'listen = ["127.0.0.1:4000"]' '[state]' 'file = ""' '[admin]' 'listen = []' > "$config"
            taskset -c 0 target/release/shoal --config "$config" > target/bench/sweep-ws.log 2>&1 &
            shoal_pid=$!
            for _ in $(seq 50); do
                (exec 3<>/dev/tcp/127.0.0.1/4000) 2>/dev/null && break
                sleep 0.1
            done
            status=0
            taskset -c 1 $bench sweep --out-dir "docs/benchmarks/$report" --png \
                ws --target ws://127.0.0.1:4000 --duration 5s --warmup 2s --quiet || status=$?
            kill "$shoal_pid"
            wait "$shoal_pid" || true
            [ "$status" -eq 0 ] || exit "$status"
            echo "==> docs/benchmarks/$report/" ;;
        headline)
            dirs=()
            for name in "${headline_reports[@]}"; do
                [ -f "docs/benchmarks/$name/results.json" ] && dirs+=("docs/benchmarks/$name")
            done
            if [ ${#dirs[@]} -eq 0 ]; then
                echo "headline: no results.json under docs/benchmarks/{${headline_reports[*]}}" >&2
                exit 1
            fi
            memory=$(cargo run --quiet --release -p shoal-swarm --example memory)
            table=$(mktemp)
            $bench headline "${dirs[@]}" --swarm-memory "$memory" > "$table"
            awk -v table="$table" '
                /<!-- numbers:end -->/ { skip = 0 }
                !skip { print }
                /<!-- numbers:begin -->/ { while ((getline line < table) > 0) print line; skip = 1 }
            ' README.md > README.md.new
            mv README.md.new README.md
            rm -f "$table"
            echo "==> README.md (numbers table)" ;;
        *) echo "unknown report $report (one of: ${all[*]})" >&2; exit 2 ;;
    esac
done
