"""What the libtorrent real-client tests share: their results and log, libtorrent sessions
with every peer source but the tracker off, torrents made from a random file, the alert
pump, the tracker under test as a child process, and one swarm's transfer (a seeder, a
leecher, the bytes compared, where the peers came from, a scrape).

A module, not a test: run.sh runs libtorrent_*.py only. It imports libtorrent, so a test
that must prepare OpenSSL's environment first (libtorrent_http.py's certificate) does so
before importing it. Each test names its own checks; the steps behind them live here once.
"""
import ctypes
import hashlib
import os
import select
import signal
import socket
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

try:
    import libtorrent as lt
except ImportError as e:
    test = os.path.splitext(os.path.basename(sys.argv[0]))[0]
    print(f"{test}: cannot import libtorrent ({e}); run with /usr/bin/python3 after "
          "`apt-get install -y python3-libtorrent`", file=sys.stderr)
    print("0 passed, 1 failed")
    sys.exit(1)


class Results:
    def __init__(self, expected=()):
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

    def summary(self):
        """Prints the last line run.sh reads; returns the exit status."""
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed else 0


def log(msg):
    print(f"  [{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def family(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def host_port(host, port):
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def free_port(host="127.0.0.1", kinds=(socket.SOCK_DGRAM,), first=20000):
    """A port below 32768 (outside the ephemeral range) that nothing is bound to, for
    every socket kind in `kinds` (UDP, or TCP and UDP)."""
    for port in range(first + os.getpid() % 5000, 32000):
        socks = [socket.socket(family(host), kind) for kind in kinds]
        try:
            for s in socks:
                s.bind((host, port))
            return port
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port")


def session(host="127.0.0.1", validate_https=None):
    """A session on `host` with DHT, LSD, UPnP, NAT-PMP and PEX off: peers can only come
    from the tracker. `validate_https` sets `validate_https_trackers` when given."""
    settings = {
        "listen_interfaces": host_port(host, 0),
        "enable_dht": False,
        "enable_lsd": False,
        "enable_upnp": False,
        "enable_natpmp": False,
        "allow_multiple_connections_per_ip": True,
        "announce_to_all_trackers": True,
        "announce_to_all_tiers": True,
        "ssrf_mitigation": False,
        "alert_mask": lt.alert.category_t.all_categories,
        # Every category is on (a verbose run logs them all), and a 4 MiB transfer posts
        # thousands of peer and piece alerts while a test is busy with its database: the
        # default queue (2,000) then drops alerts, a tracker announce among them. A large
        # queue keeps every alert; Pump.run logs any drop that still happens.
        "alert_queue_size": 1_000_000,
    }
    if validate_https is not None:
        settings["validate_https_trackers"] = validate_https
    # flags 0: no default plugins, so no ut_pex (and each torrent also gets disable_pex)
    ses = lt.session(settings, 0)
    ses.set_alert_fd(_alert_pipe()[1])
    return ses


# Every session writes a byte to this pipe when alerts wait in its queue (set_alert_fd), and
# Pump.run sleeps on it. Not the binding's `wait_for_alert`: Debian's 2.0.8 wraps the alert
# pointer it returns while the session's threads go on posting, and a queue that grows
# meanwhile leaves that pointer dangling; the Python process then dies of SIGSEGV (seen in
# gdb on 2026-12-07, about one run in six of the Gazelle test). One pipe for the process,
# never closed: a session may outlive any one test's objects, and must never write into a
# descriptor number reused since. Both ends are non-blocking: a full pipe drops the wake-up
# byte instead of stalling libtorrent's thread.
_ALERT_PIPE = None


def _alert_pipe():
    global _ALERT_PIPE
    if _ALERT_PIPE is None:
        r, w = os.pipe()
        os.set_blocking(r, False)
        os.set_blocking(w, False)
        _ALERT_PIPE = (r, w)
    return _ALERT_PIPE


def wait_for_alerts(timeout):
    """Sleeps until some session has alerts waiting, or `timeout` seconds."""
    r = _alert_pipe()[0]
    if select.select([r], [], [], timeout)[0]:
        try:
            while os.read(r, 4096):
                pass
        except BlockingIOError:
            pass


def write_payload(directory, size):
    """Writes `size` random bytes to DIRECTORY/payload.bin; returns (path, bytes)."""
    os.makedirs(directory, exist_ok=True)
    payload = os.urandom(size)
    path = os.path.join(directory, "payload.bin")
    with open(path, "wb") as f:
        f.write(payload)
    return path, payload


def make_torrent(path, url=None):
    """A v1 torrent of the file at `path`, naming `url` as its tracker when given."""
    fs = lt.file_storage()
    lt.add_files(fs, path)
    ct = lt.create_torrent(fs, 64 * 1024, flags=lt.create_torrent.v1_only)
    if url is not None:
        ct.add_tracker(url, 0)
    ct.set_creator("shoal real-client test")
    lt.set_piece_hashes(ct, os.path.dirname(path))
    return lt.torrent_info(lt.bencode(ct.generate()))


def add(ses, ti, save_path, seed, url=None):
    """Adds the torrent, started; with `url`, on a copy that has that one tracker added."""
    atp = lt.add_torrent_params()
    if url is None:
        atp.ti = ti
    else:
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
    """Drains the sessions' alerts, recording what the test waits for as plain data
    (a libtorrent alert object is only valid until the next pop_alerts call)."""

    def __init__(self, sessions, verbose):
        self.sessions = sessions
        self.verbose = verbose
        self.events = []  # (session name, alert type name, dict of fields)

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
                    if self.verbose or kind in ("tracker_error_alert", "scrape_failed_alert",
                                                "alerts_dropped_alert"):
                        log(f"{name}: {kind}: {a.message()}")
            found = until()
            if found is not None and found is not False:
                return found
            wait_for_alerts(0.05)
        return None

    def find(self, who, kind, pred=lambda f: True, since=0):
        for name, k, f in self.events[since:]:
            if name == who and k == kind and pred(f):
                return f
        return None


def die_with_parent():
    """In the child, before exec: ask Linux to SIGTERM it when the test process dies, so
    that a test killed (or crashed inside libtorrent) cannot leave a tracker running."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Tracker:
    """The tracker under test, a child process writing to DIR/tracker.log (or another
    `log_name`, for a test that starts it again); stopped by its PID. `start` returns None (after failing the check "tracker starts") if it cannot
    be spawned."""

    def __init__(self, proc, log_file):
        self.proc = proc
        self.log_file = log_file

    @classmethod
    def start(cls, res, cmd, log_dir, log_name="tracker.log"):
        env = dict(os.environ)
        env.pop("RUST_BACKTRACE", None)
        log("tracker: " + " ".join(cmd))
        log_file = open(os.path.join(log_dir, log_name), "w+")
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log_file,
                                    stderr=subprocess.STDOUT, env=env, preexec_fn=die_with_parent)
        except OSError as e:
            log_file.close()
            res.check("tracker starts", False, f"{cmd[0]}: {e}")
            return None
        return cls(proc, log_file)

    def stop(self, res):
        """Stops it (SIGTERM, then SIGKILL after 5 s); fails a check if it had already
        exited, and shows its output's tail when any check failed."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        else:
            res.check("tracker still running at the end", False, f"exit status {self.proc.returncode}")
        if res.failed:
            self.log_file.seek(0)
            tail = self.log_file.read()[-2000:]
            if tail.strip():
                log("tracker output (tail):\n" + tail)
        self.log_file.close()


def transfer(res, names, ti, payload, seeder, leecher, t_end, reply_wait, verbose):
    """One swarm. `seeder` and `leecher` are (session, save dir, tracker url), the url None
    where the torrent itself names the tracker. `names` gives each check's name:
    seed_reply, leech_reply, bytes, source, scrape; and seed_tracker and leech_tracker,
    checked only where a url was given. Returns early if the seeder gets no reply."""
    (seeder_ses, seed_dir, seed_url), (leecher_ses, leech_dir, leech_url) = seeder, leecher
    sp = seeder_ses.get_settings()
    off = all(not sp[k] for k in ("enable_dht", "enable_lsd", "enable_upnp", "enable_natpmp"))
    pump = Pump({"seeder": seeder_ses, "leecher": leecher_ses}, verbose)

    seed = add(seeder_ses, ti, seed_dir, seed=True, url=seed_url)
    if seed_url is not None:
        trackers = [t["url"] for t in seed.trackers()]
        res.check(names["seed_tracker"], trackers == [seed_url], f"{trackers}")
    got = pump.run(lambda: pump.find("seeder", "tracker_reply_alert"), min(t_end, time.monotonic() + reply_wait))
    if not res.check(names["seed_reply"], got is not None):
        return

    leech = add(leecher_ses, ti, leech_dir, seed=False, url=leech_url)
    if leech_url is not None:
        trackers = [t["url"] for t in leech.trackers()]
        res.check(names["leech_tracker"], trackers == [leech_url], f"{trackers}")
    got = pump.run(lambda: pump.find("leecher", "tracker_reply_alert", lambda f: f["num_peers"] >= 1),
                   min(t_end, time.monotonic() + reply_wait))
    res.check(names["leech_reply"], got is not None,
              f"{got['num_peers']} peer(s)" if got else "")

    download(res, names, pump, leech, leech_dir, payload, t_end, off)

    # Scrape: the seeder must be counted. Retry a few times, the tracker may not have the
    # leecher's completed event yet, and libtorrent may throttle scrapes.
    scraped = None
    for _ in range(5):
        if time.monotonic() >= t_end:
            break
        n0 = len(pump.events)
        leech.scrape_tracker(0)

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
    res.check(names["scrape"], scraped is not None and scraped["complete"] >= 1,
              f"complete={scraped['complete']} incomplete={scraped['incomplete']}" if scraped else "no scrape reply")

    for ses, h in ((leecher_ses, leech), (seeder_ses, seed)):
        ses.remove_torrent(h)


def download(res, names, pump, leech, leech_dir, payload, t_end, off):
    """Waits (until `t_end`) for the leecher `leech` to finish, then checks names["bytes"]
    (its file equals `payload`) and names["source"] (its peers came from the tracker, and
    `off`: the other peer sources are off). Returns the monotonic time it was seen finished,
    or None."""
    # Watch the leecher's peers while it downloads: where did they come from?
    sources = set()

    def done():
        for p in leech.get_peer_info():
            sources.add(p.source)
        st = leech.status()
        return st.is_seeding and st.state == lt.torrent_status.seeding

    finished = pump.run(done, t_end)
    finished_at = time.monotonic() if finished else None
    data_ok = False
    if finished:
        leech.flush_cache()
        pump.run(lambda: pump.find("leecher", "cache_flushed_alert"), min(t_end, time.monotonic() + 10))
        with open(os.path.join(leech_dir, "payload.bin"), "rb") as f:
            got_bytes = f.read()
        data_ok = got_bytes == payload
        detail = (f"sha256 {hashlib.sha256(got_bytes).hexdigest()[:16]} vs "
                  f"{hashlib.sha256(payload).hexdigest()[:16]}, {len(got_bytes)} bytes")
    else:
        st = leech.status()
        detail = f"not finished in time: state {st.state}, progress {st.progress:.2%}, {st.num_peers} peers"
    res.check(names["bytes"], finished and data_ok, detail)

    from_tracker = any(s & lt.peer_info.tracker for s in sources)
    other = any(s & (lt.peer_info.dht | lt.peer_info.pex | lt.peer_info.lsd) for s in sources)
    res.check(names["source"], from_tracker and not other and off, f"peer source flags seen: {sorted(sources)}")
    return finished_at
