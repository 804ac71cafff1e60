#!/bin/bash
# tt.sh ROUNDS: private SQLite flushing every 5 s vs never; per-thread CPU per response
for r in $(seq $1); do
for mode in flush noflush; do
  rm -f /tmp/s18/tt.state*
  if [ $mode = flush ]; then db=priv.db; cfg=/tmp/priv.toml; else db=nf2.db; cfg=/tmp/noflush.toml; fi
  taskset -c 0 /tmp/s18/shoal-main --udp 127.0.0.1:3100 --workers 1 --state-file=/tmp/s18/tt.state --private --admin 127.0.0.1:3101 --database sqlite:///tmp/s18/$db --config $cfg > /tmp/s18/tt.log 2>&1 & pid=$!
  sleep 2
  for t in /proc/$pid/task/*; do echo "$(cat $t/comm) $(awk '{print $14+$15}' $t/stat)"; done > /tmp/s18/t0.txt
  n=$(taskset -c 1 /work/main/target/release/shoal-bench udp --target 127.0.0.1:3100 --passkeys /tmp/passkeys.txt --duration 20 --warmup 0s --tracker-pid $pid --quiet 2>&1 | grep "^responses" | grep -o "[0-9,]* (" | tr -d ', (')
  for t in /proc/$pid/task/*; do echo "$(cat $t/comm) $(awk '{print $14+$15}' $t/stat)"; done > /tmp/s18/t1.txt
  kill $pid; wait $pid 2>/dev/null
  python3 - $mode $n <<'PY'
import sys
mode,n=sys.argv[1],int(sys.argv[2])
a={};b={}
for f,d in (("/tmp/s18/t0.txt",a),("/tmp/s18/t1.txt",b)):
    for i,l in enumerate(open(f)):
        c,t=l.rsplit(' ',1); d[(i,c)]=int(t)
udp=sum(b[k]-a.get(k,0) for k in b if k[1].startswith('udp'))
other=sum(b[k]-a.get(k,0) for k in b if not k[1].startswith('udp'))
print(f"{mode:8} responses {n:>9} udp-0 {udp*1e4/n:.3f} us/resp  others {other*1e4/n:.3f} us/resp  total {(udp+other)*1e4/n:.3f}")
PY
done; done
