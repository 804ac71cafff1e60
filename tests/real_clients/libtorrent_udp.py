#!/usr/bin/python3
"""Real-client test over UDP (BEP 15): two libtorrent sessions exchange a file
through a tracker at udp://127.0.0.1:PORT/announce only (udp://[::1]:PORT/announce with --ipv6).

One session seeds a random file, the other downloads it. DHT, LSD, UPnP,
NAT-PMP and PEX are off, so the leecher can only learn of the seeder from the
tracker. Checks: the tracker answers a BEP 15 connect; the seeder gets a
tracker reply; the leecher gets a tracker reply listing >= 1 peer; the
download completes in time and its bytes equal the seed's; the leecher's peer
came from the tracker (peer source flags, no DHT/PEX/LSD); a scrape reports
>= 1 seeder. Prints "N passed, N failed" last; exits non-zero on any failure.

Run with /usr/bin/python3 (Debian's python3-libtorrent imports only there).

  tests/real_clients/libtorrent_udp.py                  # starts target/release/shoal --udp 127.0.0.1:PORT
  tests/real_clients/libtorrent_udp.py --tracker-cmd '/path/shoal --udp 127.0.0.1:{port}'
  tests/real_clients/libtorrent_udp.py --aquatic-udp /work/tools/bin/aquatic_udp

The tracker it starts is stopped by its PID at the end. All traffic stays on 127.0.0.1 (or ::1).
"""
import argparse
import hashlib
import os
import shlex
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

try:
    import libtorrent as lt
except ImportError as e:
    print(f"libtorrent_udp: cannot import libtorrent ({e}); run with /usr/bin/python3 after "
          "`apt-get install -y python3-libtorrent`", file=sys.stderr)
    print("0 passed, 1 failed")
    sys.exit(1)


class Results:
    def __init__(self, expected):
        self.passed = 0
        self.failed = 0
        self.expected = list(expected)  # checks that count as failed if never reached
        self.done = set()

    def not_reached(self):
        for name in self.expected:
            if name not in self.done:
                self.check(name, False, "not reached")

    def check(self, name, ok, detail=""):
        self.done.add(name)
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
        return ok


def log(msg):
    print(f"  [{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


HOST = "127.0.0.1"  # or "::1" with --ipv6


def family():
    return socket.AF_INET6 if ":" in HOST else socket.AF_INET


def host_port(port):
    return f"[{HOST}]:{port}" if ":" in HOST else f"{HOST}:{port}"


def free_port():
    """A UDP port below 32768 (outside the ephemeral range) that nothing is bound to."""
    for port in range(20000 + os.getpid() % 5000, 32000):
        s = socket.socket(family(), socket.SOCK_DGRAM)
        try:
            s.bind((HOST, port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free UDP port")


def udp_connect_ok(port, proc, timeout_s):
    """Send BEP 15 connect requests until a matching connect response arrives."""
    s = socket.socket(family(), socket.SOCK_DGRAM)
    s.settimeout(0.1)
    deadline = time.monotonic() + timeout_s
    tid = 0x1ee70000
    try:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                return False
            tid += 1
            s.sendto(struct.pack(">QII", 0x41727101980, 0, tid), (HOST, port))
            try:
                data = s.recv(64)
            except (socket.timeout, ConnectionRefusedError):
                continue
            if len(data) >= 16 and struct.unpack(">II", data[:8]) == (0, tid):
                return True
        return False
    finally:
        s.close()


def session():
    settings = {
        "listen_interfaces": host_port(0),
        "enable_dht": False,
        "enable_lsd": False,
        "enable_upnp": False,
        "enable_natpmp": False,
        "allow_multiple_connections_per_ip": True,
        "announce_to_all_trackers": True,
        "announce_to_all_tiers": True,
        "ssrf_mitigation": False,
        "alert_mask": lt.alert.category_t.all_categories,
    }
    # flags 0: no default plugins, so no ut_pex (and each torrent also gets disable_pex)
    return lt.session(settings, 0)


def make_torrent(path, url):
    fs = lt.file_storage()
    lt.add_files(fs, path)
    ct = lt.create_torrent(fs, 64 * 1024, flags=lt.create_torrent.v1_only)
    ct.add_tracker(url, 0)
    ct.set_creator("shoal real-client test")
    lt.set_piece_hashes(ct, os.path.dirname(path))
    return lt.torrent_info(lt.bencode(ct.generate()))


def add(ses, ti, save_path, seed):
    atp = lt.add_torrent_params()
    atp.ti = ti
    atp.save_path = save_path
    flags = atp.flags
    flags &= ~lt.torrent_flags.paused
    flags &= ~lt.torrent_flags.auto_managed
    flags |= lt.torrent_flags.disable_pex | lt.torrent_flags.disable_dht | lt.torrent_flags.disable_lsd
    if seed:
        flags |= lt.torrent_flags.seed_mode
    atp.flags = flags
    return ses.add_torrent(atp)


class Pump:
    """Drains both sessions' alerts, recording what the test waits for as plain data
    (a libtorrent alert object is only valid until the next pop_alerts call)."""

    def __init__(self, sessions, verbose):
        self.sessions = sessions
        self.verbose = verbose
        self.events = []  # (session name, alert type name, dict of fields)

    @staticmethod
    def fields(a):
        if isinstance(a, lt.tracker_reply_alert):
            return {"num_peers": a.num_peers}
        if isinstance(a, lt.scrape_reply_alert):
            return {"complete": a.complete, "incomplete": a.incomplete}
        return {}

    def run(self, until, deadline):
        while time.monotonic() < deadline:
            for name, ses in self.sessions.items():
                for a in ses.pop_alerts():
                    kind = type(a).__name__
                    self.events.append((name, kind, self.fields(a)))
                    if self.verbose or kind in ("tracker_error_alert", "scrape_failed_alert"):
                        log(f"{name}: {kind}: {a.message()}")
            found = until()
            if found is not None and found is not False:
                return found
            next(iter(self.sessions.values())).wait_for_alert(50)
        return None

    def find(self, who, kind, pred=lambda f: True, since=0):
        for name, k, f in self.events[since:]:
            if name == who and k == kind and pred(f):
                return f
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tracker-cmd", default=os.environ.get("SHOAL_TRACKER_CMD"),
                    help="tracker command; {port} is replaced (default: SHOAL_BIN or target/release/shoal "
                         "with --udp 127.0.0.1:{port})")
    ap.add_argument("--aquatic-udp", metavar="BIN", help="start this aquatic_udp binary instead (config written here)")
    ap.add_argument("--port", type=int, default=0, help="tracker UDP port (default: a free port below 32768)")
    ap.add_argument("--timeout", type=float, default=60, help="time limit for the whole test, seconds (default 60)")
    ap.add_argument("--size-mib", type=int, default=4, help="size of the random file (default 4 MiB)")
    ap.add_argument("--ipv6", action="store_true", help="tracker and clients on ::1 instead of 127.0.0.1")
    ap.add_argument("--verbose", action="store_true", help="log every libtorrent alert")
    args = ap.parse_args()
    # on SIGTERM (e.g. from `timeout`), unwind so the processes we started are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    global HOST
    if args.ipv6:
        HOST = "::1"

    res = Results(CHECKS)
    t_end = time.monotonic() + args.timeout
    tmp = tempfile.TemporaryDirectory(prefix="shoal-lt-udp-")
    port = args.port or free_port()
    url = f"udp://{host_port(port)}/announce"

    env = dict(os.environ)
    env.pop("RUST_BACKTRACE", None)
    if args.aquatic_udp:
        cfg = os.path.join(tmp.name, "aquatic_udp.toml")
        with open(cfg, "w") as f:
            f.write(f'socket_workers = 1\nlog_level = "warn"\n[network]\naddress = "{host_port(port)}"\n')
        cmd = [args.aquatic_udp, "-c", cfg]
    elif args.tracker_cmd:
        cmd = shlex.split(args.tracker_cmd.replace("{port}", str(port)))
    else:
        shoal = os.environ.get("SHOAL_BIN", os.path.join(REPO, "target/release/shoal"))
        cmd = [shoal, "--udp", host_port(port)]
    log("tracker: " + " ".join(cmd))
    tracker_log = open(os.path.join(tmp.name, "tracker.log"), "w+")
    try:
        tracker = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=tracker_log, stderr=subprocess.STDOUT,
                                   env=env)
    except OSError as e:
        res.check("tracker starts", False, f"{cmd[0]}: {e}")
        print(f"{res.passed} passed, {res.failed} failed")
        return 1
    try:
        run(args, res, tmp.name, url, port, tracker, t_end)
    finally:
        res.not_reached()
        if tracker.poll() is None:
            os.kill(tracker.pid, signal.SIGTERM)
            try:
                tracker.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.kill(tracker.pid, signal.SIGKILL)
                tracker.wait(timeout=5)
        else:
            res.check("tracker still running at the end", False, f"exit status {tracker.returncode}")
        if res.failed:
            tracker_log.seek(0)
            tail = tracker_log.read()[-2000:]
            if tail.strip():
                log("tracker output (tail):\n" + tail)
        tracker_log.close()
        tmp.cleanup()
    print(f"{res.passed} passed, {res.failed} failed")
    return 1 if res.failed else 0


C_CONNECT = "tracker answers a BEP 15 connect"
C_V1 = "torrent is v1-only with the one UDP tracker"
C_SEED_REPLY = "seeder gets a tracker reply"
C_LEECH_REPLY = "leecher gets a tracker reply with >= 1 peer"
C_BYTES = "leecher downloads the file and its bytes equal the seed's"
C_SOURCE = "leecher's peer came from the tracker (DHT/LSD/UPnP/NAT-PMP/PEX off)"
C_SCRAPE = "scrape reports >= 1 seeder"
CHECKS = [C_CONNECT, C_V1, C_SEED_REPLY, C_LEECH_REPLY, C_BYTES, C_SOURCE, C_SCRAPE]


def run(args, res, tmp, url, port, tracker, t_end):
    if not res.check(C_CONNECT, udp_connect_ok(port, tracker, 10), host_port(port)):
        return

    seed_dir, leech_dir = os.path.join(tmp, "seed"), os.path.join(tmp, "leech")
    os.makedirs(seed_dir)
    os.makedirs(leech_dir)
    payload = os.urandom(args.size_mib << 20)
    with open(os.path.join(seed_dir, "payload.bin"), "wb") as f:
        f.write(payload)
    ti = make_torrent(os.path.join(seed_dir, "payload.bin"), url)
    trackers = [t.url for t in ti.trackers()]
    res.check(C_V1, ti.info_hashes().has_v1() and not ti.info_hashes().has_v2() and trackers == [url],
              f"trackers {trackers}")
    log(f"torrent {ti.info_hashes().v1} ({args.size_mib} MiB, {ti.num_pieces()} pieces), tracker {url}")

    seeder_ses, leecher_ses = session(), session()
    sp = seeder_ses.get_settings()
    off = all(not sp[k] for k in ("enable_dht", "enable_lsd", "enable_upnp", "enable_natpmp"))
    pump = Pump({"seeder": seeder_ses, "leecher": leecher_ses}, args.verbose)

    seeder = add(seeder_ses, ti, seed_dir, seed=True)
    got = pump.run(lambda: pump.find("seeder", "tracker_reply_alert"), min(t_end, time.monotonic() + 30))
    if not res.check(C_SEED_REPLY, got is not None):
        return

    leecher = add(leecher_ses, ti, leech_dir, seed=False)
    got = pump.run(lambda: pump.find("leecher", "tracker_reply_alert", lambda f: f["num_peers"] >= 1),
                   min(t_end, time.monotonic() + 30))
    res.check(C_LEECH_REPLY, got is not None,
              f"{got['num_peers']} peer(s)" if got else "")

    # Watch the leecher's peers while it downloads: where did they come from?
    sources = set()

    def done():
        for p in leecher.get_peer_info():
            sources.add(p.source)
        st = leecher.status()
        return st.is_seeding and st.state == lt.torrent_status.seeding

    finished = pump.run(done, t_end)
    data_ok = False
    if finished:
        leecher.flush_cache()
        pump.run(lambda: pump.find("leecher", "cache_flushed_alert"), min(t_end, time.monotonic() + 10))
        path = os.path.join(leech_dir, "payload.bin")
        with open(path, "rb") as f:
            got_bytes = f.read()
        data_ok = got_bytes == payload
        detail = (f"sha256 {hashlib.sha256(got_bytes).hexdigest()[:16]} vs "
                  f"{hashlib.sha256(payload).hexdigest()[:16]}, {len(got_bytes)} bytes")
    else:
        st = leecher.status()
        detail = f"not finished in time: state {st.state}, progress {st.progress:.2%}, {st.num_peers} peers"
    res.check(C_BYTES, finished and data_ok, detail)

    from_tracker = any(s & lt.peer_info.tracker for s in sources)
    other = any(s & (lt.peer_info.dht | lt.peer_info.pex | lt.peer_info.lsd) for s in sources)
    res.check(C_SOURCE,
              from_tracker and not other and off, f"peer source flags seen: {sorted(sources)}")

    # Scrape: the seeder must be counted. Retry a few times, the tracker may not have the
    # leecher's completed event yet, and libtorrent may throttle scrapes.
    scraped = None
    for attempt in range(5):
        if time.monotonic() >= t_end:
            break
        n0 = len(pump.events)
        leecher.scrape_tracker(0)

        def scrape_done():
            for name, kind, f in pump.events[n0:]:
                if name == "leecher" and kind in ("scrape_reply_alert", "scrape_failed_alert"):
                    return (kind, f)
            return None

        got = pump.run(scrape_done, min(t_end, time.monotonic() + 10))
        if got and got[0] == "scrape_reply_alert":
            scraped = got[1]
            if scraped["complete"] >= 1:
                break
        time.sleep(0.5)
    res.check(C_SCRAPE, scraped is not None and scraped["complete"] >= 1,
              f"complete={scraped['complete']} incomplete={scraped['incomplete']}" if scraped else "no scrape reply")

    for ses, h in ((leecher_ses, leecher), (seeder_ses, seeder)):
        ses.remove_torrent(h)


if __name__ == "__main__":
    sys.exit(main())
