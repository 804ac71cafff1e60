#!/usr/bin/env bash
# One command for the comparison reports that shoal-bench writes:
#
#   bench/report.sh            # UDP, HTTP and WebTorrent, ~15 minutes on 2 cores
#   bench/report.sh udp        # only some protocols
#
# For each protocol, `shoal-bench compare` starts every contender in turn pinned to CPU 0,
# loads it from CPU 1 with the same workload, alternating and repeating, and writes
# docs/benchmarks/compare-PROTO/{report.md,results.json,throughput.svg,latency.svg} and the
# charts as PNG beside them. UDP runs at LEVELS load-generator workers; HTTP and WebTorrent
# at one worker and HTTP_CLIENTS / WS_CLIENTS connections: their clients wait for each
# answer, so a tracker that takes a while per request (aquatic_http: ~8 ms, whatever the
# load) or delays some writes (no TCP_NODELAY) only reaches its capacity with many
# connections, and the sweep shows both ends.
# Contenders: shoal, aquatic (udp/http/ws 0.9.0), Debian's opentracker where it speaks
# the protocol (UDP, HTTP), and for WebTorrent the JavaScript reference bittorrent-tracker
# (npm, bench/peers). Debian's opentracker only serves whitelisted info hashes: it gets the
# workload's own hashes (`shoal-bench info-hashes`) as its whitelist.
#
# Needs the peers: aquatic binaries in $BIN_DIR (default: /work/tools/bin, else installed
# into target/peers with cargo install, ~2 minutes each) and `opentracker` (apt-get).
# Environment: ROUNDS (3), DURATION (10s), WARMUP (3s), LEVELS (1,2), HTTP_CLIENTS
# (64,256,1024), WS_CLIENTS (16,64,256,1024), TORRENTS (10000),
# BASELINE_DIR (a directory of earlier results.json files, for the previous-run tables).
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUST_BACKTRACE

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-3s}
LEVELS=${LEVELS:-1,2}
HTTP_CLIENTS=${HTTP_CLIENTS:-64,256,1024}
WS_CLIENTS=${WS_CLIENTS:-16,64,256,1024}
TORRENTS=${TORRENTS:-10000}
protocols=("$@")
[ ${#protocols[@]} -gt 0 ] || protocols=(udp http ws)

BIN_DIR=${BIN_DIR:-/work/tools/bin}
if [ ! -x "$BIN_DIR/aquatic_udp" ]; then
    BIN_DIR=$PWD/target/peers/bin
    for tool in aquatic_udp aquatic_http aquatic_ws; do
        [ -x "$BIN_DIR/$tool" ] || cargo install --version 0.9.0 --root target/peers "$tool"
    done
    [ -x "$BIN_DIR/aquatic_udp_load_test" ] ||
        cargo install --locked --version 0.9.0 --root target/peers aquatic_udp_load_test
fi
if ! command -v opentracker >/dev/null; then
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y opentracker
fi

# The JavaScript reference WebTorrent tracker, from bench/peers/package-lock.json.
bt_tracker=bench/peers/node_modules/bittorrent-tracker/bin/cmd.js
if [[ " ${protocols[*]} " == *" ws "* ]] && [ ! -f "$bt_tracker" ]; then
    npm ci --prefix bench/peers --no-audit --no-fund
fi

cargo build --release -p shoal-server -p shoal-bench
export PATH="$PWD/target/release:$PATH"
bench=target/release/shoal-bench

# opentracker chroots into -d before it reads the whitelist: keep both in one directory.
wl_dir=$PWD/target/bench/opentracker
mkdir -p "$wl_dir"
$bench info-hashes --torrents "$TORRENTS" > "$wl_dir/whitelist"

for proto in "${protocols[@]}"; do
    out=docs/benchmarks/compare-$proto
    baseline=()
    if [ -n "${BASELINE_DIR:-}" ] && [ -f "$BASELINE_DIR/compare-$proto/results.json" ]; then
        baseline=(--baseline "$BASELINE_DIR/compare-$proto/results.json")
    fi
    # One port per protocol: an HTTP run leaves TIME_WAIT sockets that would block the next.
    case $proto in udp) port=3100 ;; http) port=3200 ;; *) port=3300 ;; esac
    common=(--bin-dir "$BIN_DIR" --rounds "$ROUNDS" --out "$out" --port "$port" --png
            "${baseline[@]}")
    load=(--duration "$DURATION" --warmup "$WARMUP" --torrents "$TORRENTS")
    case $proto in
        udp)
            $bench compare "${common[@]}" --levels "$LEVELS" --vs-aquatic-load-test \
                --tracker shoal --tracker aquatic_udp \
                --tracker "opentracker=opentracker -i 127.0.0.1 -P {port} -d $wl_dir -w whitelist" \
                udp --target 127.0.0.1:$port "${load[@]}"
            ;;
        http)
            $bench compare "${common[@]}" --levels 1 --clients "$HTTP_CLIENTS" \
                --tracker shoal --tracker aquatic_http \
                --tracker "opentracker=opentracker -i 127.0.0.1 -p {port} -d $wl_dir -w whitelist" \
                http --target http://127.0.0.1:$port/announce "${load[@]}"
            ;;
        ws)
            $bench compare "${common[@]}" --levels 1 --clients "$WS_CLIENTS" \
                --tracker shoal --tracker aquatic_ws \
                --tracker "bittorrent-tracker=node $bt_tracker --ws --http-hostname 127.0.0.1 --port {port} --quiet" \
                ws --target ws://127.0.0.1:$port "${load[@]}"
            ;;
        *) echo "unknown protocol $proto (udp, http, ws)" >&2; exit 2 ;;
    esac
    echo "==> $out/report.md"
done
