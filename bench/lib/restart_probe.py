#!/usr/bin/env python3
"""How fast a UDP tracker is back: starts the tracker command, sends a BEP 15 connect and
announce (from --cpu; each try waits up to 20 ms for its answer, a try sent before the port is bound is lost, 5 ms between tries) until an
announce is answered, waits for a log line that
says a background load ended (--loaded, a regular expression, optional), reads VmRSS, sends
SIGTERM (after moving the tracker's threads to --sigterm-cpus, if given) and times the
exit. Prints and writes (--json) the times in seconds from exec.

    restart_probe.py --port 23456 --log run.log --json restart.json [--loaded REGEX] -- CMD...

Every loop is bounded: 120 s for the first answer, --load-timeout for the log line, 120 s
for the exit (then SIGKILL). Loopback only.
"""
import argparse
import json
import os
import re
import socket
import struct
import subprocess
import sys
import time

PROTOCOL_ID = 0x41727101980


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--loaded", help="regular expression of the log line that ends the load")
    ap.add_argument("--load-timeout", type=float, default=300.0)
    ap.add_argument("--cpu", type=int, default=1)
    ap.add_argument("--sigterm-cpus", help="CPUs (a list such as 0,1) every thread of the "
                    "tracker is moved to before SIGTERM; default: left where they are")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    try:
        os.sched_setaffinity(0, {args.cpu})
    except OSError:
        pass
    addr = ("127.0.0.1", args.port)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    log = open(args.log, "w")
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)

    def ask(packet, action, tid):
        """Sends `packet`, then waits up to 20 ms for the answer with this action and
        transaction id (a late answer to an earlier try is read and passed over): a loaded
        machine's slow answer is still an answer, timed when it arrives."""
        try:
            s.sendto(packet, addr)
        except OSError:
            return None
        until = time.monotonic() + 0.02
        while (left := until - time.monotonic()) > 0:
            s.settimeout(left)
            try:
                d, _ = s.recvfrom(4096)
            except (socket.timeout, ConnectionRefusedError):
                return None
            if len(d) >= 8 and struct.unpack(">II", d[:8]) == (action, tid):
                return d
        return None

    result = {"cmd": cmd, "first_answer_s": None, "loaded_s": None, "rss_kib": None,
              "exit_s": None, "status": None}
    tid = 1
    while time.monotonic() - t0 < 120 and p.poll() is None:
        tid += 1
        d = ask(struct.pack(">QII", PROTOCOL_ID, 0, tid), 0, tid)
        if d is None or len(d) < 16:
            time.sleep(0.005)
            continue
        tid += 1
        announce = d[8:16] + struct.pack(">II", 1, tid) + b"\x77" * 20 + b"-PROBE-" + b"0" * 13 \
            + struct.pack(">QQQIIIiH", 0, 1, 0, 2, 0, 7, 50, 6881)
        if ask(announce, 1, tid) is not None:
            result["first_answer_s"] = time.monotonic() - t0
            break
    if args.loaded and p.poll() is None:
        pattern = re.compile(args.loaded)
        while time.monotonic() - t0 < args.load_timeout and p.poll() is None:
            with open(args.log, errors="replace") as f:
                if pattern.search(f.read()):
                    result["loaded_s"] = time.monotonic() - t0
                    break
            time.sleep(0.01)
    if p.poll() is None:
        time.sleep(1)
        try:
            with open(f"/proc/{p.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS"):
                        result["rss_kib"] = int(line.split()[1])
        except OSError:
            pass
        if args.sigterm_cpus:
            cpus = {int(c) for c in args.sigterm_cpus.split(",")}
            for task in os.listdir(f"/proc/{p.pid}/task"):
                try:
                    os.sched_setaffinity(int(task), cpus)
                except OSError:
                    pass
        t1 = time.monotonic()
        p.terminate()
        try:
            result["status"] = p.wait(timeout=120)
            result["exit_s"] = time.monotonic() - t1
        except subprocess.TimeoutExpired:
            p.kill()
            result["status"] = p.wait()
    else:
        result["status"] = p.returncode
    print(json.dumps(result))
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    return 0 if result["first_answer_s"] is not None else 1


if __name__ == "__main__":
    sys.exit(main())
