#!/bin/bash
# register.sh: a private tracker's database for prof.sh, with the users and torrents of
# `shoal-bench udp --passkeys passkeys.txt` registered through the admin API (as the
# shoal-private preset of `shoal-bench compare` does). Paths as run (/tmp/s19).
set -e
B=/work/main/target/release
cd /tmp/s19
$B/shoal-bench passkeys > passkeys.txt
$B/shoal-bench info-hashes --torrents 10000 > hashes.txt
printf '[admin]\ntoken = "shoal-bench"\n' > priv.toml
rm -f priv.db*
$B/shoal --udp 127.0.0.1:3100 --workers 1 --private --admin 127.0.0.1:3101 \
  --database sqlite:///tmp/s19/priv.db --state-file=/tmp/s19/reg.state --config priv.toml > reg.log 2>&1 &
pid=$!
sleep 2
awk '{print NR" "$1}' passkeys.txt |
  xargs -P 8 -n 2 sh -c 'curl -s -o /dev/null -w "%{http_code}\n" -X PUT -H "Authorization: Bearer shoal-bench" -H "Content-Type: application/json" -d "{\"passkey\":\"$1\"}" http://127.0.0.1:3101/api/users/$0' | sort | uniq -c
xargs -P 8 -n 1 sh -c 'curl -s -o /dev/null -w "%{http_code}\n" -X PUT -H "Authorization: Bearer shoal-bench" -H "Content-Type: application/json" -d "{}" http://127.0.0.1:3101/api/torrents/$0' < hashes.txt | sort | uniq -c
kill $pid; wait $pid || true
