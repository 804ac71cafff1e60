#!/bin/bash
# Private mode against open mode on a lent 16-core machine, as run on 2026-11-27, with
# shoal-bench's fix that starts a private contender's every round without the previous
# round's state and ledger files (60167ac).
# From prebuilt, stripped binaries in $PWD/.dev/bin: shoal (the build measured), shoal-exp
# (the same build with one uncommitted switch: SHOAL_EXP_NOLEDGER set skips the ledger
# record, so private mode without accounting), shoal-bench and taskset. The tracker's 4
# workers on CPUs 0-3, shoal-bench's 8 workers on the rest. UDP: 7 rounds of 6 s after 2 s;
# HTTP: 5 rounds. Results: a tarball in $OUT, rewritten after each protocol.
set -u
D=$PWD/.dev; export PATH=$D/bin:$PATH; chmod +x $D/bin/*
OUT=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p $OUT $W
{ date -u; uname -a; nproc; lscpu; free -g; } > $W/machine.txt 2>&1
shoal-bench passkeys > /tmp/pk.txt
printf '[admin]\ntoken = "shoal-bench"\n' > /tmp/priv.toml
noledger="noledger=env SHOAL_EXP_NOLEDGER=1 $D/bin/shoal-exp --udp 127.0.0.1:{port} --workers {workers} --private --admin 127.0.0.1:3101 --state-file=/tmp/nl.state --database sqlite:///tmp/nl.db --config /tmp/priv.toml"
C="--tracker-workers 4 --levels 8 --bin-dir $D/bin"
L="--duration ${DUR:-6s} --warmup 2s --passkeys /tmp/pk.txt"
for proto in udp http; do
  s=$(date +%s)
  if [ $proto = udp ]; then
    timeout 280 shoal-bench compare $C --rounds 7 --tracker shoal --tracker shoal-private \
      --tracker "$noledger" --out $W/udp udp --target 127.0.0.1:3100 $L > $W/udp.log 2>&1
  else
    timeout 150 shoal-bench compare $C --rounds 5 --tracker shoal --tracker shoal-private \
      --out $W/http http --target http://127.0.0.1:3100/announce $L > $W/http.log 2>&1
  fi
  echo "$proto rc=$? $(( $(date +%s) - s ))s"
  grep -A6 "Round by round" $W/$proto/report.md | head -6
  rm -f $W/*/*.db* $W/*/*.state*
  tar czf $OUT/16core.tgz -C $W .
done
