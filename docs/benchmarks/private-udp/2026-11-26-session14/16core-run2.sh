#!/bin/bash
# Run 2: private mode with papaya member tables against open mode and against the DashMap
# build's private mode (UDP), then HTTP; the tracker's 4 workers on CPUs 0-3.
set -u
D=$PWD/.dev; export PATH=$D/bin:$PATH; chmod +x $D/bin/*
OUT=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p $OUT $W
{ date -u; uname -a; nproc; lscpu; free -g; } > $W/machine.txt 2>&1
shoal-bench passkeys > /tmp/pk.txt
printf '[admin]\ntoken = "shoal-bench"\n' > /tmp/priv.toml
C="--tracker-workers 4 --levels 8 --rounds ${ROUNDS:-5} --bin-dir $D/bin"
L="--duration ${DUR:-8s} --warmup 3s --passkeys /tmp/pk.txt"
s=$(date +%s)
timeout 250 shoal-bench compare $C --tracker shoal --tracker shoal-private \
  --tracker "private-dashmap=$D/bin/shoal-glibc --udp 127.0.0.1:{port} --workers {workers} --state-file=/tmp/pd.state --private --database sqlite:///tmp/pd.db --admin 127.0.0.1:3101 --config /tmp/priv.toml" \
  --out $W/udp udp --target 127.0.0.1:3100 $L > $W/udp.log 2>&1; echo "udp rc=$? $(( $(date +%s) - s ))s"
grep -A6 "Round by round" $W/udp/report.md | head -6
s=$(date +%s)
timeout 170 shoal-bench compare $C --tracker shoal --tracker shoal-private \
  --out $W/http http --target http://127.0.0.1:3100/announce $L > $W/http.log 2>&1; echo "http rc=$? $(( $(date +%s) - s ))s"
grep -A6 "Round by round" $W/http/report.md | head -6
rm -f $W/*/*.db* $W/*/*.state*
tar czf $OUT/run2.tgz -C $W .
