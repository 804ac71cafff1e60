#!/bin/bash
# The last 16-core run of 2026-11-27: the final build (c5b49d4, the smaller ledger entry) in private
# mode against 60167ac's private mode (shoal-old) and open mode, 3 rounds (what the lease had
# left). Binaries in $PWD/.dev/bin: shoal, shoal-old, shoal-bench, taskset.
set -u
D=$PWD/.dev; export PATH=$D/bin:$PATH; chmod +x $D/bin/*
OUT=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p $OUT $W
shoal-bench passkeys > /tmp/pk.txt
printf '[admin]\ntoken = "shoal-bench"\n' > /tmp/priv.toml
old="private-60167ac=$D/bin/shoal-old --udp 127.0.0.1:{port} --workers {workers} --private --admin 127.0.0.1:3101 --state-file=/tmp/po.state --database sqlite:///tmp/po.db --config /tmp/priv.toml"
s=$(date +%s)
timeout 170 shoal-bench compare --tracker-workers 4 --levels 8 --bin-dir $D/bin --rounds ${ROUNDS:-3} \
  --tracker shoal --tracker shoal-private --tracker "$old" --out $W/udp udp --target 127.0.0.1:3100 \
  --duration 6s --warmup 2s --passkeys /tmp/pk.txt > $W/udp.log 2>&1
echo "udp rc=$? $(( $(date +%s) - s ))s"
grep -A6 "Round by round" $W/udp/report.md | head -6
rm -f $W/*/*.db* $W/*/*.state*
tar czf $OUT/final.tgz -C $W .
