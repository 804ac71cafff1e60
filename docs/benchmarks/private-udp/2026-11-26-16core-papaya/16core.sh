#!/bin/bash
# Private mode against open mode on a lent 16-core machine, as run on 2026-11-26 (81444af):
#   bash 16core.sh run1   # UDP's third contender: the previous build's open mode
#   bash 16core.sh run2   # UDP's third contender: the previous build's private mode
# From prebuilt, stripped binaries in $PWD/.dev/bin: shoal (the build measured), shoal-glibc
# (the previous build: 5e1f28a), shoal-bench and taskset. UDP then HTTP, the tracker's 4
# workers on CPUs 0-3, shoal-bench's 8 workers on the rest, 5 rounds of 8 s after 3 s.
# Results: a tarball in $OUT.
set -u
D=$PWD/.dev; export PATH=$D/bin:$PATH; chmod +x $D/bin/*
OUT=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p $OUT $W
{ date -u; uname -a; nproc; lscpu; free -g; cat /sys/kernel/mm/transparent_hugepage/enabled; } > $W/machine.txt 2>&1
shoal-bench passkeys > /tmp/pk.txt
printf '[admin]\ntoken = "shoal-bench"\n' > /tmp/priv.toml
case "${1:-run2}" in
  run1) third="glibc-open=$D/bin/shoal-glibc --udp 127.0.0.1:{port} --workers {workers} --state-file=" ;;
  *) third="private-dashmap=$D/bin/shoal-glibc --udp 127.0.0.1:{port} --workers {workers} --state-file=/tmp/pd.state --private --database sqlite:///tmp/pd.db --admin 127.0.0.1:3101 --config /tmp/priv.toml" ;;
esac
C="--tracker-workers 4 --levels 8 --rounds ${ROUNDS:-5} --bin-dir $D/bin"
L="--duration ${DUR:-8s} --warmup 3s --passkeys /tmp/pk.txt"
for proto in udp http; do
  s=$(date +%s)
  if [ $proto = udp ]; then
    timeout 250 shoal-bench compare $C --tracker shoal --tracker shoal-private --tracker "$third" \
      --out $W/udp udp --target 127.0.0.1:3100 $L > $W/udp.log 2>&1
  else
    timeout 170 shoal-bench compare $C --tracker shoal --tracker shoal-private \
      --out $W/http http --target http://127.0.0.1:3100/announce $L > $W/http.log 2>&1
  fi
  echo "$proto rc=$? $(( $(date +%s) - s ))s"
  grep -A6 "Round by round" $W/$proto/report.md | head -6
done
rm -f $W/*/*.db* $W/*/*.state*
tar czf $OUT/16core.tgz -C $W .
