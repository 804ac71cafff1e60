#!/usr/bin/python3
"""Real-client test over HTTP and HTTPS (BEP 3/23/48): libtorrent sessions exchange a file
through shoal, in three swarms:

  http   seeder and leecher both on http://127.0.0.1:PORT/announce only;
  https  both on https://127.0.0.1:PORT/announce only, with a self-signed certificate made
         here (trusted through SSL_CERT_FILE with certificate validation on; if this
         libtorrent build cannot be made to trust it, validation is turned off and the
         check says so);
  mixed  the seeder on udp://127.0.0.1:PORT only, the leecher on http:// only: the leecher
         can only find the seeder if UDP and HTTP share the swarm.

DHT, LSD, UPnP, NAT-PMP and PEX are off, so peers can only come from the tracker. For each
swarm: the seeder gets a tracker reply; the leecher gets a reply listing >= 1 peer; the
download completes in time and its bytes equal the seed's; the leecher's peers came from the
tracker; a scrape over the leecher's tracker reports >= 1 seeder. Prints "N passed, N failed"
last; exits non-zero on any failure.

Run with /usr/bin/python3 (Debian's python3-libtorrent imports only there):

  tests/real_clients/libtorrent_http.py                # starts target/release/shoal
  SHOAL_BIN=target/debug/shoal tests/real_clients/libtorrent_http.py
  tests/real_clients/libtorrent_http.py --only https --verbose

The tracker it starts is stopped by its PID at the end. All traffic stays on 127.0.0.1.
"""
import argparse
import hashlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TMP = tempfile.TemporaryDirectory(prefix="shoal-lt-http-")
CERT = os.path.join(TMP.name, "cert.pem")
KEY = os.path.join(TMP.name, "key.pem")

# The certificate must exist and be named before libtorrent (OpenSSL) is loaded.
subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-keyout", KEY, "-out", CERT, "-days", "2", "-subj", "/CN=127.0.0.1",
                "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
os.environ["SSL_CERT_FILE"] = CERT

try:
    import libtorrent as lt
except ImportError as e:
    print(f"libtorrent_http: cannot import libtorrent ({e}); run with /usr/bin/python3 after "
          "`apt-get install -y python3-libtorrent`", file=sys.stderr)
    print("0 passed, 1 failed")
    sys.exit(1)


class Results:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
        return ok


def log(msg):
    print(f"  [{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port():
    """A port below 32768 (outside the ephemeral range) free for both TCP and UDP."""
    for port in range(21000 + os.getpid() % 5000, 32000):
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            t.bind(("127.0.0.1", port))
            u.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            t.close()
            u.close()
    raise RuntimeError("no free port")


def wait_for_tcp(port, proc, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def session(validate_https):
    settings = {
        "listen_interfaces": "127.0.0.1:0",
        "enable_dht": False,
        "enable_lsd": False,
        "enable_upnp": False,
        "enable_natpmp": False,
        "allow_multiple_connections_per_ip": True,
        "announce_to_all_trackers": True,
        "announce_to_all_tiers": True,
        "ssrf_mitigation": False,
        "validate_https_trackers": validate_https,
        "alert_mask": lt.alert.category_t.all_categories,
    }
    return lt.session(settings, 0)  # flags 0: no default plugins (no ut_pex)


def make_torrent(path):
    fs = lt.file_storage()
    lt.add_files(fs, path)
    ct = lt.create_torrent(fs, 64 * 1024, flags=lt.create_torrent.v1_only)
    ct.set_creator("shoal real-client test")
    lt.set_piece_hashes(ct, os.path.dirname(path))
    return lt.torrent_info(lt.bencode(ct.generate()))


def add(ses, ti, url, save_path, seed):
    atp = lt.add_torrent_params()
    atp.ti = lt.torrent_info(ti)
    atp.ti.add_tracker(url, 0)
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
    """Drains the sessions' alerts into plain data (alerts die at the next pop_alerts)."""

    def __init__(self, sessions, verbose):
        self.sessions = sessions
        self.verbose = verbose
        self.events = []

    @staticmethod
    def fields(a):
        if isinstance(a, lt.tracker_reply_alert):
            return {"num_peers": a.num_peers, "url": a.tracker_url()}
        if isinstance(a, lt.scrape_reply_alert):
            return {"complete": a.complete, "incomplete": a.incomplete}
        return {"message": a.message()}

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


def transfer(res, label, seed_url, leech_url, args, validate_https=True):
    """One swarm: a seeder on seed_url, a leecher on leech_url."""
    t_end = time.monotonic() + args.timeout
    base = os.path.join(TMP.name, label)
    seed_dir, leech_dir = os.path.join(base, "seed"), os.path.join(base, "leech")
    os.makedirs(seed_dir)
    os.makedirs(leech_dir)
    payload = os.urandom(args.size_mib << 20)
    with open(os.path.join(seed_dir, "payload.bin"), "wb") as f:
        f.write(payload)
    ti = make_torrent(os.path.join(seed_dir, "payload.bin"))
    log(f"{label}: torrent {ti.info_hashes().v1}, seeder on {seed_url}, leecher on {leech_url}")

    seeder_ses, leecher_ses = session(validate_https), session(validate_https)
    pump = Pump({"seeder": seeder_ses, "leecher": leecher_ses}, args.verbose)
    seeder = add(seeder_ses, ti, seed_url, seed_dir, seed=True)
    trackers = [t["url"] for t in seeder.trackers()]
    res.check(f"{label}: seeder's only tracker is {seed_url}", trackers == [seed_url], f"{trackers}")
    got = pump.run(lambda: pump.find("seeder", "tracker_reply_alert"), min(t_end, time.monotonic() + 20))
    if not res.check(f"{label}: seeder gets a tracker reply", got is not None):
        return
    leecher = add(leecher_ses, ti, leech_url, leech_dir, seed=False)
    trackers = [t["url"] for t in leecher.trackers()]
    res.check(f"{label}: leecher's only tracker is {leech_url}", trackers == [leech_url], f"{trackers}")
    got = pump.run(lambda: pump.find("leecher", "tracker_reply_alert", lambda f: f["num_peers"] >= 1),
                   min(t_end, time.monotonic() + 20))
    res.check(f"{label}: leecher gets a tracker reply with >= 1 peer", got is not None,
              f"{got['num_peers']} peer(s)" if got else "")

    sources = set()

    def done():
        for p in leecher.get_peer_info():
            sources.add(p.source)
        st = leecher.status()
        return st.is_seeding and st.state == lt.torrent_status.seeding

    finished = pump.run(done, t_end)
    ok = False
    if finished:
        leecher.flush_cache()
        pump.run(lambda: pump.find("leecher", "cache_flushed_alert"), min(t_end, time.monotonic() + 10))
        with open(os.path.join(leech_dir, "payload.bin"), "rb") as f:
            got_bytes = f.read()
        ok = got_bytes == payload
        detail = f"sha256 {hashlib.sha256(got_bytes).hexdigest()[:16]} vs {hashlib.sha256(payload).hexdigest()[:16]}"
    else:
        st = leecher.status()
        detail = f"not finished: state {st.state}, progress {st.progress:.2%}, {st.num_peers} peers"
    res.check(f"{label}: leecher downloads the file and its bytes equal the seed's", finished and ok, detail)
    from_tracker = any(s & lt.peer_info.tracker for s in sources)
    other = any(s & (lt.peer_info.dht | lt.peer_info.pex | lt.peer_info.lsd) for s in sources)
    res.check(f"{label}: leecher's peers came from the tracker", from_tracker and not other,
              f"peer source flags seen: {sorted(sources)}")

    scraped = None
    for _ in range(5):
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
    res.check(f"{label}: scrape reports >= 1 seeder", scraped is not None and scraped["complete"] >= 1,
              f"complete={scraped['complete']} incomplete={scraped['incomplete']}" if scraped else "no scrape reply")
    for ses, h in ((leecher_ses, leecher), (seeder_ses, seeder)):
        ses.remove_torrent(h)


def https_trusted_by_libtorrent(url, args):
    """Whether a libtorrent session with certificate validation on gets a reply from the
    HTTPS tracker (i.e. it trusts our self-signed certificate via SSL_CERT_FILE)."""
    ses = session(True)
    d = os.path.join(TMP.name, "probe")
    os.makedirs(d)
    with open(os.path.join(d, "payload.bin"), "wb") as f:
        f.write(os.urandom(65536))
    ti = make_torrent(os.path.join(d, "payload.bin"))
    h = add(ses, ti, url, d, seed=True)
    pump = Pump({"probe": ses}, args.verbose)
    got = pump.run(lambda: pump.find("probe", "tracker_reply_alert") or
                   pump.find("probe", "tracker_error_alert"), time.monotonic() + 15)
    ok = pump.find("probe", "tracker_reply_alert") is not None
    ses.remove_torrent(h)
    return ok, got


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--timeout", type=float, default=60, help="time limit per swarm, seconds (default 60)")
    ap.add_argument("--size-mib", type=int, default=4, help="size of each random file (default 4 MiB)")
    ap.add_argument("--only", choices=["http", "https", "mixed"], action="append",
                    help="run only these swarms (repeatable)")
    ap.add_argument("--verbose", action="store_true", help="log every libtorrent alert")
    args = ap.parse_args()
    which = args.only or ["http", "https", "mixed"]

    res = Results()
    port, tls_port = free_port(), None
    while tls_port is None or tls_port == port:
        tls_port = free_port() + 1
    shoal = os.environ.get("SHOAL_BIN", os.path.join(REPO, "target/release/shoal"))
    cmd = [shoal, "--udp", f"127.0.0.1:{port}", "--http", f"127.0.0.1:{port}",
           "--https", f"127.0.0.1:{tls_port}", "--tls-cert", CERT, "--tls-key", KEY, "--workers", "1"]
    env = dict(os.environ)
    env.pop("RUST_BACKTRACE", None)
    log("tracker: " + " ".join(cmd))
    tracker_log = open(os.path.join(TMP.name, "tracker.log"), "w+")
    try:
        tracker = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=tracker_log,
                                   stderr=subprocess.STDOUT, env=env)
    except OSError as e:
        res.check("tracker starts", False, f"{cmd[0]}: {e}")
        print(f"{res.passed} passed, {res.failed} failed")
        return 1
    try:
        if res.check("tracker accepts TCP on the HTTP and HTTPS ports",
                     wait_for_tcp(port, tracker, 10) and wait_for_tcp(tls_port, tracker, 10)):
            http_url = f"http://127.0.0.1:{port}/announce"
            https_url = f"https://127.0.0.1:{tls_port}/announce"
            udp_url = f"udp://127.0.0.1:{port}/announce"
            if "http" in which:
                transfer(res, "http", http_url, http_url, args)
            if "https" in which:
                trusted, how = https_trusted_by_libtorrent(https_url, args)
                if trusted:
                    res.check("https: libtorrent trusts the self-signed certificate "
                              "(validation on, SSL_CERT_FILE)", True)
                else:
                    log(f"https: validation on failed ({how}); retrying with validate_https_trackers off")
                transfer(res, "https", https_url, https_url, args, validate_https=trusted)
            if "mixed" in which:
                transfer(res, "mixed", udp_url, http_url, args)
    finally:
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
    print(f"{res.passed} passed, {res.failed} failed")
    return 1 if res.failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        TMP.cleanup()
