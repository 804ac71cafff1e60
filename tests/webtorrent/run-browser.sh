#!/usr/bin/env bash
# Runs browser.test.mjs (two headless Chromium pages exchanging a file through the tracker),
# or the test file named as the argument (browser-cluster.test.mjs), in a private network
# namespace, because WebRTC gathers no ICE candidates on loopback only:
#   lo up, a veth pair wt0/wt1, 10.77.0.1/24 and 10.77.0.2/24 on wt0, default route via wt0.
# The tracker (SHOAL_WS_CMD, see tracker.mjs) and the page server listen on 127.0.0.1 inside.
#
# `unshare --net --pid --fork --kill-child`: the namespace holds only what this script starts;
# when the run ends (or is killed), every process in it is killed with it and the network
# namespace (veth pair included) disappears. The EXIT trap also deletes the veth explicitly;
# the run's temporary directory is removed outside, once the namespace is gone.
# Bounded: the whole run is killed after ${WEBTORRENT_BROWSER_TIMEOUT:-90} s (150 s for a test
# file other than browser.test.mjs).
# Needs root (or CAP_SYS_ADMIN + CAP_NET_ADMIN) for the namespaces.
set -euo pipefail
cd "$(dirname "$0")"

if [ "${1:-}" != "--inside" ]; then
    default=150
    if [ "${1:-browser.test.mjs}" = browser.test.mjs ]; then default=90; fi
    limit=${WEBTORRENT_BROWSER_TIMEOUT:-$default}
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo --preserve-env=SHOAL_WS_CMD,SHOAL_BIN,CARGO_TARGET_DIR,CHROMIUM,PATH,WEBTORRENT_CLUSTER_TRANSFER_MS,WEBTORRENT_CLUSTER_WS_INTERVAL,WEBTORRENT_CLUSTER_LOG_LEVEL,WEBTORRENT_CLUSTER_TRACE,SHOAL_WS_CLUSTER_MASTERS"; fi
    # Temporary files (browser profiles, Redis directories) go to a directory of this run,
    # removed here: a run killed at its limit cannot clean up after itself inside.
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/shoal-wt-run-XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    timeout -k 5 "$limit" $sudo env TMPDIR="$tmp" unshare --net --pid --fork --kill-child --mount-proc \
        "$0" --inside "${1:-browser.test.mjs}"
    exit
fi

# Inside the namespaces (PID 1 of the new PID namespace).
cleanup() {
    ip link del wt0 2>/dev/null || true
}
trap cleanup EXIT
ip link set lo up
ip link add wt0 type veth peer name wt1
ip addr add 10.77.0.1/24 dev wt0
ip addr add 10.77.0.2/24 dev wt0
ip link set wt1 up
ip link set wt0 up
ip route add default dev wt0
node --test "$2"
