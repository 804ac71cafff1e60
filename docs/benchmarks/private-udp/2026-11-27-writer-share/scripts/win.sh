#!/bin/bash
# win.sh CONFIG DB SECONDS: the UDP worker's CPU per datagram in 0.25-s windows, beside the writer threads' CPU
rm -f /tmp/s18/win.state*
taskset -c 0 /tmp/s18/shoal-main --udp 127.0.0.1:3100 --workers 1 --state-file=/tmp/s18/win.state --private --admin 127.0.0.1:3101 --database sqlite:///tmp/s18/$2 --config $1 > /tmp/s18/win.log 2>&1 & pid=$!
sleep 2
taskset -c 1 /work/main/target/release/shoal-bench udp --target 127.0.0.1:3100 --passkeys /tmp/passkeys.txt --duration $3 --warmup 0s --quiet > /tmp/s18/win.bench 2>&1 & b=$!
udp=$(grep -l "^udp-0" /proc/$pid/task/*/comm | head -1 | xargs dirname)
end=$(( $(date +%s) + $3 ))
while [ $(date +%s) -lt $end ]; do
  out=$(awk '/^Udp:/ && $2 ~ /^[0-9]/ {print $5}' /proc/net/snmp)
  w=$(awk '{print $14+$15}' $udp/stat)
  o=0; for t in /proc/$pid/task/*; do case $(cat $t/comm) in udp-*) ;; *) o=$((o + $(awk '{print $14+$15}' $t/stat))) ;; esac; done
  echo "$(date +%s.%N) $out $w $o"
  sleep 0.25
done > /tmp/s18/win.txt
wait $b; kill $pid; wait $pid 2>/dev/null
python3 - <<'PY'
rows=[list(map(float,l.split())) for l in open('/tmp/s18/win.txt')]
busy=[];quiet=[]
for a,b in zip(rows,rows[1:]):
    d=b[1]-a[1]; w=b[2]-a[2]; o=b[3]-a[3]
    if d<=0: continue
    (busy if o>0 else quiet).append((w,d,o))
for name,l in (("writer active",busy),("writer idle",quiet)):
    W=sum(x[0] for x in l); D=sum(x[1] for x in l); O=sum(x[2] for x in l)
    print(f"{name:14} windows {len(l):4}  worker {W*1e4/(D/2):.3f} us/response  others {O*1e4/(D/2):.3f} us/response")
PY
