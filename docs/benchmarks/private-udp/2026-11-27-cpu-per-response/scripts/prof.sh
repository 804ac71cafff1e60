#!/bin/bash
# prof.sh NAME [shoal args]
name=$1; shift
B=/work/main/target/release
rm -f /tmp/s19/$name.state*
taskset -c 0 $B/shoal --udp 127.0.0.1:3100 --workers 1 --state-file=/tmp/s19/$name.state "$@" > /tmp/s19/$name.log 2>&1 &
pid=$!
sleep 3
taskset -c 1 $B/shoal-bench udp --target 127.0.0.1:3100 --passkeys /tmp/s19/passkeys.txt --duration 20 --warmup 5 --tracker-pid $pid --json /tmp/s19/$name.json --quiet > /tmp/s19/$name.bench 2>&1 &
bpid=$!
sleep 8
perf record -F 999 -g -p $pid -o /tmp/s19/perf-$name.data -- sleep 15 > /dev/null 2>&1
wait $bpid
kill $pid; wait $pid
grep -i "per tracker\|responses" /tmp/s19/$name.bench | head -5
