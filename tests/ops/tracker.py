#!/usr/bin/env python3
"""The clients tests/ops/run.sh needs, standard library only: BitTorrent announces over UDP
(BEP 15, with BEP 41 passkeys), HTTP and WebTorrent; the admin API; a short load that
touches every metric the dashboard draws; the PromQL checks against a real Prometheus; and
the JSON log check.

One file of small clients rather than shoal-bench: the load must reach metrics a benchmark
never does (private-mode refusals, a locked accounting database, WebSocket relays and
refusals), and each step here is a few requests, not a measurement.

Subcommands (each exits non-zero with a message on failure):
  announce   --udp HOST:PORT | --http HOST:PORT   one announce, must be answered
  setup      --admin URL --token T                 private users, torrents (the load's)
  load       --udp .. --http .. --admin .. --token .. --db FILE
  promql     --prometheus URL --dashboard FILE     every expression returns data
  json-logs  FILE...                               every line parses as a JSON object
"""

import argparse
import base64
import json
import os
import random
import re
import socket
import sqlite3
import struct
import sys
import time
import urllib.parse
import urllib.request

USERS = 10
TORRENTS = 12  # 120 (user, torrent) accounts: more than the ledger's 64 shards


def fail(message):
    print(f"tracker.py: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def host_port(text):
    host, port = text.rsplit(":", 1)
    return host, int(port)


def passkey(user):
    return f"opskey{user:04d}"


def info_hash(torrent):
    return bytes([0x5A, torrent]) + bytes(18)


def peer_id(n):
    return b"-OP0001-" + f"{n:012d}".encode()


# --- UDP (BEP 15, BEP 41) ---------------------------------------------------------------

class Udp:
    def __init__(self, addr):
        self.addr = host_port(addr)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.settimeout(2)
        self.connection_id = None

    def request(self, packet, txid):
        for _ in range(3):
            self.sock.sendto(packet, self.addr)
            try:
                while True:
                    reply, _ = self.sock.recvfrom(4096)
                    if struct.unpack(">I", reply[4:8])[0] == txid:
                        return reply
            except socket.timeout:
                continue
        fail(f"no UDP answer from {self.addr}")

    def connect(self):
        txid = random.getrandbits(32)
        reply = self.request(struct.pack(">QII", 0x41727101980, 0, txid), txid)
        self.connection_id = struct.unpack(">Q", reply[8:16])[0]

    def announce(self, torrent, peer, uploaded=0, left=1000, event=0, key=None):
        """Returns (action, payload): action 1 is an answer, 3 an error with its text."""
        if self.connection_id is None:
            self.connect()
        txid = random.getrandbits(32)
        packet = struct.pack(
            ">QII20s20sQQQIIIiH", self.connection_id, 1, txid, info_hash(torrent),
            peer_id(peer), 0, left, uploaded, event, 0, 0, 50, 6881 + peer % 1000)
        if key is not None:
            path = f"/announce/{key}".encode()
            packet += bytes([2, len(path)]) + path
        reply = self.request(packet, txid)
        return struct.unpack(">I", reply[0:4])[0], reply[8:]

    def scrape(self, torrent):
        if self.connection_id is None:
            self.connect()
        txid = random.getrandbits(32)
        packet = struct.pack(">QII", self.connection_id, 2, txid) + info_hash(torrent)
        return struct.unpack(">I", self.request(packet, txid)[0:4])[0]

    def garbage(self):
        # A datagram too short to be a request: counted as malformed, not answered.
        self.sock.sendto(b"\x00\x01", self.addr)


# --- HTTP -------------------------------------------------------------------------------

def http_get(base, path, token=None, method="GET", body=None):
    req = urllib.request.Request(base + path, method=method, data=body)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def http_announce(addr, torrent, peer, key=None, uploaded=0, left=1000, event="started",
                  port=None):
    query = urllib.parse.urlencode({
        "info_hash": info_hash(torrent), "peer_id": peer_id(peer),
        "port": port or 6881 + peer % 1000,
        "uploaded": uploaded, "downloaded": 0, "left": left, "compact": 1, "event": event,
    })
    path = f"/{key}/announce" if key else "/announce"
    return http_get(f"http://{addr}", f"{path}?{query}")


# --- WebSocket (WebTorrent) -------------------------------------------------------------

class WebSocket:
    def __init__(self, addr, path):
        host, port = host_port(addr)
        self.sock = socket.create_connection((host, port), timeout=5)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((
            f"GET {path} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                break
            head += chunk
        self.status = int(head.split(b" ", 2)[1]) if head else 0
        self.buffer = head.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in head else b""

    def send(self, message):
        data = json.dumps(message).encode()
        mask = os.urandom(4)
        header = bytes([0x81])
        if len(data) < 126:
            header += bytes([0x80 | len(data)])
        else:
            header += bytes([0x80 | 126]) + struct.pack(">H", len(data))
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def receive(self):
        """The next text message as JSON (the server's frames are not masked)."""
        while True:
            if len(self.buffer) >= 2:
                length, at = self.buffer[1] & 0x7F, 2
                if length == 126:
                    length, at = struct.unpack(">H", self.buffer[2:4])[0], 4
                elif length == 127:
                    length, at = struct.unpack(">Q", self.buffer[2:10])[0], 10
                if len(self.buffer) >= at + length:
                    opcode, payload = self.buffer[0] & 0x0F, self.buffer[at:at + length]
                    self.buffer = self.buffer[at + length:]
                    if opcode == 1:
                        return json.loads(payload)
                    continue
            chunk = self.sock.recv(65536)
            if not chunk:
                fail("WebSocket closed while waiting for a message")
            self.buffer += chunk

    def close(self):
        mask = os.urandom(4)
        self.sock.sendall(bytes([0x88, 0x80]) + mask)
        self.sock.close()


def ws_announce(ws, torrent, peer, offers=0):
    ws.send({
        "action": "announce", "info_hash": info_hash(torrent).decode("latin-1"),
        "peer_id": peer_id(peer).decode(), "numwant": offers, "uploaded": 0,
        "downloaded": 0, "left": 1000, "event": "started",
        "offers": [{"offer_id": f"offer{peer:05d}{i:010d}",
                    "offer": {"type": "offer", "sdp": "v=0"}} for i in range(offers)],
    })


# --- subcommands ------------------------------------------------------------------------

def cmd_announce(args):
    if args.udp:
        action, payload = Udp(args.udp).announce(1, 1, key=args.passkey)
        if action != 1:
            fail(f"UDP announce refused: {payload!r}")
        print(f"UDP announce answered by {args.udp}: interval {struct.unpack('>I', payload[0:4])[0]}")
    if args.http:
        status, body = http_announce(args.http, 1, 2, key=args.passkey)
        if status != 200 or b"interval" not in body:
            fail(f"HTTP announce: {status} {body[:200]!r}")
        print(f"HTTP announce answered by {args.http}: {body[:60]!r}")


def cmd_setup(args):
    base = args.admin
    for user in range(USERS):
        status, body = http_get(base, f"/api/users/{user + 1}", args.token, "PUT",
                                json.dumps({"passkey": passkey(user)}).encode())
        if status != 200:
            fail(f"PUT /api/users/{user + 1}: {status} {body!r}")
    for torrent in range(TORRENTS):
        status, body = http_get(base, f"/api/torrents/{info_hash(torrent).hex()}", args.token,
                                "PUT", b"{}")
        if status != 200:
            fail(f"PUT /api/torrents: {status} {body!r}")
    status, body = http_get(base, "/api/clients/-OP", args.token, "PUT", b"")
    if status != 200:
        fail(f"PUT /api/clients/-OP: {status} {body!r}")
    print(f"registered {USERS} users, {TORRENTS} torrents, one client prefix")


def announce_round(udp, uploaded):
    """Every (user, torrent) account announces once over UDP."""
    for user in range(USERS):
        for torrent in range(TORRENTS):
            peer = user * 100 + torrent
            action, payload = udp.announce(torrent, peer, uploaded=uploaded,
                                           left=0 if user % 2 else 1000, key=passkey(user))
            if action != 1:
                fail(f"UDP announce of user {user} refused: {payload!r}")


def refusals(udp, http_addr):
    action, payload = udp.announce(0, 9000, key="nosuchkey")
    if action != 3 or b"unknown passkey" not in payload:
        fail(f"unknown passkey not refused over UDP: {action} {payload!r}")
    udp.announce(0, 9001)  # no passkey
    udp.scrape(0)  # UDP scrapes carry no passkey: refused
    status, body = http_announce(http_addr, 0, 9002, key="nosuchkey")
    if b"unknown passkey" not in body:
        fail(f"unknown passkey not refused over HTTP: {status} {body!r}")
    http_announce(http_addr, 200, 9003, key=passkey(0))  # torrent not registered
    udp.garbage()


def websockets(http_addr, ws_limit, other_node=None):
    """Two WebTorrent peers, one offer relayed; a third peer on the other cluster node, whose
    offer goes to one of them through Redis; then one connection past ws.max_connections."""
    a = WebSocket(http_addr, f"/{passkey(0)}/announce")
    b = WebSocket(http_addr, f"/{passkey(1)}/announce")
    if (a.status, b.status) != (101, 101):
        fail(f"WebSocket upgrades answered {a.status}, {b.status}")
    ws_announce(a, 3, 7001)
    a.receive()
    ws_announce(b, 3, 7002, offers=1)
    b.receive()
    relayed = a.receive()
    if "offer" not in relayed:
        fail(f"no offer relayed: {relayed}")
    if other_node:
        # The other node reads every node's WebTorrent peers each exchange round (1 s
        # there): its first announce may come before the round and find none; the second
        # finds the first node's peers, and its offer goes through that node's Redis inbox.
        c = WebSocket(other_node, "/announce")
        for _ in range(2):
            ws_announce(c, 3, 7003, offers=1)
            c.receive()
            time.sleep(2.5)
        c.close()
    extra = [WebSocket(http_addr, f"/{passkey(2)}/announce") for _ in range(ws_limit - 1)]
    if not any(ws.status == 503 for ws in extra):
        fail(f"no WebSocket refused past ws.max_connections: {[ws.status for ws in extra]}")
    time.sleep(1.5)  # two scrapes see the connections open
    for ws in [a, b] + [ws for ws in extra if ws.status == 101]:
        ws.close()


def http_flood(http_addr, limit, admin):
    """Many more idle connections than http.max_connections, until /metrics counts a
    refusal (the accept loops of several workers race for the last places)."""
    host, port = host_port(http_addr)
    for _ in range(5):
        conns = [socket.create_connection((host, port), timeout=5) for _ in range(limit * 4 + 4)]
        time.sleep(1)
        for c in conns:  # read each one's fate (closed at once, or waiting) before closing
            c.settimeout(0.05)
            try:
                c.recv(1)
            except socket.timeout:
                pass
            c.close()
        _, metrics = http_get(admin, "/metrics")
        if b"shoal_http_connections_refused_total" in metrics:
            return
    fail("no HTTP connection refused past http.max_connections")


def cmd_load(args):
    udp = Udp(args.udp)
    start = time.time()
    announce_round(udp, 0)
    for round_ in range(1, 4):
        announce_round(udp, round_ * 1_000_000)
        for user in range(USERS):
            http_announce(args.http, user % TORRENTS, 5000 + user, key=passkey(user),
                          uploaded=round_ * 1000)
            http_get(f"http://{args.http}",
                     f"/{passkey(user)}/scrape?info_hash="
                     + urllib.parse.quote_from_bytes(info_hash(user % TORRENTS)))
        refusals(udp, args.http)
        time.sleep(1)
    websockets(args.http, args.ws_limit, args.other_node)
    http_flood(args.http, args.http_limit, args.admin)
    # The accounting database, locked by another writer for longer than shoal's busy
    # timeout (5 s): flushes fail, sums pile up, announces past the bound are deferred.
    # The bound is on the ledger's map: a client announcing from one address keeps its
    # sums in its swarm slot (no memory of their own, never deferred), so every client also
    # announces over HTTP from a second port, as a client whose port changed does: that
    # client's record goes to the map, where the bound applies.
    db = sqlite3.connect(args.db, timeout=10, isolation_level=None)
    db.execute("BEGIN EXCLUSIVE")
    print("accounting database locked")
    locked_until = time.time() + 8
    round_ = 10
    while time.time() < locked_until:
        announce_round(udp, round_ * 1_000_000)
        for user in range(USERS):
            for torrent in range(TORRENTS):
                peer = user * 100 + torrent
                status, body = http_announce(
                    args.http, torrent, peer, key=passkey(user), event="",
                    uploaded=round_ * 1_000_000 + 1, left=0 if user % 2 else 1000,
                    port=20000 + peer % 1000)
                if status != 200 or b"failure" in body:
                    fail(f"HTTP announce of user {user} from a second port: {status} {body[:200]!r}")
        round_ += 1
        time.sleep(1)
    db.execute("COMMIT")
    db.close()
    print("accounting database released")
    time.sleep(3)  # a flush goes through
    print(f"load done in {time.time() - start:.1f} s")


def query(prometheus, expr):
    status, body = http_get(prometheus, "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    answer = json.loads(body)
    if status != 200 or answer.get("status") != "success":
        return None, answer.get("error", body[:200])
    return answer["data"]["result"], None


def dashboard_expressions(path):
    dashboard = json.load(open(path))
    names = [v["name"] for v in dashboard["templating"]["list"]]
    if names[0] != "datasource" or dashboard["templating"]["list"][0]["type"] != "datasource":
        fail("the dashboard's first variable must be the data source")
    ids = [p["id"] for p in dashboard["panels"]]
    if len(ids) != len(set(ids)):
        fail("panel ids repeat")
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        if panel["datasource"]["uid"] != "${datasource}":
            fail(f"panel {panel['title']!r} does not use the data source variable")
        for target in panel["targets"]:
            yield panel["title"], target["expr"]


def grafana_to_promql(expr):
    return (expr.replace("$__rate_interval", "30s").replace("${instance}", ".*")
            .replace("$instance", ".*"))


def cmd_promql(args):
    problems = []
    checked = 0
    for title, expr in dashboard_expressions(args.dashboard):
        result, error = query(args.prometheus, grafana_to_promql(expr))
        checked += 1
        if error:
            problems.append(f"dashboard {title!r}: {expr}: invalid: {error}")
        elif not result:
            problems.append(f"dashboard {title!r}: {expr}: no data")
    status, body = http_get(args.prometheus, "/api/v1/rules")
    groups = json.loads(body)["data"]["groups"]
    rules = [r for g in groups for r in g["rules"]]
    if len(rules) < 9:
        problems.append(f"Prometheus loaded {len(rules)} alert rules, expected at least 9")
    for rule in rules:
        checked += 1
        name, expr = rule["name"], rule["query"]
        if rule["health"] != "ok":
            problems.append(f"alert {name}: evaluation {rule['health']}: {rule.get('lastError')}")
        value = re.match(r"^(.*\S)\s+(==|!=|>=|<=|>|<)\s+[-0-9.e+]+$", expr, re.S)
        if not value:
            problems.append(f"alert {name}: {expr} is not '<value> <comparison> <threshold>'")
            continue
        result, error = query(args.prometheus, value.group(1))
        if error:
            problems.append(f"alert {name}: {value.group(1)}: invalid: {error}")
        elif not result:
            problems.append(f"alert {name}: {value.group(1)}: no data")
    for name in args.firing:
        expr = next((r["query"] for r in rules if r["name"] == name), None)
        result, error = query(args.prometheus, expr or "absent_rule")
        if not result:
            problems.append(f"alert {name}: {expr} does not fire ({error or 'no data'})")
    for p in problems:
        print(f"  {p}", file=sys.stderr)
    if problems:
        fail(f"{len(problems)} of {checked} expressions failed")
    firing = f"; firing as expected: {', '.join(args.firing)}" if args.firing else ""
    print(f"{checked} expressions (dashboard and alert rules) valid and returning data{firing}")


def cmd_json_logs(args):
    lines = 0
    for path in args.files:
        for n, line in enumerate(open(path, encoding="utf-8"), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                fail(f"{path}:{n}: not JSON ({e}): {line!r}")
            if not isinstance(obj, dict) or "level" not in obj or "timestamp" not in obj:
                fail(f"{path}:{n}: not a log object: {line!r}")
            lines += 1
    if lines < args.at_least:
        fail(f"only {lines} log lines, expected at least {args.at_least}")
    print(f"{lines} log lines, each one JSON object")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("announce")
    p.add_argument("--udp")
    p.add_argument("--http")
    p.add_argument("--passkey")
    p.set_defaults(run=cmd_announce)
    p = sub.add_parser("setup")
    p.add_argument("--admin", required=True)
    p.add_argument("--token", required=True)
    p.set_defaults(run=cmd_setup)
    p = sub.add_parser("load")
    for name in ("--udp", "--http", "--admin", "--db"):
        p.add_argument(name, required=True)
    p.add_argument("--ws-limit", type=int, required=True)
    p.add_argument("--other-node", help="HOST:PORT of another cluster node's HTTP listener")
    p.add_argument("--http-limit", type=int, required=True)
    p.set_defaults(run=cmd_load)
    p = sub.add_parser("promql")
    p.add_argument("--prometheus", required=True)
    p.add_argument("--dashboard", required=True)
    p.add_argument("--firing", action="append", default=[])
    p.set_defaults(run=cmd_promql)
    p = sub.add_parser("json-logs")
    p.add_argument("--at-least", type=int, default=1)
    p.add_argument("files", nargs="+")
    p.set_defaults(run=cmd_json_logs)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
