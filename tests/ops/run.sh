#!/usr/bin/env bash
# The operator's kit against the real tools (issue 15), with the release shoal binary:
#   tests/ops/run.sh            (SHOAL_BIN=path overrides target/release/shoal)
#
# 1. `shoal check-config`: the printed defaults pass; five broken files are each named.
# 2. `--log-format json`: every line shoal writes (stdout and stderr) is a JSON object.
# 3. Prometheus (Debian's, on a free loopback port, scraping shoal every second) under a
#    short load with private mode and a one-Redis cluster on: every PromQL expression of deploy/grafana/shoal.json
#    and deploy/prometheus/alerts.yml is valid and returns data; `promtool check rules`.
# 4. The Debian package (cargo-deb): builds; holds the binary, the conffile and the unit;
#    `systemd-analyze verify` accepts the unit; the packaged binary, extracted, starts with
#    the packaged config (paths and ports rewritten) and answers announces.
# 5. The container (deploy/container): built and run with podman where podman can run
#    containers here; otherwise skipped with the reason.
#
# Installs what is missing (prometheus, redis-server, podman, runc, cargo-deb: the last under
# target/ops-tools, so a second run does not build it again). Every server runs on a free
# loopback port with its data in a temporary directory and is stopped by its PID.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
SHOAL_BIN=${SHOAL_BIN:-$TARGET/release/shoal}
[ -x "$SHOAL_BIN" ] || { echo "tests/ops/run.sh: no shoal binary at $SHOAL_BIN" >&2; exit 1; }
TRACKER="python3 $ROOT/tests/ops/tracker.py"
D=$(mktemp -d /tmp/shoal-ops.XXXXXX)
PIDS=()
started=$(date +%s)

step() { echo; echo "--> [ops $(( $(date +%s) - started ))s] $*"; }
fail() { echo "tests/ops/run.sh: FAIL: $*" >&2; exit 1; }
stop() { # stop PIDs we started, politely then not
    for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "$@"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}
cleanup() {
    status=$?
    if [ ${#PIDS[@]} -gt 0 ]; then stop "${PIDS[@]}"; fi
    if [ -n "${CONTAINER:-}" ]; then podman --runtime runc rm -f "$CONTAINER" >/dev/null 2>&1 || true; fi
    if [ $status -ne 0 ]; then echo "tests/ops/run.sh: logs kept in $D" >&2; else rm -rf "$D"; fi
}
trap cleanup EXIT
free_port() { # a loopback port free for TCP and UDP
    python3 - "$1" <<'EOF'
import socket, sys
while True:
    t = socket.socket(); t.bind(("127.0.0.1", 0)); port = t.getsockname()[1]
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.bind(("127.0.0.1", port)); break
    except OSError:
        t.close()
print(port)
EOF
}
wait_for() { # wait_for SECONDS COMMAND...: until the command succeeds
    local deadline=$(( $(date +%s) + $1 )); shift
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "timed out waiting for: $*"
        sleep 0.3
    done
}
admin_up() { curl -sf "http://$1/metrics" >/dev/null; }

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
missing=()
command -v prometheus >/dev/null || missing+=(prometheus)
command -v redis-server >/dev/null || missing+=(redis-server)
command -v curl >/dev/null || missing+=(curl)
command -v systemd-analyze >/dev/null || missing+=(systemd)
command -v podman >/dev/null || missing+=(podman)
command -v runc >/dev/null || missing+=(runc)
if [ ${#missing[@]} -gt 0 ]; then
    step "apt-get install ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- 1. check-config ------------------------------------------------------------------
step "shoal check-config: the defaults pass, five broken files are each named"
"$SHOAL_BIN" --print-config > "$D/defaults.toml"
"$SHOAL_BIN" check-config "$D/defaults.toml" || fail "the printed defaults do not pass"
mkdir "$D/unreadable.list"
broken() { # broken NAME EXPECTED-START-OF-A-LINE < config
    cat > "$D/$1.toml"
    if "$SHOAL_BIN" check-config "$D/$1.toml" > "$D/$1.out" 2>&1; then
        fail "check-config passed $1.toml"
    fi
    grep -qF -- "$2" "$D/$1.out" || { cat "$D/$1.out"; fail "$1.toml: no line naming '$2'"; }
    echo "  $1: $(grep -F -- "$2" "$D/$1.out" | head -1 | cut -c1-110)"
}
printf '[udp]\nlisten = []\nbatch_sise = 64\n' | broken unknown-key "udp.batch_sise: unknown field"
printf '[announce]\ninterval = "30 minutes"\n' | broken wrong-type "announce.interval: invalid type"
printf '[https]\nlisten = ["127.0.0.1:8443"]\ncert = "%s/none.pem"\nkey = "%s/none.key"\n' "$D" "$D" \
    | broken missing-certificate "https.cert: cannot read $D/none.pem"
printf '[access_list]\nmode = "deny"\npath = "%s/unreadable.list"\n' "$D" \
    | broken unreadable-list "access_list.path: "
printf '[admin]\nlisten = ["127.0.0.1:99999"]\n' | broken bad-address "admin.listen[0]: invalid socket address"

# --- 2. JSON logs ---------------------------------------------------------------------
step "--log-format json: every line is a JSON object"
UDP=$(free_port x); HTTP=$(free_port x); ADMIN=$(free_port x)
"$SHOAL_BIN" --log-format json --log-level debug --udp "127.0.0.1:$UDP" --http "127.0.0.1:$HTTP" \
    --admin "127.0.0.1:$ADMIN" --state-file "$D/json.state" > "$D/json.stdout" 2> "$D/json.stderr" &
pid=$!; PIDS+=("$pid")
wait_for 10 admin_up "127.0.0.1:$ADMIN"
$TRACKER announce --udp "127.0.0.1:$UDP" --http "127.0.0.1:$HTTP"
kill -HUP "$pid"; sleep 0.3
stop "$pid"
$TRACKER json-logs --at-least 4 "$D/json.stdout" "$D/json.stderr"

# --- 3. Prometheus --------------------------------------------------------------------
step "promtool check rules deploy/prometheus/alerts.yml"
promtool check rules deploy/prometheus/alerts.yml

step "Prometheus scrapes shoal (private mode, SQLite accounts, a one-Redis cluster) under a short load"
UDP=$(free_port x); HTTP=$(free_port x); ADMIN=$(free_port x); PROM=$(free_port x); REDIS=$(free_port x)
HTTP2=$(free_port x); ADMIN2=$(free_port x)
TOKEN=ops-$RANDOM$RANDOM
mkdir -p "$D/prom" "$D/redis"
start_redis() {
    redis-server --port "$REDIS" --bind 127.0.0.1 --save '' --appendonly no --dir "$D/redis" \
        --protected-mode no >> "$D/redis/redis.log" 2>&1 &
    REDIS_PID=$!; PIDS+=("$REDIS_PID")
    wait_for 10 redis-cli -p "$REDIS" ping
}
start_redis
cat > "$D/prom/shoal.toml" <<EOF
workers = 2
[udp]
listen = ["127.0.0.1:$UDP"]
[http]
listen = ["127.0.0.1:$HTTP"]
max_connections = 8
[ws]
max_connections = 3
[state]
file = "$D/prom/shoal.state"
[admin]
listen = ["127.0.0.1:$ADMIN"]
token = "$TOKEN"
sample_interval = 1
[private]
enabled = true
database = "sqlite://$D/prom/shoal.db"
flush_interval = 1
max_pending_accounts = 1
[cluster]
enabled = true
redis = ["redis://127.0.0.1:$REDIS"]
exchange_interval_ms = 200
EOF
"$SHOAL_BIN" check-config "$D/prom/shoal.toml"
"$SHOAL_BIN" --config "$D/prom/shoal.toml" > "$D/prom/shoal.log" 2>&1 &
SHOAL_PID=$!; PIDS+=("$SHOAL_PID")
# A second, open node of the same cluster (WebTorrent offers cross between the two).
"$SHOAL_BIN" --udp "127.0.0.1:$HTTP2" --http "127.0.0.1:$HTTP2" --admin "127.0.0.1:$ADMIN2" \
    --state-file= --cluster "redis://127.0.0.1:$REDIS" > "$D/prom/node2.log" 2>&1 &
NODE2_PID=$!; PIDS+=("$NODE2_PID")
cat > "$D/prom/prometheus.yml" <<EOF
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: ["$ROOT/deploy/prometheus/alerts.yml"]
scrape_configs:
  - job_name: shoal
    static_configs: [{targets: ["127.0.0.1:$ADMIN", "127.0.0.1:$ADMIN2"]}]
EOF
prometheus --config.file="$D/prom/prometheus.yml" --storage.tsdb.path="$D/prom/data" \
    --web.listen-address="127.0.0.1:$PROM" > "$D/prom/prometheus.log" 2>&1 &
PROM_PID=$!; PIDS+=("$PROM_PID")
wait_for 15 admin_up "127.0.0.1:$ADMIN"
wait_for 15 admin_up "127.0.0.1:$ADMIN2"
wait_for 30 curl -sf "http://127.0.0.1:$PROM/-/ready"
$TRACKER setup --admin "http://127.0.0.1:$ADMIN" --token "$TOKEN"
timeout 90 $TRACKER load --udp "127.0.0.1:$UDP" --http "127.0.0.1:$HTTP" \
    --admin "http://127.0.0.1:$ADMIN" --db "$D/prom/shoal.db" \
    --ws-limit 3 --http-limit 8 --other-node "127.0.0.1:$HTTP2"
# Redis away while peers announce, until the exchange fails (it may wait some seconds for
# Redis before it gives up on a round); then back.
stop "$REDIS_PID"
for _ in 1 2 3 4; do
    $TRACKER announce --udp "127.0.0.1:$UDP" --passkey opskey0000 >/dev/null; sleep 0.5
done
wait_for 20 grep -q "Redis exchange failing" "$D/prom/shoal.log"
start_redis; sleep 1
sleep 2 # the last scrape and a rule evaluation after the load
step "every expression of the dashboard and the alert rules, through Prometheus's API"
$TRACKER promql --prometheus "http://127.0.0.1:$PROM" --dashboard deploy/grafana/shoal.json \
    --firing ShoalPrivateAccountingWritesFailing --firing ShoalPrivateAnnouncesDeferred
stop "$SHOAL_PID"
sleep 3 # two failed scrapes
curl -sf "http://127.0.0.1:$PROM/api/v1/query" --data-urlencode 'query=up{job="shoal"} == 0' \
    | grep -q '"result":\[{' || fail "ShoalDown's expression does not fire once shoal is stopped"
echo "ShoalDown's expression fires once shoal is stopped"
stop "$PROM_PID" "$REDIS_PID" "$NODE2_PID"

# --- 4. Debian package ----------------------------------------------------------------
step "the Debian package (cargo-deb)"
CARGO_DEB=cargo-deb
if ! command -v cargo-deb >/dev/null; then
    CARGO_DEB=$TARGET/ops-tools/bin/cargo-deb
    if [ ! -x "$CARGO_DEB" ]; then
        step "cargo install cargo-deb --locked (once, into $TARGET/ops-tools)"
        cargo install cargo-deb --locked --root "$TARGET/ops-tools"
    fi
fi
mkdir -p "$D/deb"
# `cargo deb --no-build` packages the workspace's release binary, whatever SHOAL_BIN says.
[ -x "$TARGET/release/shoal" ] || fail "cargo deb packages $TARGET/release/shoal: not built"
"$CARGO_DEB" -p shoal-server --no-build --strip --output "$D/deb/" > "$D/deb/cargo-deb.log" 2>&1 \
    || { cat "$D/deb/cargo-deb.log"; fail "cargo deb"; }
DEB=$(ls "$D"/deb/*.deb)
echo "built $(basename "$DEB") ($(du -h "$DEB" | cut -f1))"
dpkg-deb -c "$DEB" > "$D/deb/contents"
dpkg-deb -I "$DEB" > "$D/deb/info"
for path in ./usr/bin/shoal ./etc/shoal/shoal.toml ./usr/lib/systemd/system/shoal@.service \
        ./usr/share/shoal/grafana/shoal.json ./usr/share/shoal/prometheus/alerts.yml; do
    grep -q " $path\$" "$D/deb/contents" || { cat "$D/deb/contents"; fail "no $path in the package"; }
done
dpkg-deb -e "$DEB" "$D/deb/control"
grep -qx /etc/shoal/shoal.toml "$D/deb/control/conffiles" || fail "/etc/shoal/shoal.toml is not a conffile"
grep -q "daemon-reload" "$D/deb/control/postinst" || fail "no postinst reloading systemd"
grep -q '^ Package: shoal$' "$D/deb/info" || fail "dpkg-deb -I: not the shoal package"
echo "dpkg-deb: binary, conffile /etc/shoal/shoal.toml, unit shoal@.service, dashboard, alerts;" \
    "maintainer scripts: $(cd "$D/deb/control" && ls | grep -v -e control -e md5sums | tr '\n' ' ')"
dpkg-deb -x "$DEB" "$D/deb/root"
# systemd-analyze verify, in a root holding the package's files: the binary the unit names
# must exist, and /bin/kill (ExecReload) and the targets the unit refers to come from here.
mkdir -p "$D/deb/root/bin"
cp /bin/kill "$D/deb/root/bin/"
cp -a /lib/systemd/system/*.target "$D/deb/root/usr/lib/systemd/system/"
systemd-analyze verify --root="$D/deb/root" "$D/deb/root/usr/lib/systemd/system/shoal@.service" \
    || fail "systemd-analyze verify refuses the unit"
echo "systemd-analyze verify accepts shoal@.service"
step "the packaged binary with the packaged config (paths and ports rewritten)"
UDP=$(free_port x); HTTP=$(free_port x); ADMIN=$(free_port x)
mkdir -p "$D/deb/root/var/lib/shoal"
python3 - "$D/deb/root" "$UDP" "$HTTP" "$ADMIN" <<'EOF'
import re, sys
root, udp, http, admin = sys.argv[1:]
text = open(f"{root}/etc/shoal/shoal.toml").read()
ports = {"udp": udp, "http": http, "admin": admin}
out, section = [], ""
for line in text.splitlines():
    m = re.match(r"^\[(\w+)\]$", line)
    if m:
        section = m.group(1)
    if line.startswith("listen = ") and section in ports:
        line = f'listen = ["127.0.0.1:{ports[section]}"]'
    out.append(line.replace("/var/lib/shoal/", f"{root}/var/lib/shoal/"))
open(f"{root}/etc/shoal/test.toml", "w").write("\n".join(out) + "\n")
EOF
diff "$D/deb/root/etc/shoal/shoal.toml" "$D/deb/root/etc/shoal/test.toml" | grep '^>' || true
"$D/deb/root/usr/bin/shoal" check-config "$D/deb/root/etc/shoal/test.toml"
"$D/deb/root/usr/bin/shoal" --config "$D/deb/root/etc/shoal/test.toml" > "$D/deb/shoal.log" 2>&1 &
pid=$!; PIDS+=("$pid")
wait_for 10 admin_up "127.0.0.1:$ADMIN"
$TRACKER announce --udp "127.0.0.1:$UDP" --http "127.0.0.1:$HTTP"
stop "$pid"
[ -s "$D/deb/root/var/lib/shoal/shoal.state" ] || fail "the packaged config's state file was not written"

# --- 5. Container ---------------------------------------------------------------------
step "the container image (deploy/container/Containerfile)"
if ! podman info >/dev/null 2>&1; then
    echo "SKIPPED: podman cannot run here ($(podman info 2>&1 | tail -1))"
else
    deploy/container/rootfs.sh "$SHOAL_BIN" "$D/container"
    IMAGE=localhost/shoal-ops-test:$$
    podman --runtime runc build -q -f deploy/container/Containerfile -t "$IMAGE" "$D/container" >/dev/null
    UDP=$(free_port x); HTTP=$(free_port x); ADMIN=$(free_port x)
    # Host networking (no network namespace to set up) and rlimits at or below ours: what
    # this machine lets a container have.
    CONTAINER=shoal-ops-$$
    podman --runtime runc run -d --name "$CONTAINER" --network host \
        --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 "$IMAGE" \
        --config /etc/shoal/shoal.toml --udp "127.0.0.1:$UDP" --http "127.0.0.1:$HTTP" \
        --admin "127.0.0.1:$ADMIN" >/dev/null
    wait_for 15 admin_up "127.0.0.1:$ADMIN"
    $TRACKER announce --udp "127.0.0.1:$UDP" --http "127.0.0.1:$HTTP"
    podman --runtime runc stop -t 10 "$CONTAINER" >/dev/null
    podman --runtime runc logs "$CONTAINER" 2>&1 | grep -q "final snapshot written" \
        || { podman --runtime runc logs "$CONTAINER"; fail "the container did not stop cleanly"; }
    echo "the container served, stopped on SIGTERM and wrote its final snapshot"
    podman --runtime runc rm -f "$CONTAINER" >/dev/null; CONTAINER=""
    podman rmi -f "$IMAGE" >/dev/null
fi

step "ops tests passed in $(( $(date +%s) - started ))s"
