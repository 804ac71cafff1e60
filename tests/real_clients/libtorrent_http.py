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
import os
import socket
import subprocess
import sys
import tempfile
import time

TMP = tempfile.TemporaryDirectory(prefix="shoal-lt-http-")
CERT = os.path.join(TMP.name, "cert.pem")
KEY = os.path.join(TMP.name, "key.pem")

# The certificate must exist and be named before libtorrent (OpenSSL) is loaded.
subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-keyout", KEY, "-out", CERT, "-days", "2", "-subj", "/CN=127.0.0.1",
                "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
os.environ["SSL_CERT_FILE"] = CERT

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from lt_swarm import REPO, Pump, Results, Tracker, add, free_port, log, make_torrent, session, transfer, \
    write_payload  # noqa: E402

TCP_AND_UDP = (socket.SOCK_STREAM, socket.SOCK_DGRAM)


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


def swarm(res, label, seed_url, leech_url, args, validate_https=True):
    """One swarm: a seeder on seed_url, a leecher on leech_url."""
    t_end = time.monotonic() + args.timeout
    base = os.path.join(TMP.name, label)
    seed_dir, leech_dir = os.path.join(base, "seed"), os.path.join(base, "leech")
    os.makedirs(leech_dir)
    path, payload = write_payload(seed_dir, args.size_mib << 20)
    ti = make_torrent(path)
    log(f"{label}: torrent {ti.info_hashes().v1}, seeder on {seed_url}, leecher on {leech_url}")
    names = {
        "seed_tracker": f"{label}: seeder's only tracker is {seed_url}",
        "seed_reply": f"{label}: seeder gets a tracker reply",
        "leech_tracker": f"{label}: leecher's only tracker is {leech_url}",
        "leech_reply": f"{label}: leecher gets a tracker reply with >= 1 peer",
        "bytes": f"{label}: leecher downloads the file and its bytes equal the seed's",
        "source": f"{label}: leecher's peers came from the tracker",
        "scrape": f"{label}: scrape reports >= 1 seeder",
    }
    seeder = (session(validate_https=validate_https), seed_dir, seed_url)
    leecher = (session(validate_https=validate_https), leech_dir, leech_url)
    transfer(res, names, ti, payload, seeder, leecher, t_end, 20, args.verbose)


def https_trusted_by_libtorrent(url, args):
    """Whether a libtorrent session with certificate validation on gets a reply from the
    HTTPS tracker (i.e. it trusts our self-signed certificate via SSL_CERT_FILE)."""
    ses = session(validate_https=True)
    d = os.path.join(TMP.name, "probe")
    path, _ = write_payload(d, 65536)
    ti = make_torrent(path)
    h = add(ses, ti, d, seed=True, url=url)
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
    port, tls_port = free_port(kinds=TCP_AND_UDP, first=21000), None
    while tls_port is None or tls_port == port:
        tls_port = free_port(kinds=TCP_AND_UDP, first=21000) + 1
    shoal = os.environ.get("SHOAL_BIN", os.path.join(REPO, "target/release/shoal"))
    cmd = [shoal, "--udp", f"127.0.0.1:{port}", "--http", f"127.0.0.1:{port}",
           "--https", f"127.0.0.1:{tls_port}", "--tls-cert", CERT, "--tls-key", KEY, "--workers", "1"]
    tracker = Tracker.start(res, cmd, TMP.name)
    if tracker is None:
        return res.summary()
    try:
        if res.check("tracker accepts TCP on the HTTP and HTTPS ports",
                     wait_for_tcp(port, tracker.proc, 10) and wait_for_tcp(tls_port, tracker.proc, 10)):
            http_url = f"http://127.0.0.1:{port}/announce"
            https_url = f"https://127.0.0.1:{tls_port}/announce"
            udp_url = f"udp://127.0.0.1:{port}/announce"
            if "http" in which:
                swarm(res, "http", http_url, http_url, args)
            if "https" in which:
                trusted, how = https_trusted_by_libtorrent(https_url, args)
                if trusted:
                    res.check("https: libtorrent trusts the self-signed certificate "
                              "(validation on, SSL_CERT_FILE)", True)
                else:
                    log(f"https: validation on failed ({how}); retrying with validate_https_trackers off")
                swarm(res, "https", https_url, https_url, args, validate_https=trusted)
            if "mixed" in which:
                swarm(res, "mixed", udp_url, http_url, args)
    finally:
        tracker.stop(res)
    return res.summary()


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        TMP.cleanup()
