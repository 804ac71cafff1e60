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
import os
import shlex
import signal
import socket
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from lt_swarm import REPO, Results, Tracker, free_port, host_port, log, make_torrent, session, transfer, \
    write_payload  # noqa: E402

HOST = "127.0.0.1"  # or "::1" with --ipv6


def udp_connect_ok(port, proc, timeout_s):
    """Send BEP 15 connect requests until a matching connect response arrives."""
    s = socket.socket(socket.AF_INET6 if ":" in HOST else socket.AF_INET, socket.SOCK_DGRAM)
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
    port = args.port or free_port(HOST)
    url = f"udp://{host_port(HOST, port)}/announce"

    if args.aquatic_udp:
        cfg = os.path.join(tmp.name, "aquatic_udp.toml")
        with open(cfg, "w") as f:
            f.write(f'socket_workers = 1\nlog_level = "warn"\n[network]\naddress = "{host_port(HOST, port)}"\n')
        cmd = [args.aquatic_udp, "-c", cfg]
    elif args.tracker_cmd:
        cmd = shlex.split(args.tracker_cmd.replace("{port}", str(port)))
    else:
        shoal = os.environ.get("SHOAL_BIN", os.path.join(REPO, "target/release/shoal"))
        cmd = [shoal, "--udp", host_port(HOST, port)]
    tracker = Tracker.start(res, cmd, tmp.name)
    if tracker is None:
        return res.summary()
    try:
        run(args, res, tmp.name, url, port, tracker.proc, t_end)
    finally:
        res.not_reached()
        tracker.stop(res)
        tmp.cleanup()
    return res.summary()


C_CONNECT = "tracker answers a BEP 15 connect"
C_V1 = "torrent is v1-only with the one UDP tracker"
C_SEED_REPLY = "seeder gets a tracker reply"
C_LEECH_REPLY = "leecher gets a tracker reply with >= 1 peer"
C_BYTES = "leecher downloads the file and its bytes equal the seed's"
C_SOURCE = "leecher's peer came from the tracker (DHT/LSD/UPnP/NAT-PMP/PEX off)"
C_SCRAPE = "scrape reports >= 1 seeder"
CHECKS = [C_CONNECT, C_V1, C_SEED_REPLY, C_LEECH_REPLY, C_BYTES, C_SOURCE, C_SCRAPE]


def run(args, res, tmp, url, port, tracker, t_end):
    if not res.check(C_CONNECT, udp_connect_ok(port, tracker, 10), host_port(HOST, port)):
        return

    seed_dir, leech_dir = os.path.join(tmp, "seed"), os.path.join(tmp, "leech")
    os.makedirs(leech_dir)
    path, payload = write_payload(seed_dir, args.size_mib << 20)
    ti = make_torrent(path, url)
    trackers = [t.url for t in ti.trackers()]
    res.check(C_V1, ti.info_hashes().has_v1() and not ti.info_hashes().has_v2() and trackers == [url],
              f"trackers {trackers}")
    log(f"torrent {ti.info_hashes().v1} ({args.size_mib} MiB, {ti.num_pieces()} pieces), tracker {url}")

    names = {"seed_reply": C_SEED_REPLY, "leech_reply": C_LEECH_REPLY, "bytes": C_BYTES, "source": C_SOURCE,
             "scrape": C_SCRAPE}
    transfer(res, names, ti, payload, (session(HOST), seed_dir, None), (session(HOST), leech_dir, None),
             t_end, 30, args.verbose)


if __name__ == "__main__":
    sys.exit(main())
