#!/usr/bin/env python3
"""Compare WebTorrent trackers, following docs/benchmarking.md (issue 4, "What it must show", item 4).

Phase `throughput`: aquatic_ws_load_test (wss only) against shoal and aquatic_ws, both with TLS;
tracker pinned to one core (all its threads), load generator to the other, contenders alternated
A,B,A,B... for R rounds, the first W seconds of every run excluded. Reported: total responses/s
(announce responses + relayed offers + relayed answers + scrapes + errors, as the load tester counts
them) AND announce responses/s, each per tracker-CPU-second (totals alone are not comparable across
trackers that relay a different number of offers per announce).

Phase `idle`: N idle WebSocket connections (upgrade handshake done, nothing sent after) opened to
each tracker by a small asyncio client pinned to the load core, spread over 127.0.0.x source
addresses; the tracker's RSS before and after gives RSS delta / connections. Over wss and/or ws.

Run it through bench/ws-compare.sh; see bench/README.md. Standard library only.
"""
import argparse
import asyncio
import base64
import csv
import datetime
import os
import queue
import re
import shlex
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

REPORT_EVERY_S = 5  # aquatic_ws_load_test prints a report every 5 s; not configurable
CONTENDERS = ("shoal", "aquatic_ws", "shoal-alt")  # shoal-alt: shoal with --shoal-alt-ws lines on top


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--phases", default="throughput,idle", help="throughput,idle (default both, in that order)")
    p.add_argument("--contenders", default="shoal,aquatic_ws",
                   help="shoal,aquatic_ws[,shoal-alt] (run order; default shoal,aquatic_ws)")
    p.add_argument("--rounds", type=int, default=3, help="throughput rounds (default 3)")
    p.add_argument("--duration", type=int, default=20, help="seconds per run, multiple of 5 (default 20)")
    p.add_argument("--warmup", type=int, default=5, help="seconds excluded at the start, multiple of 5 (default 5)")
    p.add_argument("--idle", type=int, default=10000, help="idle connections per tracker (default 10000)")
    p.add_argument("--idle-modes", default="wss,ws", help="wss and/or ws for the idle phase (default wss,ws)")
    p.add_argument("--idle-sources", type=int, default=16,
                   help="spread idle connections over 127.0.0.2 .. 127.0.0.(N+1) (default 16)")
    p.add_argument("--shoal-ws", action="append", default=[], metavar="KEY=VALUE",
                   help="a line for shoal's [ws] section, e.g. max_torrents_per_connection=10000 (repeatable; "
                        "default: none, shoal's defaults)")
    p.add_argument("--shoal-alt-ws", action="append", default=[], metavar="KEY=VALUE",
                   help="contender shoal-alt (informational): shoal with these [ws] lines on top of --shoal-ws")
    p.add_argument("--load-log-level", default="error",
                   help="aquatic_ws_load_test's log_level (default error: at warn it prints every error response, "
                        "which costs the load generator and this script CPU)")
    p.add_argument("--shoal", default=os.environ.get("SHOAL_BIN", os.path.join(B.REPO, "target/release/shoal")))
    p.add_argument("--aquatic-ws", default=B.find_tool("AQUATIC_WS", "aquatic_ws"))
    p.add_argument("--load-test", default=B.find_tool("AQUATIC_WS_LOAD_TEST", "aquatic_ws_load_test"))
    p.add_argument("--port-base", type=int, default=25000, help="first port tried (below 32768; default 25000)")
    p.add_argument("--tracker-cpu", default="0")
    p.add_argument("--load-cpu", default="1")
    p.add_argument("--noisy", type=float, default=10.0)
    p.add_argument("--keep-noisy", action="store_true")
    p.add_argument("--out", default=None, help="output directory (default target/bench/ws-compare-TIMESTAMP)")
    # internal: the idle-connection client, run as a subprocess pinned to the load core
    p.add_argument("--idle-client", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--tls", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.idle_client:
        return a
    a.phases = [x.strip() for x in a.phases.split(",") if x.strip()]
    a.contenders = [x.strip() for x in a.contenders.split(",") if x.strip()]
    a.idle_modes = [x.strip() for x in a.idle_modes.split(",") if x.strip()]
    for x in a.phases:
        if x not in ("throughput", "idle"):
            p.error(f"unknown phase {x!r}")
    for x in a.contenders:
        if x not in CONTENDERS:
            p.error(f"unknown contender {x!r}")
    for x in a.idle_modes:
        if x not in ("wss", "ws"):
            p.error(f"unknown idle mode {x!r}")
    if a.duration % REPORT_EVERY_S or a.warmup % REPORT_EVERY_S or not 0 <= a.warmup < a.duration <= 600:
        p.error("--duration and --warmup must be multiples of 5 with 0 <= warmup < duration <= 600")
    if not 1 <= a.idle <= 60000:
        p.error("--idle must be 1..60000")
    return a


# ---------------------------------------------------------------- configs

SHOAL_CONFIG = """\
# written by bench/ws-compare.sh; everything not named here is shoal's default (shoal --print-config)
workers = 1

[udp]
listen = []

[http]
listen = [{http_listen}]

[https]
listen = [{https_listen}]
cert = "{cert}"
key = "{key}"

[state]
file = ""

[admin]
listen = []
{ws_section}"""

AQUATIC_WS_CONFIG = """\
# written by bench/ws-compare.sh; everything not named here is aquatic_ws 0.9.0's default
socket_workers = 1
swarm_workers = 1

[network]
address = "127.0.0.1:{port}"
enable_tls = {tls}
tls_certificate_path = "{cert}"
tls_private_key_path = "{key}"
"""

LOAD_TEST_CONFIG = """\
# written by bench/ws-compare.sh; everything not named here is aquatic_ws_load_test 0.9.0's default
# (16 connections, 10 offers per announce, 10,000 torrents, announces only)
server_address = "127.0.0.1:{port}"
log_level = "{log_level}"
num_workers = 1
duration = {duration}
# measure from the start; the script leaves out the reports of the warm-up itself
measure_after_max_connections_reached = false
"""


def shoal_ws_section(a, alt=False):
    kvs = a.shoal_ws + (a.shoal_alt_ws if alt else [])
    if not kvs:
        return ""
    lines = []
    for kv in kvs:
        k, _, v = kv.partition("=")
        lines.append(f"{k.strip()} = {v.strip()}")
    return "\n[ws]\n" + "\n".join(lines) + "\n"


def contender_command(name, a, port, tls, outdir, cert, key):
    mode = "wss" if tls else "ws"
    if name in ("shoal", "shoal-alt"):
        cfg = os.path.join(outdir, f"{name}-{mode}.toml")
        addr = f'"127.0.0.1:{port}"'
        with open(cfg, "w") as f:
            f.write(SHOAL_CONFIG.format(http_listen="" if tls else addr, https_listen=addr if tls else "",
                                        cert=cert if tls else "", key=key if tls else "",
                                        ws_section=shoal_ws_section(a, alt=name == "shoal-alt")))
        return [a.shoal, "--config", cfg]
    if name == "aquatic_ws":
        cfg = os.path.join(outdir, f"aquatic_ws-{mode}.toml")
        with open(cfg, "w") as f:
            f.write(AQUATIC_WS_CONFIG.format(port=port, tls="true" if tls else "false", cert=cert if tls else "",
                                             key=key if tls else ""))
        return [a.aquatic_ws, "-c", cfg]
    raise ValueError(name)


# ---------------------------------------------------------------- WebSocket handshake check

def upgrade_request(port):
    k = base64.b64encode(os.urandom(16)).decode()
    return (f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {k}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode()


def client_ssl():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def ws_check(port, tls, pid, timeout_s=10.0):
    """Open one WebSocket (upgrade handshake) until it succeeds; returns the status line or None."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not B.pid_alive(pid):
            return None
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            if tls:
                s = client_ssl().wrap_socket(s, server_hostname="localhost")
            s.sendall(upgrade_request(port))
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = s.recv(4096)
                if not chunk:
                    break
                head += chunk
            s.close()
            if head:
                return head.split(b"\r\n", 1)[0].decode("latin-1")
        except OSError:
            pass
        time.sleep(0.1)
    return None


# ---------------------------------------------------------------- throughput

def run_throughput(name, rnd, a, outdir, cert, key):
    port = B.pick_tcp_port(a.port_base)
    tag = f"throughput-r{rnd}-{name}"
    cmd = ["taskset", "-c", a.tracker_cpu] + contender_command(name, a, port, True, outdir, cert, key)
    lt_cfg = os.path.join(outdir, "load_test.toml")
    with open(lt_cfg, "w") as f:
        f.write(LOAD_TEST_CONFIG.format(port=port, duration=a.duration, log_level=a.load_log_level))
    lt_cmd = ["taskset", "-c", a.load_cpu, a.load_test, "-c", lt_cfg]
    row = {"phase": "throughput", "round": rnd, "contender": name, "port": port, "ok": 0, "note": ""}
    tracker_log = open(os.path.join(outdir, f"{tag}.tracker.log"), "w")
    lt_log = open(os.path.join(outdir, f"{tag}.load.log"), "w")
    tracker = loadgen = None
    try:
        B.log(f"throughput round {rnd}: {name} on 127.0.0.1:{port}: {' '.join(cmd)}")
        tracker = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=tracker_log, stderr=subprocess.STDOUT,
                                   env=B.child_env(), cwd=outdir, preexec_fn=B.raise_nofile)
        status = ws_check(port, True, tracker.pid)
        row["check"] = status or ""
        if not status or " 101" not in status:
            row["note"] = f"no WebSocket upgrade over TLS within 10 s ({status}); "
            return row
        loadgen = subprocess.Popen(lt_cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, env=B.child_env(), text=True, bufsize=1,
                                   preexec_fn=B.raise_nofile)
        lines = queue.Queue()

        def reader():
            for line in loadgen.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=reader, daemon=True).start()
        first, last = a.warmup // REPORT_EVERY_S, a.duration // REPORT_EVERY_S
        snaps, reports, errors = {}, [], Counter()
        if first == 0:
            snaps["start"] = B.snapshot(tracker.pid, loadgen.pid)
        deadline = time.monotonic() + a.duration + 60
        in_summary = False
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                break
            s = line.strip()
            if "received error response" in s:
                errors[s.split("received error response:", 1)[-1].strip()] += 1
                if sum(errors.values()) <= 20:
                    lt_log.write(line)
                continue
            lt_log.write(line)
            if s.startswith("# aquatic load test report"):
                in_summary = True
            if in_summary:
                continue
            if s.startswith("Requests out:"):
                reports.append({"requests": float(s.split()[2].split("/")[0])})
                n = len(reports)
                if n == first:
                    snaps["start"] = B.snapshot(tracker.pid, loadgen.pid)
                if n == last:
                    snaps["end"] = B.snapshot(tracker.pid, loadgen.pid)
                    row["rss_kib"] = B.proc_rss_kib(tracker.pid)
                    row["tracker_threads"], note = B.pinning_note(tracker.pid, a.tracker_cpu)
                    row["note"] += note
            elif reports and s.startswith("Responses in:"):
                reports[-1]["responses"] = float(s.split()[2].split("/")[0])
            elif reports and s.startswith("- ") and "responses:" in s:
                kind, val = s[2:].split("responses:")
                reports[-1][kind.strip().lower()] = float(val)
            elif reports and s.startswith("Active connections:"):
                reports[-1]["connections"] = int(s.split(":")[1])
        else:
            row["note"] += "load test did not finish in time; "
        if loadgen.poll() is None:
            B.stop(loadgen, "load test")
        if errors:
            row["note"] += f"{sum(errors.values())} error responses ({dict(errors.most_common(3))}); "
        if tracker.poll() is not None:
            row["note"] += f"tracker exited during the run (status {tracker.returncode}); "
            return row
        if "start" not in snaps or "end" not in snaps:
            row["note"] += f"incomplete load test output ({len(reports)} reports); "
            return row
        win = reports[first:last]
        mean = lambda k: statistics.mean(r.get(k, 0) for r in win)  # noqa: E731
        w = B.window(snaps["start"], snaps["end"])
        rate, ann = mean("responses"), mean("announce")
        cpu = w["tracker_cpu_s"]
        row.update({k: (round(v, 2) if isinstance(v, float) else v) for k, v in w.items()})
        row.update({
            "ok": 1,
            "responses_per_s": round(rate),
            "responses_per_cpu_s": round(rate * w["window_s"] / cpu) if cpu > 0 else "",
            "announce_per_s": round(ann),
            "announces_per_cpu_s": round(ann * w["window_s"] / cpu) if cpu > 0 else "",
            "offer_per_s": round(mean("offer")),
            "answer_per_s": round(mean("answer")),
            "scrape_per_s": round(mean("scrape")),
            "error_per_s": round(mean("error")),
            "requests_per_s": round(mean("requests")),
            "requests_per_cpu_s": round(mean("requests") * w["window_s"] / cpu) if cpu > 0 else "",
            "connections_min": min((r.get("connections", 0) for r in win), default=0),
            "connections_mean": round(mean("connections"), 1),
            "interval_rates": " ".join(str(round(r.get("responses", 0))) for r in win),
        })
        row["noisy"] = int(row["others_cpu_pct"] > a.noisy)
        if row["error_per_s"] > 0.01 * max(rate, 1):
            row["note"] += "more than 1% error responses; "
        return row
    finally:
        for proc, pname in ((loadgen, "load test"), (tracker, name)):
            if proc is not None:
                B.stop(proc, pname)
        tracker_log.close()
        lt_log.close()


# ---------------------------------------------------------------- idle connections

def idle_client_main(a):
    """Subprocess: open a.idle WebSocket connections, print OPEN ..., hold them until a line on
    stdin, print ALIVE ..., close them all."""
    B.raise_nofile(max(B.NOFILE, a.idle + 1000))

    async def run():
        ctx = client_ssl() if a.tls else None
        sem = asyncio.Semaphore(64)
        conns, fails = [], Counter()

        async def one(i):
            async with sem:
                src = f"127.0.0.{2 + i % a.idle_sources}"
                try:
                    r, w = await asyncio.wait_for(asyncio.open_connection(
                        "127.0.0.1", a.port, ssl=ctx, server_hostname="localhost" if ctx else None,
                        local_addr=(src, 0), limit=1 << 16), 15)
                    w.write(upgrade_request(a.port))
                    head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 15)
                    if head.split(b"\r\n", 1)[0].split(b" ")[1:2] != [b"101"]:
                        fails[head.split(b"\r\n", 1)[0].decode("latin-1")] += 1
                        w.close()
                        return
                    conns.append((r, w))
                except Exception as e:  # noqa: BLE001 - counted and reported
                    fails[type(e).__name__ + ": " + str(e)[:60]] += 1

        t0 = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(a.idle)))
        print(f"OPEN {len(conns)} FAILED {sum(fails.values())} SECONDS {time.monotonic() - t0:.1f} "
              f"{dict(fails.most_common(3))}", flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.readline)
        alive = sum(1 for r, w in conns if not w.is_closing() and not r.at_eof() and r.exception() is None)
        print(f"ALIVE {alive}", flush=True)
        for _, w in conns:
            w.close()
        await asyncio.sleep(0.5)

    asyncio.run(run())
    return 0


def fd_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def run_idle(name, mode, a, outdir, cert, key):
    tls = mode == "wss"
    port = B.pick_tcp_port(a.port_base)
    tag = f"idle-{mode}-{name}"
    cmd = ["taskset", "-c", a.tracker_cpu] + contender_command(name, a, port, tls, outdir, cert, key)
    row = {"phase": f"idle {mode}", "round": 1, "contender": name, "port": port, "ok": 0, "note": ""}
    tracker_log = open(os.path.join(outdir, f"{tag}.tracker.log"), "w")
    client_log = open(os.path.join(outdir, f"{tag}.client.log"), "w")
    tracker = client = None
    try:
        B.log(f"idle {mode}: {name} on 127.0.0.1:{port}: {' '.join(cmd)}")
        tracker = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=tracker_log, stderr=subprocess.STDOUT,
                                   env=B.child_env(), cwd=outdir, preexec_fn=B.raise_nofile)
        status = ws_check(port, tls, tracker.pid)
        if not status or " 101" not in status:
            row["note"] = f"no WebSocket upgrade within 10 s ({status}); "
            return row
        time.sleep(2)
        row["rss_before_kib"] = B.proc_rss_kib(tracker.pid)
        row["fds_before"] = fd_count(tracker.pid)
        ccmd = ["taskset", "-c", a.load_cpu, sys.executable, os.path.abspath(__file__), "--idle-client",
                "--port", str(port), "--idle", str(a.idle), "--idle-sources", str(a.idle_sources)] + \
            (["--tls"] if tls else [])
        client = subprocess.Popen(ccmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=client_log,
                                  env=B.child_env(), text=True, bufsize=1)
        got = queue.Queue()
        threading.Thread(target=lambda: [got.put(x) for x in client.stdout] + [got.put(None)], daemon=True).start()
        try:
            line = got.get(timeout=180)
        except queue.Empty:
            line = None
        if not line or not line.startswith("OPEN"):
            row["note"] += f"idle client did not report ({line!r}); "
            return row
        client_log.write(line)
        m = re.match(r"OPEN (\d+) FAILED (\d+) SECONDS ([\d.]+)", line)
        opened, failed = int(m.group(1)), int(m.group(2))
        time.sleep(3)  # let the tracker settle
        row["rss_after_kib"] = B.proc_rss_kib(tracker.pid)
        row["fds_after"] = fd_count(tracker.pid)
        client.stdin.write("close\n")
        client.stdin.flush()
        try:
            alive_line = got.get(timeout=30) or ""
        except queue.Empty:
            alive_line = ""
        client_log.write(alive_line)
        alive = int(alive_line.split()[1]) if alive_line.startswith("ALIVE") else -1
        client.wait(timeout=60)
        time.sleep(3)
        row["rss_closed_kib"] = B.proc_rss_kib(tracker.pid)
        row["fds_closed"] = fd_count(tracker.pid)
        if tracker.poll() is not None:
            row["note"] += f"tracker exited (status {tracker.returncode}); "
            return row
        delta = row["rss_after_kib"] - row["rss_before_kib"]
        row.update({
            "ok": 1, "opened": opened, "failed": failed, "open_seconds": float(m.group(3)), "alive_at_end": alive,
            "rss_delta_kib": delta,
            "kib_per_connection": round(delta / opened, 2) if opened else "",
        })
        if failed:
            row["note"] += f"{failed} connections failed: {line.split(' ', 6)[-1].strip()}; "
        if alive != opened:
            row["note"] += f"{opened - alive} connections closed by the tracker before the measurement ended; "
        return row
    finally:
        if client is not None and client.poll() is None:
            B.stop(client, "idle client")
        if tracker is not None:
            B.stop(tracker, name)
        tracker_log.close()
        client_log.close()


# ---------------------------------------------------------------- report

T_FIELDS = ["phase", "round", "contender", "port", "ok", "noisy", "window_s", "responses_per_s", "responses_per_cpu_s",
            "announce_per_s", "announces_per_cpu_s", "offer_per_s", "answer_per_s", "scrape_per_s", "error_per_s",
            "requests_per_s", "requests_per_cpu_s", "tracker_cpu_pct", "load_cpu_pct", "others_cpu_pct", "softirq_pct", "ksoftirqd_pct",
            "rss_kib", "tracker_threads", "connections_min", "connections_mean", "tcp_accepts_per_s",
            "tcp_out_rsts_per_s", "interval_rates", "check", "note"]
I_FIELDS = ["phase", "contender", "port", "ok", "opened", "failed", "open_seconds", "alive_at_end", "rss_before_kib",
            "rss_after_kib", "rss_delta_kib", "kib_per_connection", "rss_closed_kib", "fds_before", "fds_after",
            "fds_closed", "note"]


def summarize_throughput(rows, a):
    out = ["### throughput: aquatic_ws_load_test over wss", ""]
    lines, medians = B.table(rows, a.contenders, a.keep_noisy,
                             [("responses_per_s", "responses/s"),
                              ("responses_per_cpu_s", "responses per tracker CPU-s"),
                              ("announce_per_s", "announces/s"),
                              ("announces_per_cpu_s", "announces per tracker CPU-s"),
                              ("requests_per_s", "requests (messages in)/s"),
                              ("requests_per_cpu_s", "requests per tracker CPU-s")],
                             [("offer_per_s", "offers relayed/s (median)", "{:,.0f}"),
                              ("answer_per_s", "answers relayed/s (median)", "{:,.0f}"),
                              ("error_per_s", "errors/s (median)", "{:,.0f}"),
                              ("connections_mean", "open connections (load tester's count; it asks for 16), mean of reports (median)", "{:.1f}"),
                              ("tcp_accepts_per_s", "connections accepted/s (median)", "{:,.0f}"),
                              ("rss_kib", "RSS KiB (median)", "{:,.0f}")])
    out += lines + [""]
    for me in ("shoal", "shoal-alt"):
        if me not in medians or "aquatic_ws" not in medians:
            continue
        for key, label, bar in (("responses_per_cpu_s", "responses per tracker CPU-s", 1.2),
                                ("announces_per_cpu_s", "announces per tracker CPU-s", 1.2),
                                ("requests_per_cpu_s", "requests per tracker CPU-s", None),
                                ("responses_per_s", "responses/s", None),
                                ("announce_per_s", "announces/s", None)):
            s, q = medians[me].get(key), medians["aquatic_ws"].get(key)
            if s and q:
                verdict = "" if bar is None or me != "shoal" else \
                    f" (issue bar >= {bar}: {'met' if s / q >= bar else 'NOT met'})"
                out.append(f"- median {label}, {me} / aquatic_ws: **{s / q:.2f}**{verdict}")
    n = B.notes(rows, a.noisy, a.keep_noisy)
    if n:
        out += [""] + n
    return out + [""]


def summarize_idle(rows):
    out = ["### idle connections: RSS delta / connections", "",
           "| tracker | mode | opened (failed) | still open at the end | RSS before KiB | RSS after KiB "
           "| RSS delta / connection KiB | RSS after closing KiB | tracker fds before / after |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["ok"]:
            out.append(f"| {r['contender']} | {r['phase'].split()[1]} | {r['opened']:,} ({r['failed']}) "
                       f"| {r['alive_at_end']:,} | {r['rss_before_kib']:,} | {r['rss_after_kib']:,} "
                       f"| **{r['kib_per_connection']}** | {r['rss_closed_kib']:,} "
                       f"| {r['fds_before']} / {r['fds_after']} |")
        else:
            out.append(f"| {r['contender']} | {r['phase'].split()[1]} | FAILED: {r['note']} | | | | | | |")
    n = [f"{r['phase']} {r['contender']}: {r['note']}" for r in rows if r["note"] and r["ok"]]
    if n:
        out += ["", "Notes: " + "; ".join(n)]
    return out + [""]


def main():
    a = parse_args()
    if a.idle_client:
        return idle_client_main(a)
    B.set_log_prefix("ws-compare")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    for k in ("RUST_BACKTRACE", "RUST_LIB_BACKTRACE"):
        os.environ.pop(k, None)
    need = {c: {"shoal": a.shoal, "shoal-alt": a.shoal, "aquatic_ws": a.aquatic_ws}[c] for c in a.contenders}
    if "throughput" in a.phases:
        need["aquatic_ws_load_test"] = a.load_test
    for what, path in need.items():
        if not B.have(path):
            sys.exit(f"ws-compare: {what} binary not found: {path}")
    outdir = os.path.abspath(a.out or os.path.join(B.REPO, "target/bench",
                                                   "ws-compare-" + time.strftime("%Y%m%d-%H%M%S")))
    os.makedirs(outdir, exist_ok=True)
    cert, key = B.make_cert(outdir)
    B.log(f"output in {outdir}")
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    trows, irows = [], []
    if "throughput" in a.phases:
        with open(os.path.join(outdir, "throughput.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=T_FIELDS, extrasaction="ignore")
            w.writeheader()
            for rnd in range(1, a.rounds + 1):
                for name in a.contenders:
                    row = run_throughput(name, rnd, a, outdir, cert, key)
                    trows.append(row)
                    w.writerow(row)
                    f.flush()
                    if row["ok"]:
                        B.log(f"  {row['responses_per_s']:,} responses/s ({row['announce_per_s']:,} announces/s), "
                              f"tracker CPU {row['tracker_cpu_pct']}%, {row['responses_per_cpu_s']:,} per CPU-s "
                              f"({row['announces_per_cpu_s']:,} announces), load gen {row['load_cpu_pct']}%, "
                              f"others {row['others_cpu_pct']}%{' (NOISY)' if row['noisy'] else ''} {row['note']}")
                    else:
                        B.log(f"  FAILED: {row['note']}")
                    time.sleep(1)
    if "idle" in a.phases:
        with open(os.path.join(outdir, "idle.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=I_FIELDS, extrasaction="ignore")
            w.writeheader()
            for mode in a.idle_modes:
                for name in [c for c in a.contenders if c != "shoal-alt"]:
                    row = run_idle(name, mode, a, outdir, cert, key)
                    irows.append(row)
                    w.writerow(row)
                    f.flush()
                    if row["ok"]:
                        B.log(f"  opened {row['opened']:,} (failed {row['failed']}) in {row['open_seconds']} s; "
                              f"RSS {row['rss_before_kib']:,} -> {row['rss_after_kib']:,} KiB: "
                              f"{row['kib_per_connection']} KiB per connection {row['note']}")
                    else:
                        B.log(f"  FAILED: {row['note']}")
                    time.sleep(1)
    mach = B.machine()
    md = [f"# WebTorrent tracker comparison, {started}", "",
          f"Machine: {mach['nproc']} CPUs ({mach['cpu']}), kernel {mach['kernel']}. Tracker on CPU {a.tracker_cpu} "
          f"(all threads), load generator / idle client on CPU {a.load_cpu}.",
          f"Command: `bench/ws-compare.sh {' '.join(shlex.quote(x) for x in sys.argv[1:])}`", ""]
    if trows:
        md += [f"{a.rounds} rounds, contenders alternated; {a.duration} s runs, the first {a.warmup} s excluded "
               f"(rates are the mean of the load tester's 5-s reports after it, CPU over the same window).", ""]
        md += summarize_throughput(trows, a)
    if irows:
        md += [f"{a.idle:,} connections per tracker and mode, opened 64 at a time from 127.0.0.2..127.0.0."
               f"{a.idle_sources + 1}; each does the upgrade handshake and then sends nothing. RSS before: 2 s after "
               "the tracker answered its first upgrade; after: 3 s after the last connection opened.", ""]
        md += summarize_idle(irows)
    md += ["## Configs", "", "shoal (`shoal --config FILE`):", "```toml",
           SHOAL_CONFIG.format(http_listen='"127.0.0.1:PORT"  # ws (idle phase) only',
                               https_listen='"127.0.0.1:PORT"  # wss only', cert="OUTDIR/cert.pem",
                               key="OUTDIR/key.pem", ws_section=shoal_ws_section(a)).rstrip(), "```",
           ("shoal-alt (informational): the same with these [ws] lines on top: `" + "`, `".join(a.shoal_alt_ws) + "`"
            if "shoal-alt" in a.contenders else ""),
           "aquatic_ws (`aquatic_ws -c FILE`):", "```toml",
           AQUATIC_WS_CONFIG.format(port="PORT", tls="true  # false for the ws idle phase", cert="OUTDIR/cert.pem",
                                    key="OUTDIR/key.pem").rstrip(), "```",
           "aquatic_ws_load_test (`aquatic_ws_load_test -c FILE`):", "```toml",
           LOAD_TEST_CONFIG.format(port="PORT", duration=a.duration, log_level=a.load_log_level).rstrip(), "```",
           "TLS: `openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem -days 30 -subj /CN=localhost`",
           ""]
    for fname in ("throughput.csv", "idle.csv"):
        path = os.path.join(outdir, fname)
        if os.path.exists(path):
            md += [f"## Raw runs: {fname}", "", "```csv", open(path).read().rstrip(), "```", ""]
    text = "\n".join(md)
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    return 0 if any(r["ok"] for r in trows + irows) else 1


if __name__ == "__main__":
    sys.exit(main())
