#!/usr/bin/env bash
# WebTorrent under aquatic_ws_load_test at 1, 2 and 4 tracker workers on a 16-core machine:
# shoal against aquatic_ws, both at their defaults, over wss (issue 33: answers and offers
# relayed per tracker CPU-second at every tier, the answers shoal drops, the failure reasons
# it sends). Runs from prebuilt, stripped binaries on a machine with no toolchain and no
# registry (the lent 16-core machine):
#
#   DIR/bin: shoal, shoal-bench, aquatic_ws, aquatic_ws_load_test (0.9.0), taskset
#   DIR/cert.pem, DIR/key.pem: a self-signed certificate (the machine may lack openssl):
#     openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem -days 30 -subj /CN=localhost
#   DIR=$PWD/.dev OUT=/tmp/out ROUNDS=5 bench/ws-16core.sh
#
# At each tier the tracker and its threads get that many CPUs and aquatic_ws_load_test's
# LOAD_WORKERS (default 4) workers the others, the two contenders alternating, ROUNDS rounds
# (default 5) of DUR after WARM of warm-up (aquatic's load tester reports every 5 s: both
# multiples of 5 s; WARM=0s measures its first report, which includes its 64 connections'
# TLS handshakes, the same for both). shoal runs with an admin listener, so that the report
# lists its /metrics counters round by round (answers relayed and dropped, failure reasons).
# The report goes to OUT/ws-16core.tgz (render it with `shoal-bench render --png
# DIR/results.json`), the machine's description to OUT/machine.txt.
set -u
D=${DIR:-$PWD/.dev}
export PATH=$D/bin:$PATH
chmod +x "$D"/bin/*
ulimit -n 65536 || true
# glommio (aquatic_ws and its load tester) locks memory for io_uring.
ulimit -l unlimited 2>/dev/null || ulimit -l 1048576 2>/dev/null || true
OUT=${OUT:-/tmp/out}
W=/tmp/ws-16core
mkdir -p "$OUT" "$W/ws"
{ date -u; nproc; lscpu | head -20; } > "$OUT/machine.txt" 2>&1
# shoal-bench makes the certificate with openssl unless the output directory has one.
cp "$D/cert.pem" "$D/key.pem" "$W/ws/"
shoal="shoal=$D/bin/shoal --https 127.0.0.1:{port} --workers {workers} --state-file= \
--tls-cert {cert} --tls-key {key} --admin 127.0.0.1:3811"
# TWO_CPU_ROUNDS=7 first runs the 2-core comparison (one tracker worker, one load worker)
# confined to CPUs 0 and 1 with taskset, TWO_DUR (10s) after TWO_WARM (5s), to
# OUT/ws-2cpu.tgz: the 2-core figures on a machine quieter than a shared 2-core VM.
if [ "${TWO_CPU_ROUNDS:-0}" -gt 0 ]; then
  start=$(date +%s)
  mkdir -p "$W/ws-2cpu"; cp "$D/cert.pem" "$D/key.pem" "$W/ws-2cpu/"
  timeout "${TWO_LIMIT:-300}" taskset -c 0,1 shoal-bench compare --generator aquatic \
      --bin-dir "$D/bin" --rounds "$TWO_CPU_ROUNDS" --noisy-retries 0 \
      --tracker "$shoal" --tracker aquatic_ws --out "$W/ws-2cpu" --port 3700 \
      ws --target wss://127.0.0.1:3700 --duration "${TWO_DUR:-10s}" --warmup "${TWO_WARM:-5s}" \
      --torrents 10000 > "$W/ws-2cpu.log" 2>&1
  echo "ws-2cpu rc=$? $(( $(date +%s) - start ))s"
  grep -E "^- median" "$W/ws-2cpu/report.md"
  rm -f "$W"/ws-2cpu/key.pem
  tar czf "$OUT/ws-2cpu.tgz" -C "$W" ws-2cpu ws-2cpu.log
fi
# While the comparison runs, every tracker thread's CPU time and context switches, once a
# second, to OUT/threads.log.gz (`bench/threads.py OUT/threads.log.gz` sums them per round):
# how often the workers sleep and are woken a second, to set beside the report's messages a
# second; a 2-core machine, whose tracker is never left idle, cannot show it.
sample_threads() {
  while [ -e "$W/sampling" ]; do
    now=$EPOCHREALTIME
    for pid in $(pgrep -f "^$D/bin/(shoal|aquatic_ws) "); do
      for t in /proc/"$pid"/task/*; do
        { read -r stat < "$t/stat" && read -r name < "$t/comm"; } 2>/dev/null || continue
        read -r -a st <<< "${stat##*) }"  # the fields after the name, from the state on
        sw=
        while read -r key value; do
          case $key in voluntary_ctxt_switches:|nonvoluntary_ctxt_switches:) sw="$sw $value" ;; esac
        done < "$t/status" 2>/dev/null
        # time pid tid name utime stime cpu voluntary nonvoluntary (ticks, switches)
        echo "$now $pid ${t##*/} $name ${st[11]} ${st[12]} ${st[36]}$sw"
      done
    done
    sleep 1
  done >> "$OUT/threads.log"
}
: > "$OUT/threads.log"; touch "$W/sampling"
sample_threads &
sampler=$!
start=$(date +%s)
timeout "${LIMIT:-330}" shoal-bench compare --generator aquatic --tracker-workers "${TIERS:-1,2,4}" \
    --levels "${LOAD_WORKERS:-4}" --bin-dir "$D/bin" --rounds "${ROUNDS:-5}" --noisy-retries 0 \
    --tracker "$shoal" --tracker aquatic_ws --out "$W/ws" --port 3800 \
    ws --target wss://127.0.0.1:3800 --duration "${DUR:-5s}" --warmup "${WARM:-0s}" \
    --torrents 10000 > "$W/ws.log" 2>&1
echo "ws rc=$? $(( $(date +%s) - start ))s"
rm -f "$W/sampling"; wait "$sampler"
command -v python3 > /dev/null && python3 bench/threads.py "$OUT/threads.log"
gzip -f "$OUT/threads.log"
grep -E "^- median|^\| (shoal|aquatic_ws) \|" "$W/ws/report.md" | head -80
rm -f "$W"/ws/key.pem
tar czf "$OUT/ws-16core.tgz" -C "$W" ws ws.log
