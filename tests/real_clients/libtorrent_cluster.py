#!/usr/bin/python3
"""Real-client test of several nodes, one swarm (issue 12, point 1): a real Redis Cluster of
three masters (redis_cluster.py) and three shoal nodes A, B and C, each started with
`--cluster <the three seeds>` and its own node id (config file: exchange every 200 ms, short
announce interval). Two swarms, one after the other, on the same nodes:

  udp   the seeder's only tracker is udp://A/announce, the leecher's udp://B/announce;
  http  the same with http://A/announce and http://B/announce.

In each, a libtorrent seeder announces to A only; once A answered, a leecher announces to B
only. B learns of A's seeder through Redis after its next exchange, so the leecher is told
to re-announce (force_reannounce, ignoring the min interval) every half second until B's
reply lists a peer. DHT, LSD, UPnP, NAT-PMP and PEX are off. Checks per swarm: each client's
only tracker is its node; A answers the seeder; B's reply lists >= 1 peer (within 10 s); the
download completes and its bytes equal the seed's; the leecher's peers came from the tracker;
and within 3 s of the completion a scrape on node C (over the swarm's own protocol, UDP or
HTTP, and over HTTP) shows complete=2 (the seeder and the finished leecher), downloaded=1,
incomplete=0, although no client ever talked to C. Before the swarms: every node answers, and
each node's /metrics says it sees the 3 nodes (shoal_cluster_nodes_seen).

Prints "N passed, N failed" last; exits non-zero on any failure. If Redis cannot be
installed or started the test fails with the reason, unless SHOAL_SKIP_REAL_SERVERS=1 (as for
the Rust cluster test), which skips it.

Run with /usr/bin/python3 (Debian's python3-libtorrent imports only there):

  tests/real_clients/libtorrent_cluster.py              # shoal from SHOAL_BIN or target/release/shoal
  SHOAL_BIN=/path/shoal tests/real_clients/libtorrent_cluster.py --only udp --verbose

The Redis servers and the nodes are stopped by their PIDs at the end; all traffic stays on
127.0.0.1; the temporary directory is removed.
"""
import argparse
import os
import random
import signal
import socket
import struct
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from lt_swarm import REPO, Pump, Results, Tracker, add, download, free_port, log, lt, make_torrent, \
    session, write_payload  # noqa: E402
from redis_cluster import RedisCluster, ServerError  # noqa: E402

TCP_AND_UDP = (socket.SOCK_STREAM, socket.SOCK_DGRAM)
NODES = ("a", "b", "c")
SCRAPE_WITHIN = 3.0  # seconds from the leecher's completion to C's scrape showing it


class Node:
    """One shoal node: UDP and HTTP on one port, admin on another, its config file."""

    def __init__(self, name, port, admin):
        self.name, self.port, self.admin = name, port, admin
        self.tracker = None

    def url(self, proto):
        return f"{proto}://127.0.0.1:{self.port}/announce"

    def config(self, exchange_ms):
        return (f'workers = 1\nlog_level = "info"\n'
                f'[udp]\nlisten = ["127.0.0.1:{self.port}"]\n'
                f'[http]\nlisten = ["127.0.0.1:{self.port}"]\n'
                f'[admin]\nlisten = ["127.0.0.1:{self.admin}"]\n'
                f'[state]\nfile = ""\n'
                f'[announce]\ninterval = 10\nmin_interval = 2\n'
                f'[cluster]\nnode_id = "{self.name}"\nexchange_interval_ms = {exchange_ms}\n')


def distinct_ports(n, kinds):
    """`n` different free ports (free_port returns the lowest free one from its start)."""
    ports, first = [], 22000
    while len(ports) < n:
        p = free_port(kinds=kinds, first=first)
        ports.append(p)
        first = p + 1 - os.getpid() % 5000
    return ports


def answers(node, timeout_s):
    """Whether the node answers a UDP and an HTTP scrape within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and node.tracker.proc.poll() is None:
        try:
            udp_scrape(node, bytes(20))
            http_scrape(node, bytes(20))
            return True
        except (OSError, ValueError, struct.error):
            time.sleep(0.1)
    return False


def metric(node, name):
    """The value of an unlabelled metric on the node's /metrics, or None."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{node.admin}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == name:
            return float(parts[1])
    return None


# -- scrapes on node C, over HTTP (BEP 48) and UDP (BEP 15) ------------------------------

def bdecode(data, i=0):
    """A minimal bencode decoder (enough for a scrape reply): (value, next index)."""
    c = data[i:i + 1]
    if c == b"i":
        end = data.index(b"e", i)
        return int(data[i + 1:end]), end + 1
    if c == b"l":
        out, i = [], i + 1
        while data[i:i + 1] != b"e":
            v, i = bdecode(data, i)
            out.append(v)
        return out, i + 1
    if c == b"d":
        out, i = {}, i + 1
        while data[i:i + 1] != b"e":
            k, i = bdecode(data, i)
            out[k], i = bdecode(data, i)
        return out, i + 1
    colon = data.index(b":", i)
    n = int(data[i:colon])
    return data[colon + 1:colon + 1 + n], colon + 1 + n


def http_scrape(node, info_hash):
    """(complete, downloaded, incomplete) of one torrent from the node's HTTP /scrape."""
    q = "".join(f"%{b:02x}" for b in info_hash)
    with urllib.request.urlopen(f"http://127.0.0.1:{node.port}/scrape?info_hash={q}", timeout=2) as r:
        body, _ = bdecode(r.read())
    f = body.get(b"files", {}).get(info_hash)
    if f is None:
        return (0, 0, 0)
    return (f[b"complete"], f[b"downloaded"], f[b"incomplete"])


def udp_scrape(node, info_hash):
    """(complete, downloaded, incomplete) of one torrent from the node's UDP scrape."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(1)
        tid = random.getrandbits(32)
        s.sendto(struct.pack(">QII", 0x41727101980, 0, tid), ("127.0.0.1", node.port))
        action, got_tid, cid = struct.unpack(">IIQ", s.recv(64)[:16])
        if (action, got_tid) != (0, tid):
            raise OSError(f"bad connect reply (action {action})")
        s.sendto(struct.pack(">QII", cid, 2, tid) + info_hash, ("127.0.0.1", node.port))
        reply = s.recv(64)
        action, got_tid = struct.unpack(">II", reply[:8])
        if (action, got_tid) != (2, tid) or len(reply) < 20:
            raise OSError(f"bad scrape reply (action {action}, {len(reply)} bytes)")
        seeders, completed, leechers = struct.unpack(">III", reply[8:20])
        return (seeders, completed, leechers)


# -- one swarm ----------------------------------------------------------------------------

def swarm(res, proto, nodes, tmp, args):
    """A seeder on A only and a leecher on B only, over `proto`; scrapes on C."""
    a, b, c = nodes
    t_end = time.monotonic() + args.timeout
    label = proto
    seed_url, leech_url = a.url(proto), b.url(proto)
    base = os.path.join(tmp, label)
    seed_dir, leech_dir = os.path.join(base, "seed"), os.path.join(base, "leech")
    os.makedirs(leech_dir)
    path, payload = write_payload(seed_dir, args.size_mib << 20)
    ti = make_torrent(path)
    info_hash = bytes.fromhex(str(ti.info_hashes().v1))
    log(f"{label}: torrent {ti.info_hashes().v1}, seeder on {seed_url}, leecher on {leech_url}")
    names = {
        "seed_tracker": f"{label}: seeder's only tracker is node A ({seed_url})",
        "seed_reply": f"{label}: node A answers the seeder",
        "leech_tracker": f"{label}: leecher's only tracker is node B ({leech_url})",
        "leech_reply": f"{label}: node B's reply lists the seeder (>= 1 peer) within 10 s",
        "bytes": f"{label}: leecher downloads the file and its bytes equal the seed's",
        "source": f"{label}: leecher's peers came from the tracker",
        "scrape": f"{label}: a {proto.upper()} scrape on node C shows complete=2 downloaded=1 incomplete=0 "
                  f"within {SCRAPE_WITHIN:.0f} s of the completion",
    }
    if proto != "http":
        names["scrape_http"] = (f"{label}: an HTTP scrape on node C shows complete=2 downloaded=1 incomplete=0 "
                                f"within {SCRAPE_WITHIN:.0f} s of the completion")
    res.expected += list(names.values())

    seeder_ses, leecher_ses = session(), session()
    pump = Pump({"seeder": seeder_ses, "leecher": leecher_ses}, args.verbose)
    seed = add(seeder_ses, ti, seed_dir, seed=True, url=seed_url)
    trackers = [t["url"] for t in seed.trackers()]
    res.check(names["seed_tracker"], trackers == [seed_url], f"{trackers}")
    got = pump.run(lambda: pump.find("seeder", "tracker_reply_alert"), min(t_end, time.monotonic() + 20))
    if not res.check(names["seed_reply"], got is not None):
        return

    leech = add(leecher_ses, ti, leech_dir, seed=False, url=leech_url)
    trackers = [t["url"] for t in leech.trackers()]
    res.check(names["leech_tracker"], trackers == [leech_url], f"{trackers}")
    # B hears of A's seeder at its first exchange after the leecher's announce: re-announce
    # (past the min interval) until B's reply lists it.
    began = time.monotonic()
    replies = []
    next_push = began + 0.5
    while time.monotonic() < min(t_end, began + 10):
        found = pump.run(lambda: pump.find("leecher", "tracker_reply_alert", lambda f: f["num_peers"] >= 1),
                         min(t_end, next_push))
        if found is not None:
            break
        replies = [f["num_peers"] for n, k, f in pump.events if n == "leecher" and k == "tracker_reply_alert"]
        leech.force_reannounce(0, -1, lt.reannounce_flags_t.ignore_min_interval)
        next_push = time.monotonic() + 0.5
    found = pump.find("leecher", "tracker_reply_alert", lambda f: f["num_peers"] >= 1)
    res.check(names["leech_reply"], found is not None,
              f"after {time.monotonic() - began:.2f} s; replies before it listed {replies} peer(s)"
              if found else f"replies listed {replies} peer(s)")
    if found is None:
        return

    completed_at = download(res, names, pump, leech, leech_dir, payload, t_end, True)
    if completed_at is None:
        return

    # Node C never saw a client of this torrent: its figures come from Redis only. A scrape
    # marks the torrent of interest, so C's next exchange reads it; poll until the deadline.
    scrapes = [("scrape", udp_scrape if proto == "udp" else http_scrape)]
    if proto != "http":
        scrapes.append(("scrape_http", http_scrape))
    deadline = completed_at + SCRAPE_WITHIN
    for key, scrape in scrapes:
        seen = None
        while True:
            try:
                seen = scrape(c, info_hash)
            except (OSError, ValueError, struct.error) as e:
                seen = f"error: {e}"
            if seen == (2, 1, 0) or time.monotonic() >= deadline:
                break
            # libtorrent pumps alerts meanwhile (its completed announce to B)
            pump.run(lambda: None, time.monotonic() + 0.1)
        res.check(names[key], seen == (2, 1, 0),
                  f"after {time.monotonic() - completed_at:.2f} s: (complete, downloaded, incomplete) = {seen}")

    for ses, h in ((leecher_ses, leech), (seeder_ses, seed)):
        ses.remove_torrent(h)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--timeout", type=float, default=60, help="time limit per swarm, seconds (default 60)")
    ap.add_argument("--size-mib", type=int, default=4, help="size of each random file (default 4 MiB)")
    ap.add_argument("--exchange-ms", type=int, default=200, help="the nodes' exchange interval (default 200)")
    ap.add_argument("--only", choices=["udp", "http"], action="append", help="run only these swarms (repeatable)")
    ap.add_argument("--verbose", action="store_true", help="log every libtorrent alert")
    args = ap.parse_args()
    # on SIGTERM (e.g. from `timeout`), unwind so the processes we started are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    res = Results()
    tmp = tempfile.TemporaryDirectory(prefix="shoal-lt-cluster-")
    redis = None
    nodes = []
    try:
        try:
            redis = RedisCluster.start()
        except (ServerError, OSError) as e:
            if os.environ.get("SHOAL_SKIP_REAL_SERVERS") == "1":
                print(f"SKIPPED (SHOAL_SKIP_REAL_SERVERS=1): a Redis Cluster could not be started: {e}")
                return 0
            res.check("a Redis Cluster of three masters starts", False, str(e))
            return res.summary()
        res.check("a Redis Cluster of three masters starts", True, redis.seeds())
        run(res, redis, nodes, tmp.name, args)
    finally:
        res.not_reached()
        for n in nodes:
            if n.tracker is not None:
                n.tracker.stop(res)
        if redis is not None:
            redis.close()
        tmp.cleanup()
    return res.summary()


def run(res, redis, nodes, tmp, args):
    shoal = os.environ.get("SHOAL_BIN", os.path.join(REPO, "target/release/shoal"))
    ports = distinct_ports(2 * len(NODES), TCP_AND_UDP)
    for i, name in enumerate(NODES):
        node = Node(name, ports[2 * i], ports[2 * i + 1])
        cfg = os.path.join(tmp, f"{name}.toml")
        with open(cfg, "w") as f:
            f.write(node.config(args.exchange_ms))
        node.tracker = Tracker.start(res, [shoal, "--config", cfg, "--cluster", redis.seeds()], tmp,
                                     log_name=f"node-{name}.log")
        if node.tracker is None:
            return
        nodes.append(node)
    if not res.check("nodes A, B and C answer a UDP and an HTTP scrape", all(answers(n, 10) for n in nodes)):
        return
    deadline = time.monotonic() + 10
    seen = {}
    while time.monotonic() < deadline:
        seen = {n.name: metric(n, "shoal_cluster_nodes_seen") for n in nodes}
        if all(v == len(NODES) for v in seen.values()):
            break
        time.sleep(0.2)
    res.check("every node's /metrics sees the 3 nodes (shoal_cluster_nodes_seen)",
              all(v == len(NODES) for v in seen.values()), f"{seen}")
    for proto in args.only or ["udp", "http"]:
        swarm(res, proto, nodes, tmp, args)


if __name__ == "__main__":
    sys.exit(main())
