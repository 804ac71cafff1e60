#!/usr/bin/env bash
# shoal, opentracker and aquatic_udp side by side at the largest public trackers' size
# (issue 43, item 4): at each SIZE (torrents:peers), every tracker in turn, alternating the
# order round by round, on CPU_TRACKER with one worker, shoal-bench on CPU_BENCH:
#
#   fill     every simulated peer announces once (`--fill`, closed loop, as fast as the
#            tracker answers): answers a second, answers per tracker CPU-second, VmRSS after
#   open     an open loop at RATE requests a second against the filled tracker (DUR s after
#            WARMUP s): p50/p99/p99.9, responses per tracker CPU-second, VmRSS after
#   sigterm  SIGTERM to the filled tracker, timed to its exit (shoal writes its final
#            snapshot in it; the others keep nothing)
#   restart  the tracker started again (shoal on the snapshot just written), probed over UDP
#            every 5 ms until an announce is answered; shoal's background load timed from
#            its log; SIGTERM again, timed (bench/lib/restart_probe.py)
#
# The same datagrams for all: no announce carries an IP field (opentracker and aquatic_udp
# take the sender's address), and the peers are told apart by address as the trackers do.
# The fill sends through FILL_SOCKETS sockets on as many loopback source addresses (509 by
# default, coprime with the 64,000 ports shoal-bench's peers use, so that socket and port
# together are distinct for 30 million peers). The open loop uses OPEN_SOCKETS (4, shoal-
# bench's default): 509 sockets cost the generator more CPU than the open loop leaves it
# (its runs were not valid at 20,000 a second), so the open loop's peers come from other
# addresses than the fill's and each tracker adds them as new peers (at most RATE x
# (DUR + WARMUP), under 2% of the fill at 30 million): the same for every tracker.
#
# Receive buffers: shoal sizes its own socket's; aquatic_udp is given 8 MB in its config;
# opentracker takes the system's default, which drops the fill's 1,024 datagrams in
# flight (6% of them timed out in a trial). As seed 001 did, the script raises
# net.core.rmem_default and rmem_max to RMEM (104857600) for the run where it may
# (root), and puts the old values back when it ends.
#
#   bench/opentracker-scale.sh OUT
#
# opentracker is built from source, as seed 001 built it (its Makefile, the IPv4 build,
# `-O3 -march=native -mtune=native`), from the git repository OT_GIT at each commit of
# OT_COMMITS (default: 110868e, seed 001's, and 716dcfb, the newest the search tool's
# `fetch` brought on 2026-12-07, from github:brandon1024/opentracker, a mirror holding
# erdgeist's history), into target/opentracker-scale/. It needs libowfat-dev and zlib1g-dev
# (installed with apt-get where missing). Or give OT_BINS="name=path ..." to skip the build.
# aquatic_udp: AQUATIC (default target/peers/bin/aquatic_udp, `cargo install --version 0.9.0
# --root target/peers aquatic_udp`), run with one socket worker and one swarm worker.
#
# Environment (defaults): SIZES ("1000000:3000000 10000000:30000000"), ROUNDS (3), RATE
# (20000), DUR (20), WARMUP (5), SHAPE (0.2), PORT (23710), FILL_SOCKETS (509),
# OPEN_SOCKETS (4), RMEM (104857600; empty leaves the system's buffers alone), FILL_TIMEOUT
# (20m), CPU_TRACKER (0) and WORKERS (1): the tracker's CPUs (a taskset list) and its
# workers (shoal --workers, opentracker's listen.udp.workers, aquatic_udp's socket_workers;
# one opentracker worker is its main loop, as it runs by default), CPU_BENCH (1) and
# BENCH_WORKERS (1) the same of shoal-bench, SIGTERM_CPUS (empty: CPU_TRACKER) the CPUs
# every thread of the tracker is moved to before each SIGTERM (the generator has stopped by
# then; shoal writes its final snapshot on every CPU it may use), TRACKERS (every one built: shoal,
# opentracker-<commit> for each commit, aquatic_udp; shoal-no-ids on request), SHOAL, BENCH. On 16 cores:
# bench/opentracker-scale-16core.sh. The report is OUT/report.md
# (bench/lib/scale_report.py). Every run is bounded (the fill by FILL_TIMEOUT, the loops by
# DUR + WARMUP, every stop by 60 s and then SIGKILL). Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${1:-/tmp/opentracker-scale}
SHOAL=${SHOAL:-target/release/shoal}
BENCH=${BENCH:-target/release/shoal-bench}
AQUATIC=${AQUATIC:-target/peers/bin/aquatic_udp}
OT_GIT=${OT_GIT:-/work/.mirror/brandon1024+opentracker/repo}
OT_COMMITS=${OT_COMMITS:-110868e 716dcfb}
OT_BINS=${OT_BINS:-}
SIZES=${SIZES:-1000000:3000000 10000000:30000000}
ROUNDS=${ROUNDS:-3}
RATE=${RATE:-20000}
DUR=${DUR:-20}
WARMUP=${WARMUP:-5}
SHAPE=${SHAPE:-0.2}
PORT=${PORT:-23710}
FILL_SOCKETS=${FILL_SOCKETS:-509}
OPEN_SOCKETS=${OPEN_SOCKETS:-4}
RMEM=${RMEM-104857600}
FILL_TIMEOUT=${FILL_TIMEOUT:-20m}
CPU_TRACKER=${CPU_TRACKER:-0}
CPU_BENCH=${CPU_BENCH:-1}
WORKERS=${WORKERS:-1}
BENCH_WORKERS=${BENCH_WORKERS:-1}
SIGTERM_CPUS=${SIGTERM_CPUS:-}
mkdir -p "$OUT/run"
OUT=$(cd "$OUT" && pwd)

build_opentracker() { # COMMIT: target/opentracker-scale/opentracker-COMMIT
    local commit=$1 dest=$ROOT/target/opentracker-scale/opentracker-$1 build features
    [ -x "$dest" ] && return 0
    if [ ! -e /usr/include/io.h ] && [ ! -e /usr/include/libowfat/io.h ]; then
        local sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
        $sudo apt-get update >/dev/null 2>&1 || true
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends \
            libowfat-dev zlib1g-dev make >/dev/null
    fi
    build=$(mktemp -d /tmp/shoal-ot-scale.XXXXXX)
    git --git-dir="$(git -C "$OT_GIT" rev-parse --absolute-git-dir)" archive "$commit" | tar x -C "$build"
    # Seed 001's edit of the Makefile.
    sed -i 's/^OPTS_production=-O3/OPTS_production=-O3 -march=native -mtune=native/' "$build/Makefile"
    # The Makefile's own features. Before 2022 opentracker was IPv4 unless built with
    # WANT_V6; since, it is dual-stack unless built with WANT_V4_ONLY, and without libowfat
    # 0.34 (Debian ships 0.32) it needs WANT_NO_AUTO_FREE.
    features=$(sed -n 's/^FEATURES+=//p' "$build/Makefile" | tr '\n' ' ')
    if grep -q WANT_V4_ONLY "$build/Makefile"; then features+=" -DWANT_V4_ONLY -DWANT_NO_AUTO_FREE"; fi
    [ ! -f "$build/Makefile.gzip" ] || features+=" -DWANT_COMPRESSION_GZIP"
    local headers=/usr/include; [ -e /usr/include/io.h ] || headers=/usr/include/libowfat
    make -C "$build" opentracker LIBOWFAT_HEADERS="$headers" LIBOWFAT_LIBRARY=/usr/lib \
        FEATURES="$features" >"$build/build.log" 2>&1 || { cat "$build/build.log" >&2; return 1; }
    mkdir -p "$(dirname "$dest")"
    cp "$build/opentracker" "$dest"
    echo "opentracker $commit: $features" >"$dest.features"
    rm -rf "$build"
}

declare -A BIN
BIN[shoal]=$SHOAL
# shoal-no-ids: the same build keeping no peer ids ([store] peer_ids = false), as opentracker.
BIN[shoal-no-ids]=$SHOAL
if [ -n "$OT_BINS" ]; then
    for nb in $OT_BINS; do BIN[${nb%%=*}]=${nb#*=}; done
else
    for c in $OT_COMMITS; do build_opentracker "$c" && BIN[opentracker-$c]=$ROOT/target/opentracker-scale/opentracker-$c; done
fi
[ -x "$AQUATIC" ] && BIN[aquatic_udp]=$AQUATIC
if [ -z "${TRACKERS:-}" ]; then
    TRACKERS="shoal"
    for c in $OT_COMMITS; do [ -n "${BIN[opentracker-$c]:-}" ] && TRACKERS+=" opentracker-$c"; done
    for nb in $OT_BINS; do TRACKERS+=" ${nb%%=*}"; done
    [ -n "${BIN[aquatic_udp]:-}" ] && TRACKERS+=" aquatic_udp"
fi
read -r -a trackers <<<"$TRACKERS"
echo "trackers: ${trackers[*]}" | tee "$OUT/trackers.txt"
for t in "${trackers[@]}"; do
    echo "$t ${BIN[$t]} $(sha256sum "${BIN[$t]}" | cut -c1-16)" >>"$OUT/trackers.txt"
done

# Debug for shoal's own crate: the cleaner's counts and the full scrape's rebuild times.
printf 'log_level = "info,shoal_server=debug,shoal_state=debug"\n' >"$OUT/shoal.toml"
# SHOAL_CONFIG: more lines for shoal's config file (e.g. "[state]\nchanges_interval = 60").
[ -z "${SHOAL_CONFIG:-}" ] || printf '%b\n' "$SHOAL_CONFIG" >>"$OUT/shoal.toml"
{ cat "$OUT/shoal.toml"; printf '[store]\npeer_ids = false\n'; } >"$OUT/shoal-no-ids.toml"
printf 'listen.udp.workers %s\nlisten.udp 127.0.0.1:%s\n' "$WORKERS" "$PORT" >"$OUT/opentracker.conf"
cat >"$OUT/aquatic.toml" <<EOF
socket_workers = $WORKERS
[network]
address = "127.0.0.1:$PORT"
socket_recv_buffer_size = 8000000
EOF

cmd_of() { # NAME: the tracker's command line (pinned), for a fresh start
    case $1 in
        shoal*) echo "taskset -c $CPU_TRACKER ${BIN[$1]} --udp 127.0.0.1:$PORT --http 127.0.0.1:$((PORT + 1)) --workers $WORKERS --state-file=$OUT/run/shoal.state --config $OUT/$1.toml" ;;
        opentracker*)
            if [ "$WORKERS" = 1 ]; then
                echo "taskset -c $CPU_TRACKER ${BIN[$1]} -i 127.0.0.1 -P $PORT -d $OUT/run"
            else
                echo "taskset -c $CPU_TRACKER ${BIN[$1]} -f $OUT/opentracker.conf -d $OUT/run"
            fi ;;
        aquatic_udp) echo "taskset -c $CPU_TRACKER ${BIN[aquatic_udp]} -c $OUT/aquatic.toml" ;;
    esac
}

pid=
halt() { # SIGTERM the running tracker, bounded: SIGKILL after 60 s; prints the seconds
    [ -n "$pid" ] || return 0
    local t0 t1
    [ -z "$SIGTERM_CPUS" ] || taskset -a -p -c "$SIGTERM_CPUS" "$pid" >/dev/null 2>&1 || true
    t0=$(date +%s.%N)
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    wait "$pid" 2>/dev/null || true
    t1=$(date +%s.%N)
    pid=
    echo "$t1 - $t0" | bc
}
rmem_old=
if [ -n "$RMEM" ] && [ -w /proc/sys/net/core/rmem_default ]; then
    rmem_old="$(cat /proc/sys/net/core/rmem_default) $(cat /proc/sys/net/core/rmem_max)"
    echo "$RMEM" >/proc/sys/net/core/rmem_default
    echo "$RMEM" >/proc/sys/net/core/rmem_max
fi
finish() {
    halt >/dev/null
    if [ -n "$rmem_old" ]; then
        echo "${rmem_old% *}" >/proc/sys/net/core/rmem_default
        echo "${rmem_old#* }" >/proc/sys/net/core/rmem_max
    fi
}
trap finish EXIT

load() { # JSON SECONDS WARMUP SOCKETS FLAGS...: shoal-bench udp against the running tracker
    local json=$1 dur=$2 warmup=$3 sockets=$4
    shift 4
    taskset -c "$CPU_BENCH" "$BENCH" udp --workers "$BENCH_WORKERS" --target "127.0.0.1:$PORT" --torrents "$torrents" \
        --peers "$peers" --pareto-shape "$SHAPE" --rate "$RATE" --duration "${dur}s" \
        --warmup "${warmup}s" --tracker-pid "$pid" --quiet --timeout 5s --json "$json" \
        --sockets-per-worker "$sockets" --source-ips "$sockets" --concurrency 1024 "$@"
}

for size in $SIZES; do
    torrents=${size%%:*}
    peers=${size#*:}
    for round in $(seq "$ROUNDS"); do
        # Alternate: round r starts with tracker r-1 (mod n).
        n=${#trackers[@]}
        for i in $(seq 0 $((n - 1))); do
            t=${trackers[$(((i + round - 1) % n))]}
            tag="$t-$torrents-$round"
            rm -f "$OUT/run/shoal.state" "$OUT/run/shoal.state.changes"
            # shellcheck disable=SC2046
            $(cmd_of "$t") >"$OUT/$tag.log" 2>&1 &
            pid=$!
            sleep 1
            echo "== size $torrents torrents / $peers peers, round $round: $t (PID $pid)"
            load "$OUT/$tag-fill.json" 5 0 "$FILL_SOCKETS" --fill --fill-timeout "$FILL_TIMEOUT" | tee "$OUT/$tag-fill.txt"
            load "$OUT/$tag-open.json" "$DUR" "$WARMUP" "$OPEN_SOCKETS" | tee "$OUT/$tag-open.txt"
            grep -E '^Vm(RSS|HWM)' "/proc/$pid/status" >"$OUT/$tag-rss.txt"
            halt >"$OUT/$tag-sigterm.txt"
            echo "SIGTERM to exit: $(cat "$OUT/$tag-sigterm.txt") s"
            loaded=()
            [ "${t#shoal}" = "$t" ] || loaded=(--loaded 'restored snapshot|cannot be restored|no snapshot')
            # shellcheck disable=SC2046
            python3 bench/lib/restart_probe.py --port "$PORT" --cpu "${CPU_BENCH%%[-,]*}" \
                ${SIGTERM_CPUS:+--sigterm-cpus "$SIGTERM_CPUS"} --log "$OUT/$tag-restart.log" --json "$OUT/$tag-restart.json" "${loaded[@]}" \
                -- $(cmd_of "$t") || echo "(restart probe: no answer)"
        done
    done
done
python3 bench/lib/scale_report.py "$OUT" >"$OUT/report.md"
echo "report: $OUT/report.md"
