#!/bin/bash
# Private mode against open mode on the lent 16-core machine: UDP then HTTP, the tracker's
# 4 workers on CPUs 0-3, shoal-bench's 8 on the rest; UDP also against the glibc build.
set -u
D=$PWD/.dev; export PATH=$D/bin:$PATH; chmod +x $D/bin/*
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
ulimit -n 65536 || true
{ date -u; uname -a; nproc; lscpu; free -g; cat /sys/kernel/mm/transparent_hugepage/enabled; } > $OUT/machine.txt 2>&1
grep -m1 "Model name" $OUT/machine.txt; cat /sys/kernel/mm/transparent_hugepage/enabled
shoal-bench passkeys > /tmp/pk.txt; wc -l < /tmp/pk.txt
cat > /tmp/priv.toml <<'T'
[admin]
token = "shoal-bench"
T
( sleep 40; for p in $(pgrep -x shoal); do echo "$(tr '\0' ' ' < /proc/$p/cmdline | cut -c1-60) $(grep -i anonhuge /proc/$p/smaps_rollup)"; done ) > $OUT/thp-sample.txt 2>&1 &
C="--tracker-workers 4 --levels 8 --rounds ${ROUNDS:-5} --bin-dir $D/bin"
L="--duration ${DUR:-8s} --warmup 3s --passkeys /tmp/pk.txt"
s=$(date +%s)
timeout 300 shoal-bench compare $C --tracker shoal --tracker shoal-private \
  --tracker "glibc-open=$D/bin/shoal-glibc --udp 127.0.0.1:{port} --workers {workers} --state-file=" \
  --out $OUT/udp udp --target 127.0.0.1:3100 $L > $OUT/udp.log 2>&1; echo "udp rc=$? $(( $(date +%s) - s ))s"
grep -A6 "Round by round" $OUT/udp/report.md | head -6
s=$(date +%s)
timeout 200 shoal-bench compare $C --tracker shoal --tracker shoal-private \
  --out $OUT/http http --target http://127.0.0.1:3100/announce $L > $OUT/http.log 2>&1; echo "http rc=$? $(( $(date +%s) - s ))s"
grep -A6 "Round by round" $OUT/http/report.md | head -6
cat $OUT/thp-sample.txt
