#!/usr/bin/env bash
# bench/opentracker-scale.sh on a lent 16-core machine (issue 43, item 4): shoal,
# opentracker and aquatic_udp with 8 workers on CPUs 0-7, shoal-bench with 8 workers on
# CPUs 8-15. Runs from prebuilt, stripped binaries (the machine has no toolchain, no
# registry, no libowfat):
#
#   DIR/bin: shoal, shoal-bench, aquatic_udp (0.9.0), opentracker-110868e and
#            opentracker-716dcfb (built here by bench/opentracker-scale.sh, in
#            target/opentracker-scale/)
#   DIR=$PWD/.dev OUT=/tmp/out bench/opentracker-scale-16core.sh
#
# The device gives 15 minutes in all, so the defaults are one round at 1 million torrents
# and 3 million peers (about a minute a tracker); SIZES and ROUNDS as in
# bench/opentracker-scale.sh for more (10 million torrents and 30 million peers is about
# 2 minutes a tracker at 500,000 answers a second). RATE (default 200,000 a second) is the
# open loop's. The results go to OUT/opentracker-scale-16core.tgz, the machine's
# description to OUT/machine.txt; LIMIT (default 600 s) bounds the whole run.
set -u
D=${DIR:-$PWD/.dev}
OUT=${OUT:-/tmp/out}
W=/tmp/opentracker-scale-16core
mkdir -p "$OUT" "$W"
chmod +x "$D"/bin/*
ulimit -n 65536 || true
{ date -u; nproc; lscpu | head -20; free -m; } >"$OUT/machine.txt" 2>&1
cd "$(dirname "$0")/.."
ots=""
for b in "$D"/bin/opentracker-*; do [ -x "$b" ] && ots+=" ${b##*/}=$b"; done
start=$(date +%s)
timeout -k 10 "${LIMIT:-600}" env SHOAL="$D/bin/shoal" BENCH="$D/bin/shoal-bench" \
    AQUATIC="$D/bin/aquatic_udp" OT_BINS="${ots# }" \
    SIZES="${SIZES:-1000000:3000000}" ROUNDS="${ROUNDS:-1}" RATE="${RATE:-200000}" \
    CPU_TRACKER=0-7 WORKERS=8 CPU_BENCH=8-15 BENCH_WORKERS=8 \
    bash bench/opentracker-scale.sh "$W/results" >"$W/run.log" 2>&1
echo "opentracker-scale-16core rc=$? $(($(date +%s) - start))s"
[ -f "$W/results/report.md" ] || python3 bench/lib/scale_report.py "$W/results" >"$W/results/report.md"
rm -rf "$W/results/run"
tar czf "$OUT/opentracker-scale-16core.tgz" -C "$W" results run.log
