#!/usr/bin/env bash
# Private UDP at 4 tracker workers on a 16-core machine, against open mode and against the
# landed build's private mode: the figure issue 31 keeps (private at least 0.9x of open,
# round by round). Runs from prebuilt, stripped binaries on a machine with no toolchain and
# no registry (the lent 16-core machine):
#
#   DIR/bin: shoal (the build under test), shoal-base (the landed build), shoal-bench, taskset
#   DIR=$PWD/.dev OUT=/tmp/out ROUNDS=7 bench/private-16core.sh
#
# The tracker's 4 workers and its other threads on CPUs 0-3, shoal-bench's 8 workers on the
# rest, 10,000 passkeys, the three contenders alternating, rounds of 6 s after 2 s of
# warm-up. The report goes to OUT/private-16core.tgz (render it with
# `shoal-bench render --png DIR/results.json`), the machine's description to OUT/machine.txt.
set -u
D=${DIR:-$PWD/.dev}
export PATH=$D/bin:$PATH
chmod +x "$D"/bin/*
OUT=${OUT:-/tmp/out}
W=/tmp/private-16core
mkdir -p "$OUT" "$W"
{ date -u; nproc; lscpu | head -20; } > "$OUT/machine.txt" 2>&1
shoal-bench passkeys > "$W/passkeys.txt"
printf '[admin]\ntoken = "shoal-bench"\n' > "$W/private.toml"
base="landed-private=$D/bin/shoal-base --udp 127.0.0.1:{port} --workers {workers} --private \
--admin 127.0.0.1:3101 --state-file=$W/base.state --database sqlite://$W/base.db \
--config $W/private.toml"
start=$(date +%s)
timeout "${LIMIT:-400}" shoal-bench compare --tracker-workers 4 --levels 8 --bin-dir "$D/bin" \
    --rounds "${ROUNDS:-7}" --noisy-retries 0 \
    --tracker shoal --tracker shoal-private --tracker "$base" --out "$W/udp" \
    udp --target 127.0.0.1:3100 --duration "${DUR:-6s}" --warmup "${WARM:-2s}" \
    --passkeys "$W/passkeys.txt" > "$W/udp.log" 2>&1
echo "udp rc=$? $(( $(date +%s) - start ))s"
sed -n "/^## .* against each contender/,/^## Throughput/p" "$W/udp/report.md"
rm -f "$W"/*.db* "$W"/*.state* "$W"/udp/*.db* "$W"/udp/*.state*
tar czf "$OUT/private-16core.tgz" -C "$W" udp udp.log
