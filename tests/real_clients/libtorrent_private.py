#!/usr/bin/python3
"""Real-client test of private mode (issue 11, point 1): libtorrent seeds and downloads
through shoal started with --private, over HTTP (http://127.0.0.1:P/<passkey>/announce) and
over UDP with the passkey in BEP 41 URL data (udp://127.0.0.1:P/<passkey>/announce for the
seeder, udp://127.0.0.1:P/announce/<passkey> for the leecher), users and torrents registered
through the admin API; the same torrent with a wrong passkey is refused.

Swarms:
  http  a hybrid (v1+v2) torrent registered with its v2 hash: the seeder (user 1) and the
        leecher (user 2) both announce the v1 and the truncated v2 hash, which must be one
        torrent: both get answers to both, the leecher finds the seeder, the bytes match, the
        peers came from the tracker, a scrape through the passkey URL counts the seeder, and
        the database holds one row for the torrent, not one per hash;
  udp   the same with a v1-only torrent over UDP (no scrape: UDP scrapes carry no passkey).
Then for each protocol a client with a wrong passkey is refused and gets no reply: over HTTP
its tracker_error_alert shows the failure reason "unknown passkey"; over UDP libtorrent
2.0.8 shows an empty reason for every BEP 15 error (it reads the text from the packet's
first byte), so the test checks its error alert and then the text itself with an announce
built like libtorrent's. /metrics counts the refusals in
shoal_private_refused_total{protocol,reason="unknown passkey"} (or unknown_passkey), and no
passkey (right or wrong) appears in shoal's log (info level) or in /metrics.

This file is also the module the other libtorrent_private_*.py tests share: shoal in
private mode with its admin API (PrivateTracker, run_test), libtorrent sessions that obey a
short tracker interval (private_session), and one torrent's clients whose stopped
announces are seen answered (Swarm). Prints "N passed, N failed" last; exits non-zero on
any failure.

Run with /usr/bin/python3 (Debian's python3-libtorrent imports only there):

  tests/real_clients/libtorrent_private.py               # starts target/release/shoal
  SHOAL_BIN=/path/to/shoal tests/real_clients/libtorrent_private.py --verbose

Everything it starts is stopped by its PID at the end; all traffic stays on 127.0.0.1.
"""
import argparse
import hashlib
import http.client
import json
import os
import re
import secrets
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from lt_swarm import REPO, Pump, Results, Tracker, add, free_port, log, session, write_payload  # noqa: E402

import libtorrent as lt  # noqa: E402  (lt_swarm explains when it cannot be imported)

TOKEN = "lt-private-admin-" + secrets.token_hex(8)
TCP_AND_UDP = (socket.SOCK_STREAM, socket.SOCK_DGRAM)
PIECE = 64 * 1024


def new_passkey():
    """A fresh passkey of the characters sites use (A-Za-z0-9, - and _), 43 long."""
    return secrets.token_urlsafe(32)


def private_session():
    """A session as lt_swarm.session() makes (peers only from the tracker) that obeys a
    short tracker interval (libtorrent's own floor is 5 minutes) and waits for the answers
    to its stopped announces."""
    ses = session()
    ses.apply_settings({"min_announce_interval": 1, "stop_tracker_timeout": 10})
    return ses


def make_torrent(path, hybrid):
    """A hybrid (v1+v2, libtorrent 2.x's default) or v1-only torrent of the file, without
    trackers (each client adds its own passkey URL); 64 KiB pieces."""
    fs = lt.file_storage()
    lt.add_files(fs, path)
    ct = lt.create_torrent(fs, PIECE, flags=0 if hybrid else lt.create_torrent.v1_only)
    ct.set_creator("shoal private real-client test")
    lt.set_piece_hashes(ct, os.path.dirname(path))
    return lt.torrent_info(lt.bencode(ct.generate()))


def hashes(ti):
    """(v1 hex, truncated v2 hex or None): the info hashes the torrent announces."""
    ih = ti.info_hashes()
    return str(ih.v1), (str(ih.v2)[:40] if ih.has_v2() else None)


def reported(st):
    """(uploaded, downloaded) as libtorrent announces them for this torrent_status: its
    session counters (torrent::announce_with_tracker: uploaded = total_payload_upload,
    downloaded = total_payload_download less the bytes of pieces that failed the hash check
    and, unless report_true_downloaded is set, less redundant bytes); these counters start
    at zero when the torrent is added or resumed."""
    downloaded = st.total_payload_download - st.total_failed_bytes - st.total_redundant_bytes
    return st.total_payload_upload, max(0, downloaded)


class PrivatePump(Pump):
    """lt_swarm's Pump that also records what the private tests look at: an announce's
    event and hash version, a reply's version, a refusal's failure reason."""

    @staticmethod
    def fields(a):
        if isinstance(a, lt.tracker_announce_alert):
            return {"event": int(a.event), "version": str(a.version)}
        if isinstance(a, lt.tracker_reply_alert):
            return {"num_peers": a.num_peers, "version": str(a.version), "url": a.tracker_url()}
        if isinstance(a, lt.tracker_error_alert):
            return {"reason": a.failure_reason(), "message": a.message(), "version": str(a.version)}
        return Pump.fields(a)

    def count(self, who, kind, since=0):
        return sum(1 for name, k, _ in self.events[since:] if name == who and k == kind)


STOPPED = 3  # lt.event_t.stopped

# Sessions whose clients left, kept (paused, without torrents) until the process ends:
# python3-libtorrent 2.0.8 sometimes crashes (SIGSEGV) when a session is destroyed while
# other sessions run, or at interpreter exit; see finish().
RETIRED = []


def finish(status):
    """Ends the test process with `status` without destroying libtorrent sessions."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


class PrivateTracker:
    """shoal in private mode on free loopback ports: UDP and HTTP on one port, the admin
    listener on another, its database (SQLite beside the state file unless a URL is given),
    a config file with the admin token and the announce interval. It can be stopped with
    SIGTERM and started again on the same ports, database and state file.

    The interval (30 s) is short, but not shorter than libtorrent announces: over UDP it
    waits at least 60 s between regular announces whatever the tracker says (it takes no
    min interval from a UDP reply and assumes 60), and shoal's ledger forgets a client
    silent for 4 intervals. The tests make clients announce when they need it
    (force_reannounce)."""

    def __init__(self, res, directory, database=None, interval=30, min_interval=5, flush_interval=1):
        self.res = res
        self.dir = directory
        self.port = free_port(kinds=TCP_AND_UDP, first=22000)
        self.admin_port = free_port(kinds=(socket.SOCK_STREAM,), first=self.port + 1 - os.getpid() % 5000)
        self.state = os.path.join(directory, "shoal.state")
        self.database = database or f"sqlite://{os.path.join(directory, 'shoal.db')}"
        self.config = os.path.join(directory, "shoal.toml")
        with open(self.config, "w") as f:
            f.write(f'log_level = "info"\n[admin]\ntoken = "{TOKEN}"\n'
                    f"[announce]\ninterval = {interval}\nmin_interval = {min_interval}\n"
                    f"[private]\nenabled = true\nflush_interval = {flush_interval}\n")
        self.bin = os.environ.get("SHOAL_BIN", os.path.join(REPO, "target/release/shoal"))
        self.tracker = None
        self.logs = []
        self.passkeys = []  # every passkey registered: none may appear in logs or metrics

    def command(self):
        """shoal's command line (a subclass adds its own options)."""
        return [self.bin, "--private", "--database", self.database, "--config", self.config,
                "--udp", f"127.0.0.1:{self.port}", "--http", f"127.0.0.1:{self.port}",
                "--admin", f"127.0.0.1:{self.admin_port}", "--state-file", self.state, "--workers", "1"]

    def answers(self):
        """Whether the admin API answers (the tracker has loaded its database)."""
        return self.api("GET", "/api/users/999999999")[0] in (200, 404)

    def start(self, timeout_s=20):
        """Starts shoal; True once its HTTP port and admin API answer."""
        name = f"tracker-{len(self.logs) + 1}.log"
        self.logs.append(os.path.join(self.dir, name))
        self.tracker = Tracker.start(self.res, self.command(), self.dir, log_name=name)
        if self.tracker is None:
            return False
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.tracker.proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                if self.answers():
                    return True
            except OSError:
                pass
            time.sleep(0.1)
        return False

    def sigterm(self, timeout_s=30):
        """SIGTERM to shoal; its exit status once it is gone (None: still running after
        `timeout_s`, then it is killed)."""
        proc = self.tracker.proc
        os.kill(proc.pid, signal.SIGTERM)
        try:
            status = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            status = None
        self.tracker.log_file.close()
        self.tracker = None
        return status

    def stop(self):
        if self.tracker is not None:
            self.tracker.stop(self.res)
            self.tracker = None

    def log_text(self):
        text = ""
        for path in self.logs:
            with open(path, errors="replace") as f:
                text += f.read()
        return text

    def url(self, proto, passkey, form="prefix"):
        path = f"/{passkey}/announce" if form == "prefix" else f"/announce/{passkey}"
        return f"{proto}://127.0.0.1:{self.port}{path}"

    def api(self, method, path, body=None, token=True, timeout_s=15):
        """One admin request: (status, parsed JSON or text). OSError if it cannot connect."""
        conn = http.client.HTTPConnection("127.0.0.1", self.admin_port, timeout=timeout_s)
        try:
            headers = {"Authorization": f"Bearer {TOKEN}"} if token else {}
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=headers)
            r = conn.getresponse()
            text = r.read().decode(errors="replace")
        finally:
            conn.close()
        try:
            return r.status, json.loads(text)
        except ValueError:
            return r.status, text

    def put_user(self, user_id, passkey, **fields):
        self.passkeys.append(passkey)
        return self.api("PUT", f"/api/users/{user_id}", dict(passkey=passkey, **fields))[0] == 200

    def put_torrent(self, ti, register_v2=True, **fields):
        v1, v2 = hashes(ti)
        body = dict(fields)
        if v2 and register_v2:
            body["v2"] = v2
        return self.api("PUT", f"/api/torrents/{v1}", body)[0] == 200

    def flush(self):
        """POST /api/private/flush: its status (None if shoal did not answer)."""
        try:
            return self.api("POST", "/api/private/flush")[0]
        except OSError:
            return None

    def account(self, user_id, ti):
        """GET /api/users/<id>: (the user's figures, its rows for this torrent matched by
        either hash), or (None, None) if the user is not found."""
        status, user = self.api("GET", f"/api/users/{user_id}")
        if status != 200 or not isinstance(user, dict):
            log(f"GET /api/users/{user_id}: {status} {user}")
            return None, None
        ids = {h for h in hashes(ti) if h}
        return user, [row for row in user.get("torrents", []) if str(row.get("info_hash", "")).lower() in ids]

    def metrics(self):
        return self.api("GET", "/metrics", token=False)[1]


class Swarm:
    """One torrent and its clients, each a libtorrent session of its own (so each has its
    own peer id and port), added with its own passkey URL, and one pump over all of them."""

    def __init__(self, res, label, ti, payload, base_dir, verbose):
        self.res = res
        self.label = label
        self.ti = ti
        self.payload = payload
        self.base = base_dir
        self.pump = PrivatePump({}, verbose)
        self.clients = {}  # name -> (session, handle, save dir)
        self.versions = 2 if hashes(ti)[1] else 1

    def join(self, name, url, seed, download_rate_limit=0, save_dir=None):
        """Adds a client; a leecher's save dir may hold part of the data already.
        `download_rate_limit` (bytes/s) slows it down: a limit of the torrent, since the
        session's limits do not apply to peers on the local network."""
        ses = private_session()
        save_dir = save_dir or os.path.join(self.base, name)
        os.makedirs(save_dir, exist_ok=True)
        self.pump.sessions[name] = ses
        h = add(ses, self.ti, save_dir, seed=seed, url=url)
        if download_rate_limit:
            h.set_download_limit(download_rate_limit)
        self.clients[name] = (ses, h, save_dir)
        return h

    def handle(self, name):
        return self.clients[name][1]

    def wait(self, until, timeout_s):
        return self.pump.run(until, time.monotonic() + timeout_s)

    def wait_reply(self, name, timeout_s=20, since=0, min_peers=0):
        """The first tracker reply to this client since event `since` with >= min_peers."""
        return self.wait(lambda: self.pump.find(name, "tracker_reply_alert", lambda f: f["num_peers"] >= min_peers,
                                                since), timeout_s)

    def wait_error(self, name, timeout_s=20):
        return self.wait(lambda: self.pump.find(name, "tracker_error_alert"), timeout_s)

    def progress(self, name):
        return self.handle(name).status().progress

    def wait_done(self, name, timeout_s):
        """Waits for the leecher to seed; returns the set of its peers' source flags."""
        h, sources = self.handle(name), set()

        def done():
            for p in h.get_peer_info():
                sources.add(p.source)
            st = h.status()
            return st.is_seeding and st.state == lt.torrent_status.seeding

        return self.wait(done, timeout_s), sources

    def check_bytes(self, name, check_name, finished):
        """Checks the client's file equals the seed's."""
        _, h, save_dir = self.clients[name]
        if not finished:
            st = h.status()
            return self.res.check(check_name, False, f"not finished in time: state {st.state}, "
                                  f"progress {st.progress:.2%}, {st.num_peers} peers")
        n = len(self.pump.events)
        h.flush_cache()
        self.wait(lambda: self.pump.find(name, "cache_flushed_alert", since=n), 10)
        with open(os.path.join(save_dir, "payload.bin"), "rb") as f:
            got = f.read()
        return self.res.check(check_name, got == self.payload,
                              f"sha256 {hashlib.sha256(got).hexdigest()[:16]} vs "
                              f"{hashlib.sha256(self.payload).hexdigest()[:16]}, {len(got)} bytes")

    def check_sources(self, check_name, sources):
        from_tracker = any(s & lt.peer_info.tracker for s in sources)
        other = any(s & (lt.peer_info.dht | lt.peer_info.pex | lt.peer_info.lsd) for s in sources)
        return self.res.check(check_name, from_tracker and not other, f"peer source flags seen: {sorted(sources)}")

    def stop(self, names, timeout_s=20):
        """Stops these clients the way a client stops a torrent, and makes sure the tracker
        has what they reported: freezes their transfers, reads what libtorrent reports as
        uploaded and downloaded (see `reported`), pauses them (a stopped announce per hash
        version, carrying those figures) and waits for the tracker's reply to each stopped
        announce. Returns {name: (uploaded, downloaded)}, or None if some stopped announce
        was not answered in time."""
        for name in names:
            h = self.handle(name)
            h.set_download_limit(1)
            h.set_upload_limit(1)
        self.wait(lambda: None, 1.0)
        moved = {}
        for name in names:
            moved[name] = reported(self.handle(name).status())
        since = len(self.pump.events)
        for name in names:
            self.handle(name).pause()

        def answered():
            for name in names:
                for version in self.stopped_versions(name, since):
                    start = self.stopped_index(name, version, since)
                    if start is None or not any(n == name and k == "tracker_reply_alert" and f["version"] == version
                                                for n, k, f in self.pump.events[start:]):
                        return False
                if len(self.stopped_versions(name, since)) < self.versions:
                    return False
            return True

        if not self.wait(answered, timeout_s):
            log(f"{self.label}: stopped announces of {names} not all answered: "
                f"{[e for e in self.pump.events[since:] if e[1].startswith('tracker_')]}")
            return None
        return moved

    def stopped_versions(self, name, since):
        return {f["version"] for n, k, f in self.pump.events[since:]
                if n == name and k == "tracker_announce_alert" and f["event"] == STOPPED}

    def stopped_index(self, name, version, since):
        for i in range(since, len(self.pump.events)):
            n, k, f = self.pump.events[i]
            if n == name and k == "tracker_announce_alert" and f["event"] == STOPPED and f["version"] == version:
                return i
        return None

    def reannounce(self, names):
        """These clients announce now, whatever the tracker's min interval."""
        for name in names:
            self.handle(name).force_reannounce(0, -1, lt.reannounce_flags_t.ignore_min_interval)

    def leave(self, name):
        """Removes the client's torrent and retires its session (see RETIRED)."""
        ses, h, _ = self.clients.pop(name)
        ses.remove_torrent(h)
        del self.pump.sessions[name]
        ses.pause()
        RETIRED.append(ses)


def http_scrape(tracker, passkey, ti):
    """complete count from a plain HTTP scrape through the passkey URL (None on failure)."""
    v1 = bytes.fromhex(hashes(ti)[0])
    path = f"/{passkey}/scrape?info_hash={urllib.parse.quote_from_bytes(v1)}"
    conn = http.client.HTTPConnection("127.0.0.1", tracker.port, timeout=10)
    try:
        conn.request("GET", path)
        body = conn.getresponse().read()
    except OSError:
        return None
    finally:
        conn.close()
    try:
        files = lt.bdecode(body)[b"files"]
        return next(iter(files.values()))[b"complete"]
    except (TypeError, KeyError, StopIteration, RuntimeError):
        log(f"scrape: {body[:200]!r}")
        return None


def udp_announce(port, url_data, info_hash, timeout_s=5):
    """One BEP 15 announce as libtorrent sends it (with the BEP 41 URL-data option carrying
    `url_data`): the reply's (action, payload after the 8-byte header), or None."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(timeout_s)
    try:
        s.sendto(struct.pack(">QII", 0x41727101980, 0, 7), ("127.0.0.1", port))
        reply = s.recv(64)
        connection_id = struct.unpack(">Q", reply[8:16])[0]
        option = bytes([2, len(url_data)]) + url_data.encode()
        s.sendto(struct.pack(">QII20s20sQQQIIIiH", connection_id, 1, 8, info_hash, b"-LT2080-" + os.urandom(12),
                             0, 1 << 20, 0, 2, 0, 0, -1, 6881) + option, ("127.0.0.1", port))
        reply = s.recv(2048)
        return struct.unpack(">I", reply[:4])[0], reply[8:]
    except (OSError, struct.error):
        return None
    finally:
        s.close()


def refused_counts(metrics_text, reason):
    """{protocol label: value} of shoal_private_refused_total with this reason (the label
    may spell it with underscores: unknown_passkey)."""
    counts = {}
    for line in str(metrics_text).splitlines():
        if not line.startswith("shoal_private_refused_total{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line[:line.index("}")]))
        if labels.get("reason", "").replace("_", " ") == reason:
            counts[labels.get("protocol", "?")] = counts.get(labels.get("protocol", "?"), 0) + float(line.split()[-1])
    return counts


def check_no_passkeys(res, tracker, passkeys):
    """Stops the tracker, then checks that no passkey appears in its logs (all its runs, at
    info level) or in its /metrics."""
    metrics = str(tracker.metrics())
    tracker.stop()
    logs = tracker.log_text()
    leaked = [key[:4] + "..." for key in passkeys if key in logs or key in metrics]
    res.check("no passkey (right or wrong) appears in shoal's log (info level) or in /metrics",
              not leaked and bool(logs) and "shoal_" in metrics,
              f"found: {leaked}" if leaked else f"{len(logs)} bytes of log, {len(metrics)} of metrics read")


def run_test(prefix, body, database=None, where="SQLite"):
    """A test file's frame: its results, a temporary directory, shoal in private mode on
    `database` (SQLite there by default) started; then `body(res, tracker, directory)`,
    the passkey leak check, and everything stopped and removed whatever happened. Returns
    the exit status."""
    res = Results()
    tmp = tempfile.TemporaryDirectory(prefix=prefix)
    tracker = PrivateTracker(res, tmp.name, database=database)
    try:
        if res.check(f"shoal starts in private mode ({where}) and its admin API answers", tracker.start()):
            body(res, tracker, tmp.name)
            check_no_passkeys(res, tracker, tracker.passkeys)
    finally:
        tracker.stop()
        tmp.cleanup()
    return res.summary()


# ---- the point-1 test ------------------------------------------------------------------

SEEDER, LEECHER = 1, 2


def private_swarm(res, tracker, args, proto, hybrid, seed_key, leech_key, wrong_key, base):
    """One private swarm over `proto`, then a client with a wrong passkey."""
    label = proto
    path, payload = write_payload(os.path.join(base, label, "seeder"), args.size_mib << 20)
    ti = make_torrent(path, hybrid)
    v1, v2 = hashes(ti)
    log(f"{label}: torrent v1 {v1} v2 {v2}")
    res.check(f"{label}: PUT /api/torrents/<v1> registers the torrent" + (" with its v2 hash" if v2 else ""),
              tracker.put_torrent(ti))
    swarm = Swarm(res, label, ti, payload, os.path.join(base, label), args.verbose)
    seed_url = tracker.url(proto, seed_key)
    leech_url = tracker.url(proto, leech_key, form="prefix" if proto == "http" else "suffix")
    try:
        swarm.join("seeder", seed_url, seed=True)
        if not res.check(f"{label}: seeder ({seed_url.replace(seed_key, '<passkey>')}) gets a tracker reply",
                         swarm.wait_reply("seeder") is not None):
            return
        swarm.join("leecher", leech_url, seed=False)
        got = swarm.wait_reply("leecher", min_peers=1)
        res.check(f"{label}: leecher ({leech_url.replace(leech_key, '<passkey>')}) gets a reply with >= 1 peer",
                  got is not None, f"{got['num_peers']} peer(s)" if got else "")
        finished, sources = swarm.wait_done("leecher", args.timeout)
        swarm.check_bytes("leecher", f"{label}: leecher downloads the file and its bytes equal the seed's", finished)
        swarm.check_sources(f"{label}: leecher's peers came from the tracker (DHT/LSD/PEX off)", sources)
        if v2:
            for name in ("seeder", "leecher"):
                versions = {f["version"] for n, k, f in swarm.pump.events if n == name and k == "tracker_reply_alert"}
                errors = [f["reason"] for n, k, f in swarm.pump.events if n == name and k == "tracker_error_alert"]
                res.check(f"{label}: {name}'s v1 and v2 announces are both answered (the v2 hash is the "
                          "registered torrent)", len(versions) == 2 and not errors,
                          f"replies for {sorted(versions)}, errors {errors}")
        if proto == "http":
            complete = None
            for _ in range(10):
                complete = http_scrape(tracker, leech_key, ti)
                if complete and complete >= 2:
                    break
                swarm.wait(lambda: None, 0.5)
            res.check(f"{label}: an HTTP scrape through /<passkey>/scrape counts 2 seeders", complete == 2,
                      f"complete={complete}")

        # A third client with a passkey no user has.
        swarm.join("stranger", tracker.url(proto, wrong_key), seed=False)
        refused = swarm.wait_error("stranger")
        replies = swarm.pump.count("stranger", "tracker_reply_alert")
        detail = f"{refused}, {replies} replies" if refused else "no tracker_error_alert"
        if proto == "http":
            res.check(f"{label}: a client with a wrong passkey is refused with \"unknown passkey\" in its "
                      "tracker_error_alert, and gets no reply",
                      refused is not None and refused["reason"] == "unknown passkey" and replies == 0, detail)
        else:
            # libtorrent 2.0.8 reads a BEP 15 error's text from the packet's first byte (a 0 of
            # the action) instead of after the header, so its alert shows an empty failure
            # reason for every UDP tracker error: see the error it got, then the text itself
            # from an announce built like libtorrent's (BEP 41 URL data).
            res.check(f"{label}: a client with a wrong passkey gets a tracker_error_alert \"tracker sent a failure "
                      "message\" (libtorrent 2.0.8 drops a UDP error's text), and no reply",
                      refused is not None and "failure message" in refused["message"] and replies == 0, detail)
            got = udp_announce(tracker.port, f"/{wrong_key}/announce", bytes.fromhex(v1))
            res.check(f"{label}: that announce (BEP 41 URL data /<wrong passkey>/announce) is answered with a BEP 15 "
                      "error \"unknown passkey\"", got == (3, b"unknown passkey"), f"{got}")

        # The hybrid's two hashes are one torrent: one accounting row, not one per hash.
        stopped = swarm.stop(["seeder", "leecher"])
        res.check(f"{label}: the stopped announces are answered", stopped is not None)
        res.check(f"{label}: POST /api/private/flush answers 200", tracker.flush() == 200)
        _, rows = tracker.account(LEECHER, ti)
        res.check(f"{label}: the leecher has one accounting row for the torrent (v1 and v2 announces together)",
                  rows is not None and len(rows) == 1 and rows[0]["info_hash"].lower() == v1,
                  f"{rows}")
    finally:
        for name in list(swarm.clients):
            swarm.leave(name)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--timeout", type=float, default=60, help="time limit per transfer, seconds (default 60)")
    ap.add_argument("--size-mib", type=int, default=4, help="size of each random file (default 4 MiB)")
    ap.add_argument("--verbose", action="store_true", help="log every libtorrent alert")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    wrong = new_passkey()

    def body(res, tracker, directory):
        keys = {"seeder": new_passkey(), "leecher": new_passkey()}
        res.check("PUT /api/users/1 and /api/users/2 register the seeder's and the leecher's passkeys",
                  tracker.put_user(SEEDER, keys["seeder"]) and tracker.put_user(LEECHER, keys["leecher"]))
        tracker.passkeys.append(wrong)
        for proto, hybrid in (("http", True), ("udp", False)):
            private_swarm(res, tracker, args, proto, hybrid, keys["seeder"], keys["leecher"], wrong, directory)
        counts = refused_counts(tracker.metrics(), "unknown passkey")
        res.check('/metrics: shoal_private_refused_total{reason="unknown passkey"} counts the refusals on '
                  "both protocols", len(counts) >= 2 and all(v >= 1 for v in counts.values()), f"{counts}")

    return run_test("shoal-lt-private-", body)


if __name__ == "__main__":
    finish(main())
