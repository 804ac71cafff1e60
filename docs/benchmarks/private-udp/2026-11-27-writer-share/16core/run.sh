#!/bin/bash
# Issue 11, item 5, where it is judged: private mode against open mode on a lent 16-core
# machine, in one command that fits the lease (about 9 minutes of the 10 a command may run).
#
# On the build machine, from the commit to measure:
#   cargo build --release -p shoal-server -p shoal-bench
#   mkdir -p .dev/bin && cp target/release/shoal target/release/shoal-bench .dev/bin/
#   strip .dev/bin/shoal .dev/bin/shoal-bench && cp "$(command -v taskset)" .dev/bin/
# then run this script on the device with `.dev` carried, and $OUT set by the device tool.
#
# The tracker's 4 workers and all its other threads on CPUs 0-3, shoal-bench's 8 workers on
# the rest (as the 16-core runs of 2026-11-26 and 2026-11-27 had it), 10,000 passkeys (`shoal-bench passkeys`),
# contenders alternating. UDP: shoal, shoal-private (SQLite, flush every 5 s) and
# `noflush` (the same private mode with flush_interval = 100000: no database write during a
# round, so the writer's share shows), ROUNDS (7) rounds of DUR (6 s) after 2 s; HTTP: shoal
# and shoal-private, 5 rounds. Results: one tarball in $OUT, rewritten after each protocol.
set -u
D=$PWD/.dev; export PATH=$D/bin:$PATH; chmod +x $D/bin/*
OUT=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p $OUT $W
{ date -u; uname -a; nproc; lscpu; free -g; } > $W/machine.txt 2>&1
shoal-bench passkeys > /tmp/pk.txt
printf '[admin]\ntoken = "shoal-bench"\n' > /tmp/priv.toml
printf '[admin]\ntoken = "shoal-bench"\n[private]\nflush_interval = 100000\n' > /tmp/noflush.toml
# Like the shoal-private preset (state and ledger files removed before every round; the
# database, with the users and torrents registered in round 1, kept), without the writes.
cat > $D/bin/noflush.sh <<'SH'
#!/bin/sh
rm -f /tmp/nf.state /tmp/nf.state.ledger
exec shoal "$@"
SH
chmod +x $D/bin/noflush.sh
# --private and --admin on the command line: that is how shoal-bench knows to register the
# passkeys and torrents through the admin API.
NF="--admin 127.0.0.1:3101 --state-file=/tmp/nf.state --database sqlite:///tmp/nf.db --config /tmp/noflush.toml"
C="--tracker-workers 4 --levels 8 --bin-dir $D/bin"
L="--duration ${DUR:-6s} --warmup 2s --passkeys /tmp/pk.txt"
for proto in udp http; do
  s=$(date +%s)
  if [ $proto = udp ]; then
    timeout 330 shoal-bench compare $C --rounds ${ROUNDS:-7} --tracker shoal --tracker shoal-private \
      --tracker "noflush=$D/bin/noflush.sh --udp 127.0.0.1:{port} --workers {workers} --private $NF" \
      --out $W/udp udp --target 127.0.0.1:3100 $L > $W/udp.log 2>&1
  else
    timeout 170 shoal-bench compare $C --rounds 5 --tracker shoal --tracker shoal-private \
      --out $W/http http --target http://127.0.0.1:3100/announce $L > $W/http.log 2>&1
  fi
  echo "$proto rc=$? $(( $(date +%s) - s ))s"
  grep -A6 "Round by round" $W/$proto/report.md | head -6
  rm -f $W/*/*.db* $W/*/*.state*
  tar czf $OUT/16core.tgz -C $W .
done
