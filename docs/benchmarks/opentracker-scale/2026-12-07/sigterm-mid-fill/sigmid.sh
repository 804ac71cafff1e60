#!/usr/bin/env bash
# SIGTERM in the middle of a 10M/30M fill, after T seconds: BIN T OUT
BIN=$1 T=$2 OUT=$3
rm -rf $OUT; mkdir -p $OUT/run
printf 'log_level = "info,shoal_state=debug"\n' > $OUT/shoal.toml
taskset -c 0 $BIN --udp 127.0.0.1:23720 --http 127.0.0.1:23721 --workers 1 --state-file=$OUT/run/shoal.state --config $OUT/shoal.toml > $OUT/shoal.log 2>&1 &
pid=$!
sleep 1
timeout $((T + 30)) taskset -c 1 /tmp/ab-bins/shoal-bench-new udp --workers 1 --target 127.0.0.1:23720 --torrents 10000000 --peers 30000000 --pareto-shape 0.2 --rate 20000 --duration 5s --warmup 0s --quiet --timeout 5s --sockets-per-worker 509 --source-ips 509 --concurrency 1024 --fill --fill-timeout 20m > $OUT/fill.txt 2>&1 &
bpid=$!
sleep $T
t0=$(date +%s.%N); kill -TERM $pid; wait $pid; t1=$(date +%s.%N)
kill $bpid 2>/dev/null; wait $bpid 2>/dev/null
echo "$BIN after $T s: SIGTERM to exit $(echo "$t1 - $t0" | bc) s" | tee $OUT/sigterm.txt
grep -h "written" $OUT/shoal.log | sed -E 's/^2026-12-07T([0-9:.]{8}).*(snapshot|section) written.* in ([0-9.]+m?s)[^:]*: ([0-9]+) torrents.*/\1 \2 \3 \4/' | tee -a $OUT/sigterm.txt
