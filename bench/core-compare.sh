#!/usr/bin/env bash
# A build against another (the landed one) where it matters most: one `shoal-bench compare`
# run each of open UDP, private UDP and private HTTP, the two builds alternating, ROUNDS
# rounds (7 by default), tracker pinned to one CPU and the load to another (shoal-bench's
# defaults). Private contenders get a fresh SQLite database per comparison and the load's
# 10,000 passkeys and torrents registered through their admin API (shoal-bench does it for
# any contender with --private and --admin).
#
#   BASE=/work/base/target/release/shoal NEW=target/release/shoal \
#     BENCH=target/release/shoal-bench bench/core-compare.sh /tmp/core-compare
#
# Reports go to OUT/open-udp, OUT/private-udp and OUT/private-http; the build under test is
# the first contender, so each report's "against each contender" table gives its ratio to
# the landed build (medians, and round by round: min / median / max).
set -euo pipefail
BASE=${BASE:?BASE: the landed build, its shoal binary}
NEW=${NEW:-target/release/shoal}
BENCH=${BENCH:-target/release/shoal-bench}
OUT=${1:-/tmp/core-compare}
ROUNDS=${ROUNDS:-7}
mkdir -p "$OUT"
"$BENCH" passkeys > "$OUT/passkeys.txt"
printf '[admin]\ntoken = "shoal-bench"\n' > "$OUT/private.toml"

open_mode() { echo "$1=$2 --udp 127.0.0.1:{port} --workers 1 --state-file="; }
private_mode() {
    echo "$1=$2 --$3 127.0.0.1:{port} --workers 1 --private --admin 127.0.0.1:3101 \
--state-file=$OUT/$1.state --database sqlite://$OUT/$1.db --config $OUT/private.toml"
}
fresh() { rm -f "$OUT"/*.db "$OUT"/*.db-wal "$OUT"/*.db-shm "$OUT"/*.state "$OUT"/*.ledger; }

fresh
"$BENCH" compare --rounds "$ROUNDS" --out "$OUT/open-udp" \
    --tracker "$(open_mode core "$NEW")" --tracker "$(open_mode landed "$BASE")" \
    udp --target 127.0.0.1:3100 --quiet
fresh
"$BENCH" compare --rounds "$ROUNDS" --out "$OUT/private-udp" \
    --tracker "$(private_mode core-private "$NEW" udp)" \
    --tracker "$(private_mode landed-private "$BASE" udp)" \
    udp --target 127.0.0.1:3100 --passkeys "$OUT/passkeys.txt" --quiet
fresh
"$BENCH" compare --rounds "$ROUNDS" --out "$OUT/private-http" \
    --tracker "$(private_mode core-private "$NEW" http)" \
    --tracker "$(private_mode landed-private "$BASE" http)" \
    http --target http://127.0.0.1:3100/announce --passkeys "$OUT/passkeys.txt"
fresh
for r in open-udp private-udp private-http; do
    echo "== $r"
    sed -n "/^## .* against each contender/,/^## Throughput/p" "$OUT/$r/report.md"
done
