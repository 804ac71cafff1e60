#!/usr/bin/env bash
# Which failure responses shoal sends under aquatic_http_load_test over TLS, and why: every
# line the load tester prints for a failure response, tallied by reason, beside shoal's own
# count of the HTTP announces it answered with a failure (`/metrics`) and of all announces.
#
#   bench/https-failures.sh                      # on the 2-core VM: one tier, 1 worker
#   TIERS=1,2,4 LEVELS=4 bench/https-failures.sh # on a bigger machine (bench/tiers.sh https)
#
# For each tier of W tracker workers: shoal --https with W workers pinned to CPUs 0..W-1,
# aquatic_http_load_test (its defaults: 128 connections, 10,000 torrents, keep-alive, TLS;
# LEVELS workers, default 1) pinned to the next LEVELS CPUs, for DUR seconds (default 20).
# Binaries from $BIN_DIR (default /work/tools/bin) and $SHOAL (default target/release/shoal);
# a self-signed certificate from openssl, or $CERT_DIR/{cert,key}.pem where openssl is
# missing. Output to $OUT (default target/bench/https-failures): per tier the load tester's
# output, shoal's metrics and log, and summary.txt.
set -u
BIN_DIR=${BIN_DIR:-/work/tools/bin}
SHOAL=${SHOAL:-target/release/shoal}
TIERS=${TIERS:-1}; LEVELS=${LEVELS:-1}; DUR=${DUR:-20}
OUT=${OUT:-target/bench/https-failures}; mkdir -p "$OUT"
PORT=${PORT:-3650}; ADMIN=$((PORT + 1))
if [ -n "${CERT_DIR:-}" ]; then
    cp "$CERT_DIR/cert.pem" "$CERT_DIR/key.pem" "$OUT/"
elif [ ! -f "$OUT/cert.pem" ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$OUT/key.pem" -out "$OUT/cert.pem" \
        -days 30 -subj /CN=localhost >/dev/null 2>&1 || { echo "openssl failed" >&2; exit 2; }
fi

# GET /metrics from the admin listener, with bash alone (no curl on a bare machine).
metrics() {
    exec 3<>/dev/tcp/127.0.0.1/$ADMIN || return 1
    printf 'GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n' >&3
    cat <&3
    exec 3<&-
}

# The sum of the samples of shoal_requests_total for HTTP announces whose labels match $1.
announces() {
    grep '^shoal_requests_total{' | grep 'protocol="http"' | grep 'action="announce"' \
        | grep -- "$1" | awk '{s += $NF} END {printf "%d", s}'
}

summary=$OUT/summary.txt; : > "$summary"
for w in ${TIERS//,/ }; do
    log=$OUT/load-${w}w.log
    taskset -c 0-$((w - 1)) "$SHOAL" --https 127.0.0.1:$PORT --workers "$w" --state-file= \
        --tls-cert "$OUT/cert.pem" --tls-key "$OUT/key.pem" --admin 127.0.0.1:$ADMIN \
        > "$OUT/shoal-${w}w.log" 2>&1 &
    pid=$!
    for _ in $(seq 50); do metrics > /dev/null 2>&1 && break; sleep 0.1; done
    cat > "$OUT/load-${w}w.toml" <<EOF
server_address = "127.0.0.1:$PORT"
num_workers = $LEVELS
duration = $DUR
keep_alive = true
enable_tls = true
EOF
    taskset -c $w-$((w + LEVELS - 1)) timeout $((DUR + 30)) \
        "$BIN_DIR/aquatic_http_load_test" -c "$OUT/load-${w}w.toml" > "$log" 2>&1
    sleep 1
    metrics > "$OUT/metrics-${w}w.txt" 2>/dev/null
    kill "$pid"; wait "$pid" 2>/dev/null
    all=$(announces '' < "$OUT/metrics-${w}w.txt")
    failed=$(announces 'result="error"' < "$OUT/metrics-${w}w.txt")
    printed=$(grep -c 'failure response\|error response' "$log")
    {
        echo "== $w tracker workers, $LEVELS load workers, $DUR s"
        echo "shoal: $all HTTP announces answered, $failed with a failure reason" \
             "(one in 65,536 of the announces: $(awk -v a="$all" 'BEGIN {printf "%.1f", a / 65536}'))"
        echo "load tester: $printed failure or error responses printed:"
        grep 'failure response\|error response' "$log" | sed 's/^/    /' | sort | uniq -c
        grep -A1 '^Average responses' "$log" | head -1
    } | tee -a "$summary"
done
