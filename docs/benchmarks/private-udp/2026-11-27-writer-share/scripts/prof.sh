#!/bin/bash
# prof.sh NAME BIN [shoal args]: tracker on CPU 0, load on CPU 1, perf over 15 s of the measured 20 s
name=$1; bin=$2; shift 2
rm -f /tmp/s18/$name.state*
taskset -c 0 $bin --udp 127.0.0.1:3100 --workers 1 --state-file=/tmp/s18/$name.state "$@" > /tmp/s18/$name.log 2>&1 &
pid=$!
sleep 3
taskset -c 1 /work/main/target/release/shoal-bench udp --target 127.0.0.1:3100 --passkeys /tmp/passkeys.txt --duration 20 --warmup 5 --tracker-pid $pid --json /tmp/s18/$name.json --quiet > /tmp/s18/$name.bench 2>&1 &
bpid=$!
sleep 8
perf record -F 999 -g -p $pid -o /tmp/s18/perf-$name.data -- sleep 15 > /dev/null 2>&1
wait $bpid
kill $pid; wait $pid
grep -i "per tracker\|responses" /tmp/s18/$name.bench | head -5
