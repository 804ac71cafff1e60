#!/usr/bin/env bash
# The reports that need a bigger machine than the 2-core VM, from prebuilt binaries only (a
# lent machine reaches no registry and has no toolchain):
#
#   bench/tiers.sh tiers flood aquatic
#
#   tiers    shoal-bench compare at TIERS tracker workers (default 1,2,4,8; LEVELS load
#            workers, default 8; ROUNDS, default 3): shoal, aquatic_udp, opentracker
#   aquatic  the same under aquatic_udp_load_test's defaults: shoal, aquatic_udp (AQ_ROUNDS)
#   gen      shoal-bench and aquatic_udp_load_test, each on one CPU, against one shoal of
#            6 workers on 6 others: requests per generator CPU-second (GEN_LOAD: shoal-bench's
#            workload flags, default `--torrents 10000`; GEN_LOAD=aquatic gives it
#            aquatic_udp_load_test's default workload and request mix)
#   flood    the flood example (issue 13), unpinned: on a machine with cores to spare the
#            scheduler keeps tracker, flood and normal client apart
#   https    aquatic_http_load_test over TLS against shoal at HTTPS_TIERS tracker workers
#            (default 1,2,4; HTTPS_LEVELS load workers, default 4; HTTPS_DUR s, default 15):
#            every failure response, tallied by reason, beside shoal's count
#            (bench/https-failures.sh; needs aquatic_http_load_test, and openssl or
#            $DIR/cert/{cert,key}.pem)
#
# $DIR/bin holds shoal, shoal-bench, flood (`cargo build --release -p shoal-server
# --example flood`), aquatic_udp, aquatic_udp_load_test (0.9.0), opentracker and taskset;
# $DIR/lib the shared libraries they need that the machine may lack (Debian's opentracker
# needs libowfat.so.0). Results go to $OUT (default /tmp/out): a tarball per report (render
# it with `shoal-bench render --png DIR/results.json`), the logs and the machine's lscpu.
set -u
D=${DIR:-$PWD/.dev}
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/lib
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
chmod +x $D/bin/*
ulimit -n 65536 || true
{ date -u; uname -a; head -3 /etc/os-release; nproc; lscpu; cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list;
  for c in 0 1 2 3 4 5 6 7 8; do echo "cpu$c siblings $(cat /sys/devices/system/cpu/cpu$c/topology/thread_siblings_list)"; done; free -g; } > $OUT/machine.txt 2>&1
head -30 $OUT/machine.txt
command -v taskset; opentracker -h 2>&1 | head -2
B=$D/bin/shoal-bench
wl=/tmp/ot; mkdir -p $wl
$B info-hashes --torrents 10000 > $wl/whitelist
# aquatic_udp_load_test 0.9.0's default workload in shoal-bench's flags (its torrent
# popularity is its own; shoal-bench's is Pareto).
AQUATIC_LOAD="--torrents 1000000 --peers 2000000 --numwant 30 --scrape-hashes 10 --seeder-probability 0.75 --weight-connect 50 --weight-announce 50 --weight-scrape 1"
TIERS=${TIERS:-1,2,4,8}; LEVELS=${LEVELS:-8}; ROUNDS=${ROUNDS:-3}
for step in "$@"; do
  start=$(date +%s)
  case $step in
    tiers)
      timeout ${TIERS_TIMEOUT:-340} $B compare --bin-dir $D/bin --out /tmp/tiers-udp --port 3100 \
        --rounds $ROUNDS --levels $LEVELS --tracker-workers $TIERS --noisy-retries 0 \
        --tracker shoal --tracker aquatic_udp \
        --tracker "opentracker=opentracker -i 127.0.0.1 -P {port} -d $wl -w whitelist" \
        udp --target 127.0.0.1:3100 --duration ${DUR:-5s} --warmup ${WARM:-2s} --torrents 10000 \
        > $OUT/tiers.log 2>&1
      echo "tiers rc=$?"; tail -5 $OUT/tiers.log
      tar czf $OUT/tiers-udp.tgz -C /tmp tiers-udp ;;
    aquatic)
      timeout ${AQ_TIMEOUT:-240} $B compare --bin-dir $D/bin --generator aquatic --out /tmp/tiers-aquatic --port 3400 \
        --rounds ${AQ_ROUNDS:-2} --levels $LEVELS --tracker-workers $TIERS --noisy-retries 0 \
        --tracker shoal --tracker aquatic_udp \
        udp --target 127.0.0.1:3400 --duration 5s --warmup 5s \
        > $OUT/aquatic.log 2>&1
      echo "aquatic rc=$?"; tail -5 $OUT/aquatic.log
      tar czf $OUT/tiers-aquatic.tgz -C /tmp tiers-aquatic ;;
    gen)
      case ${GEN_LOAD:-} in
        aquatic) gen_load=$AQUATIC_LOAD ;;
        "") gen_load="--torrents 10000" ;;
        *) gen_load=$GEN_LOAD ;;
      esac
      # The load generators against one shoal that is faster than either (GEN_TRACKER_CPUS
      # workers), each generator on the one CPU GEN_CPU: requests per generator CPU-second.
      timeout ${GEN_TIMEOUT:-150} $B compare --bin-dir $D/bin --out /tmp/generators --port 3500 \
        --rounds ${GEN_ROUNDS:-3} --levels 1 --tracker-workers ${GEN_WORKERS:-6} \
        --tracker-cpus ${GEN_TRACKER_CPUS:-0-5} --bench-cpus ${GEN_CPU:-8} --noisy-retries 0 \
        --vs-aquatic-load-test --tracker shoal \
        udp --target 127.0.0.1:3500 --duration 5s --warmup 5s $gen_load \
        > $OUT/gen.log 2>&1
      echo "gen rc=$?"; tail -3 $OUT/gen.log; grep -A5 "## Load generators" /tmp/generators/report.md
      tar czf $OUT/generators.tgz -C /tmp generators ;;
    https)
      cert=; [ -f $D/cert/cert.pem ] && ! command -v openssl >/dev/null && cert=$D/cert
      CERT_DIR=$cert BIN_DIR=$D/bin SHOAL=$D/bin/shoal OUT=/tmp/https-failures \
        TIERS=${HTTPS_TIERS:-1,2,4} LEVELS=${HTTPS_LEVELS:-4} DUR=${HTTPS_DUR:-15} \
        timeout ${HTTPS_TIMEOUT:-150} bash bench/https-failures.sh > $OUT/https.log 2>&1
      echo "https rc=$?"; cat /tmp/https-failures/summary.txt
      tar czf $OUT/https-failures.tgz -C /tmp https-failures ;;
    flood)
      timeout ${FLOOD_TIMEOUT:-150} $D/bin/flood --seconds ${FLOOD_SECONDS:-15} --runs ${FLOOD_RUNS:-3} --protocol udp > $OUT/flood.md 2> $OUT/flood.err
      echo "flood rc=$?"; grep -A6 "^## Result\|criteria" $OUT/flood.md | head -30 ;;
  esac
  echo "$step took $(( $(date +%s) - start )) s"
done
