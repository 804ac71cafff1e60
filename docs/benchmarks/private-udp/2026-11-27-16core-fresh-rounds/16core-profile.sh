#!/bin/bash
# The first 16-core run of 2026-11-27: a comparison (open, private, private without the ledger's
# record, private that never flushes) and flat profiles of the tracker in open and private
# mode. Carried in $PWD/.dev: bin/shoal (built with the uncommitted SHOAL_EXP_NOLEDGER
# switch, see README.md), bin/shoal-bench, bin/taskset, and perf/lib: this VM's perf binary
# (as perf-bin) with the shared libraries `ldd` lists for it. Its comparison ran before the
# fix that starts private contenders without the previous round's state (60167ac): only
# its profiles are used.
set -u
D=$PWD/.dev; export PATH=$D/bin:$PATH; chmod +x $D/bin/* $D/perf/lib/perf-bin
PERF="env LD_LIBRARY_PATH=$D/perf/lib $D/perf/lib/perf-bin"
OUT=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p $OUT $W
{ date -u; nproc; cat /proc/sys/kernel/perf_event_paranoid; id; } > $W/machine.txt 2>&1
shoal-bench passkeys > /tmp/pk.txt
printf '[admin]\ntoken = "shoal-bench"\n' > /tmp/priv.toml
printf '[admin]\ntoken = "shoal-bench"\n[private]\nflush_interval = 100000\n' > /tmp/noflush.toml
P="--udp 127.0.0.1:{port} --workers {workers} --private --admin 127.0.0.1:3101"
C="--tracker-workers ${TW:-4} --levels 8 --rounds ${ROUNDS:-4} --bin-dir $D/bin"
L="--duration ${DUR:-8s} --warmup 3s --passkeys /tmp/pk.txt"
s=$(date +%s)
timeout 300 shoal-bench compare $C --tracker shoal --tracker shoal-private \
  --tracker "noledger=env SHOAL_EXP_NOLEDGER=1 $D/bin/shoal $P --state-file=/tmp/nl.state --database sqlite:///tmp/nl.db --config /tmp/priv.toml" \
  --tracker "noflush=$D/bin/shoal $P --state-file=/tmp/nf.state --database sqlite:///tmp/nf.db --config /tmp/noflush.toml" \
  --out $W/udp udp --target 127.0.0.1:3100 $L > $W/udp.log 2>&1
echo "udp rc=$? $(( $(date +%s) - s ))s"
grep -A8 "Round by round" $W/udp/report.md | head -8
# Flat profiles of the tracker, open then private.
# The private run reuses the database compare's noflush contender filled (users, torrents).
for f in /tmp/nf.db*; do cp $f ${f/nf.db/pp.db}; done; ls -la /tmp/*.db* >> $W/machine.txt
for mode in open private; do
  extra=""; [ $mode = private ] && extra="--private --database sqlite:///tmp/pp.db --state-file=/tmp/pp.state --admin 127.0.0.1:3101 --config /tmp/priv.toml"
  [ $mode = open ] && extra="--state-file="
  taskset -c 0-3 shoal --udp 127.0.0.1:3300 --workers 4 $extra > $W/$mode-tracker.log 2>&1 &
  pid=$!; sleep 2
  taskset -c 4-15 shoal-bench udp --target 127.0.0.1:3300 --workers 8 --duration 14s --warmup 2s --quiet --passkeys /tmp/pk.txt --json $W/$mode-load.json > $W/$mode-load.log 2>&1 &
  bpid=$!; sleep 5
  timeout 20 $PERF record -F 1999 -p $pid -o $W/$mode.data -- sleep 8 > $W/$mode-perf.log 2>&1
  wait $bpid; kill $pid; wait $pid
  timeout 60 $PERF report -i $W/$mode.data --stdio --no-children --sort sym 2>/dev/null | grep -v '^#' | grep -v '^$' | head -70 > $W/$mode-report.txt
  timeout 60 $PERF report -i $W/$mode.data --stdio --no-children --sort comm 2>/dev/null | grep -v '^#' | grep -v '^$' | head -12 >> $W/$mode-report.txt
  rm -f $W/$mode.data
  echo "$mode: $(head -5 $W/$mode-report.txt)"
done
echo "total $(( $(date +%s) - s ))s"
rm -f $W/*/*.db* $W/*/*.state*
tar czf $OUT/exp.tgz -C $W .
