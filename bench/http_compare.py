#!/usr/bin/env python3
"""Compare HTTP(S) trackers, following docs/benchmarking.md: tracker pinned to one core (all its
threads), load generator to the other, contenders alternated A,B,A,B... for R rounds, the first W
seconds of every run excluded from the CPU figures, tracker CPU from /proc/PID/stat over the steady
window, the CPU of everything else from /proc/stat so noisy runs are flagged (and dropped).

Scenarios (issue 3, "What it must show", item 4):
  keepalive  aquatic_http_load_test, plain HTTP, keep-alive: shoal vs aquatic_http
  close      wrk -H 'Connection: close' on one fixed announce URL: shoal and aquatic_http with
             keep_alive = false, and Debian's opentracker (the URL's info hash whitelisted)
  tls        aquatic_http_load_test over TLS, keep-alive: shoal vs aquatic_http

Run it through bench/http-compare.sh; see bench/README.md. Standard library only.
"""
import argparse
import csv
import datetime
import hashlib
import http.client
import os
import queue
import re
import shlex
import signal
import ssl
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as B  # noqa: E402

REPORT_EVERY_S = 5  # aquatic_http_load_test prints a report every 5 s; not configurable
SCENARIOS = {
    "keepalive": {"contenders": ["shoal", "aquatic_http"], "load": "aquatic", "tls": False, "keep_alive": True,
                  "bar": ("shoal", "aquatic_http", 3.0)},
    "close": {"contenders": ["shoal", "aquatic_http", "opentracker"], "load": "wrk", "tls": False,
              "keep_alive": False, "bar": ("shoal", "opentracker", 1.0)},
    "tls": {"contenders": ["shoal", "aquatic_http"], "load": "aquatic", "tls": True, "keep_alive": True,
            "bar": ("shoal", "aquatic_http", 1.2)},
}
TITLES = {
    "keepalive": "HTTP keep-alive, aquatic_http_load_test",
    "close": "HTTP without keep-alive, wrk -H 'Connection: close', fixed announce URL",
    "tls": "HTTPS keep-alive, aquatic_http_load_test with TLS",
}

# the fixed announce of the `close` scenario: a binary info hash, every byte percent-encoded
FIXED_INFO_HASH = hashlib.sha1(b"shoal http benchmark").digest()
FIXED_PEER_ID = b"-SB0001-httpbench001"
FIXED_QUERY = ("info_hash=" + urllib.parse.quote_from_bytes(FIXED_INFO_HASH, safe="")
               + "&peer_id=" + urllib.parse.quote_from_bytes(FIXED_PEER_ID, safe="")
               + "&port=6881&uploaded=0&downloaded=0&left=0&compact=1")


def fixed_path():
    return "/announce?" + FIXED_QUERY


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenarios", default="keepalive,close,tls",
                   help="comma-separated subset of keepalive,close,tls, in run order (default: all)")
    p.add_argument("--contenders", default=None,
                   help="only these contenders (comma-separated; default: each scenario's own)")
    p.add_argument("--rounds", type=int, default=3, help="rounds per scenario (default 3)")
    p.add_argument("--duration", type=int, default=20, help="seconds per run, multiple of 5 (default 20)")
    p.add_argument("--warmup", type=int, default=5, help="seconds excluded at the start, multiple of 5 (default 5)")
    p.add_argument("--wrk-connections", type=int, default=64, help="wrk -c (default 64)")
    p.add_argument("--shoal", default=os.environ.get("SHOAL_BIN", os.path.join(B.REPO, "target/release/shoal")),
                   help="shoal binary (env SHOAL_BIN; default target/release/shoal)")
    p.add_argument("--aquatic-http", default=B.find_tool("AQUATIC_HTTP", "aquatic_http"))
    p.add_argument("--load-test", default=B.find_tool("AQUATIC_HTTP_LOAD_TEST", "aquatic_http_load_test"))
    p.add_argument("--wrk", default=B.find_tool("WRK", "wrk"))
    p.add_argument("--opentracker", default=B.find_tool("OPENTRACKER", "opentracker"))
    p.add_argument("--port-base", type=int, default=24000, help="first port tried (below 32768; default 24000)")
    p.add_argument("--tracker-cpu", default="0", help="CPU list for the tracker (default 0)")
    p.add_argument("--load-cpu", default="1", help="CPU list for the load generator (default 1)")
    p.add_argument("--noisy", type=float, default=10.0,
                   help="flag a run when other processes used more than this %% of one core (default 10)")
    p.add_argument("--keep-noisy", action="store_true", help="keep noisy runs in the summary (default: drop them)")
    p.add_argument("--out", default=None, help="output directory (default target/bench/http-compare-TIMESTAMP)")
    a = p.parse_args()
    a.scenarios = [s.strip() for s in a.scenarios.split(",") if s.strip()]
    for s in a.scenarios:
        if s not in SCENARIOS:
            p.error(f"unknown scenario {s!r}")
    a.only = None if a.contenders is None else {c.strip() for c in a.contenders.split(",") if c.strip()}
    if not 1 <= a.rounds <= 100:
        p.error("--rounds must be 1..100")
    if a.duration % REPORT_EVERY_S or a.warmup % REPORT_EVERY_S or not 0 <= a.warmup < a.duration <= 600:
        p.error("--duration and --warmup must be multiples of 5 with 0 <= warmup < duration <= 600")
    if not 1024 <= a.port_base < 32768 - 200:
        p.error("--port-base must be in 1024..32567")
    return a


def contenders_of(scn, a):
    return [c for c in SCENARIOS[scn]["contenders"] if a.only is None or c in a.only]


# ---------------------------------------------------------------- configs

SHOAL_CONFIG = """\
# written by bench/http-compare.sh; everything not named here is shoal's default (shoal --print-config)
workers = 1

[udp]
listen = []

[http]
listen = [{http_listen}]
keep_alive = {keep_alive}

[https]
listen = [{https_listen}]
cert = "{cert}"
key = "{key}"

[state]
file = ""

[admin]
listen = []
"""

AQUATIC_HTTP_CONFIG = """\
# written by bench/http-compare.sh; everything not named here is aquatic_http 0.9.0's default
socket_workers = 1
swarm_workers = 1

[network]
address = "127.0.0.1:{port}"
keep_alive = {keep_alive}
enable_tls = {tls}
tls_certificate_path = "{cert}"
tls_private_key_path = "{key}"
"""

LOAD_TEST_CONFIG = """\
# written by bench/http-compare.sh; everything not named here is aquatic_http_load_test 0.9.0's default
# (128 connections, 10,000 torrents, announces only, numwant unset)
server_address = "127.0.0.1:{port}"
num_workers = 1
duration = {duration}
keep_alive = true
enable_tls = {tls}
"""


def toml_bool(b):
    return "true" if b else "false"


def contender_command(name, scn, a, port, outdir, cert, key):
    sc = SCENARIOS[scn]
    tls = sc["tls"]
    if name == "shoal":
        cfg = os.path.join(outdir, f"shoal-{scn}.toml")
        addr = f'"127.0.0.1:{port}"'
        with open(cfg, "w") as f:
            f.write(SHOAL_CONFIG.format(http_listen="" if tls else addr, https_listen=addr if tls else "",
                                        keep_alive=toml_bool(sc["keep_alive"]), cert=cert if tls else "",
                                        key=key if tls else ""))
        return [a.shoal, "--config", cfg]
    if name == "aquatic_http":
        cfg = os.path.join(outdir, f"aquatic_http-{scn}.toml")
        with open(cfg, "w") as f:
            f.write(AQUATIC_HTTP_CONFIG.format(port=port, keep_alive=toml_bool(sc["keep_alive"]),
                                               tls=toml_bool(tls), cert=cert if tls else "",
                                               key=key if tls else ""))
        return [a.aquatic_http, "-c", cfg]
    if name == "opentracker":
        # Debian's build is whitelist-only; it chroots to -d and runs as -u after binding, so the
        # whitelist is given relative to the output directory (its cwd and chroot)
        with open(os.path.join(outdir, "whitelist.txt"), "w") as f:
            f.write(FIXED_INFO_HASH.hex() + "\n")
        return [a.opentracker, "-i", "127.0.0.1", "-p", str(port), "-P", str(port), "-d", outdir,
                "-u", "nobody", "-w", "whitelist.txt"]
    raise ValueError(name)


def opentracker_display(port="PORT"):
    return (f"opentracker -i 127.0.0.1 -p {port} -P {port} -d OUTDIR -u nobody -w whitelist.txt "
            f"(whitelist.txt: {FIXED_INFO_HASH.hex()})")


# ---------------------------------------------------------------- checks

def http_check(port, tls, pid, timeout_s=10.0):
    """GET the fixed announce URL until the tracker answers; returns (status, body) or (None, err)."""
    deadline = time.monotonic() + timeout_s
    err = "no answer"
    while time.monotonic() < deadline:
        if not B.pid_alive(pid):
            return None, "tracker exited"
        try:
            if tls:
                ctx = ssl.create_default_context()
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
                c = http.client.HTTPSConnection("127.0.0.1", port, timeout=2, context=ctx)
            else:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", fixed_path())
            r = c.getresponse()
            body = r.read()
            c.close()
            return r.status, body
        except (OSError, http.client.HTTPException) as e:
            err = repr(e)
            time.sleep(0.1)
    return None, err


def body_ok(status, body):
    return status == 200 and isinstance(body, bytes) and body.startswith(b"d") and b"failure reason" not in body


# ---------------------------------------------------------------- runs

def run_aquatic_load(row, a, tracker, port, tls, outdir, tag):
    lt_cfg = os.path.join(outdir, f"load_test-{'tls' if tls else 'plain'}.toml")
    with open(lt_cfg, "w") as f:
        f.write(LOAD_TEST_CONFIG.format(port=port, duration=a.duration, tls=toml_bool(tls)))
    cmd = ["taskset", "-c", a.load_cpu, a.load_test, "-c", lt_cfg]
    lt_log = open(os.path.join(outdir, f"{tag}.load.log"), "w")
    loadgen = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=B.child_env(), text=True, bufsize=1, preexec_fn=B.raise_nofile)
    try:
        lines = queue.Queue()

        def reader():
            for line in loadgen.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=reader, daemon=True).start()
        first, last = a.warmup // REPORT_EVERY_S, a.duration // REPORT_EVERY_S
        snaps, reports, failures = {}, [], Counter()
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
            if s.startswith("failure response:"):
                failures[s.split("reason:", 1)[-1].strip()] += 1
                if sum(failures.values()) <= 20:
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
        else:
            row["note"] += "load test did not finish in time; "
        if loadgen.poll() is None:
            B.stop(loadgen, "load test")
        if failures:
            row["note"] += f"{sum(failures.values())} failure responses ({dict(failures.most_common(3))}); "
        if "start" not in snaps or "end" not in snaps:
            row["note"] += f"incomplete load test output ({len(reports)} reports); "
            return
        win = reports[first:last]
        rate = statistics.mean(r.get("responses", 0) for r in win)
        w = B.window(snaps["start"], snaps["end"])
        row.update({k: (round(v, 2) if isinstance(v, float) else v) for k, v in w.items()})
        row.update({
            "ok": 1,
            "responses_per_s": round(rate),
            "responses_per_cpu_s": round(rate * w["window_s"] / w["tracker_cpu_s"]) if w["tracker_cpu_s"] > 0 else "",
            "announce_per_s": round(statistics.mean(r.get("announce", 0) for r in win)),
            "failure_per_s": round(statistics.mean(r.get("failure", 0) for r in win)),
            "requests_per_s": round(statistics.mean(r.get("requests", 0) for r in win)),
            "interval_rates": " ".join(str(round(r.get("responses", 0))) for r in win),
            "rate_from": f"mean of the load tester's 5-s reports {first + 1}..{last}",
        })
    finally:
        if loadgen.poll() is None:
            B.stop(loadgen, "load test")
        lt_log.close()


WRK_TOTAL = re.compile(r"(\d+) requests in ([\d.]+)(us|ms|s|m|h),")
WRK_RPS = re.compile(r"Requests/sec:\s+([\d.]+)")
WRK_NON2XX = re.compile(r"Non-2xx or 3xx responses:\s+(\d+)")
WRK_SOCKERR = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
WRK_PCT = re.compile(r"^\s*(50|75|90|99)%\s+([\d.]+)(us|ms|s)\s*$")
UNIT_S = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def wrk_command(a, port):
    return [a.wrk, "-t1", f"-c{a.wrk_connections}", f"-d{a.duration}s", "--latency", "-H", "Connection: close",
            f"http://127.0.0.1:{port}{fixed_path()}"]


def run_wrk(row, a, tracker, port, outdir, tag):
    """wrk cannot leave out a warm-up: its rate is over the whole run (requests / duration). The
    tracker's CPU is taken over the steady window (from `warmup` s after wrk starts to wrk's exit),
    and, as a cross-check, over the whole run, where responses per CPU-s = wrk's total / CPU."""
    cmd = ["taskset", "-c", a.load_cpu] + wrk_command(a, port)
    out_path = os.path.join(outdir, f"{tag}.load.log")
    out = open(out_path, "w")
    loadgen = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                               env=B.child_env(), preexec_fn=B.raise_nofile)
    t0 = time.monotonic()
    try:
        s0 = B.snapshot(tracker.pid, loadgen.pid)
        time.sleep(max(0.0, t0 + a.warmup - time.monotonic()))
        sw = B.snapshot(tracker.pid, loadgen.pid)
        if not B.wait_exit_unreaped(loadgen.pid, a.duration + 30):
            row["note"] += "wrk did not finish in time; "
            return
        try:
            s1 = B.snapshot(tracker.pid, loadgen.pid)  # wrk is a zombie: its stat still has its CPU times
        except OSError:
            row["note"] += "could not read wrk's final CPU; "
            return
        row["rss_kib"] = B.proc_rss_kib(tracker.pid)
        row["tracker_threads"], note = B.pinning_note(tracker.pid, a.tracker_cpu)
        row["note"] += note
        loadgen.wait(timeout=5)
    finally:
        if loadgen.poll() is None:
            B.stop(loadgen, "wrk")
        out.close()
    text = open(out_path).read()
    m, rps = WRK_TOTAL.search(text), WRK_RPS.search(text)
    if not m or not rps:
        row["note"] += "could not parse wrk's output; "
        return
    total = int(m.group(1))
    non2xx = int(WRK_NON2XX.search(text).group(1)) if WRK_NON2XX.search(text) else 0
    se = WRK_SOCKERR.search(text)
    pct = {}
    for line in text.splitlines():
        mm = WRK_PCT.match(line)
        if mm:
            pct[mm.group(1)] = float(mm.group(2)) * UNIT_S[mm.group(3)] * 1000
    w = B.window(sw, s1)
    whole = B.window(s0, s1)
    rate = float(rps.group(1))
    row.update({k: (round(v, 2) if isinstance(v, float) else v) for k, v in w.items()})
    row.update({
        "ok": 1,
        "responses_per_s": round(rate),
        "responses_per_cpu_s": round(rate * w["window_s"] / w["tracker_cpu_s"]) if w["tracker_cpu_s"] > 0 else "",
        "whole_run_per_cpu_s": round(total / whole["tracker_cpu_s"]) if whole["tracker_cpu_s"] > 0 else "",
        "whole_run_tracker_cpu_pct": whole["tracker_cpu_pct"],
        "total_responses": total,
        "non2xx": non2xx,
        "socket_errors": "" if not se else "connect {} read {} write {} timeout {}".format(*se.groups()),
        "latency_p50_ms": round(pct["50"], 3) if "50" in pct else "",
        "latency_p99_ms": round(pct["99"], 3) if "99" in pct else "",
        "rate_from": "wrk Requests/sec over the whole run",
    })
    if non2xx:
        row["note"] += f"{non2xx} non-2xx responses; "
    if se and any(int(x) for x in se.groups()):
        row["note"] += f"wrk socket errors: {row['socket_errors']}; "


def one_run(scn, name, rnd, a, outdir, cert, key):
    sc = SCENARIOS[scn]
    port = B.pick_tcp_port(a.port_base, also_udp=(name == "opentracker"))
    tag = f"{scn}-r{rnd}-{name}"
    cmd = ["taskset", "-c", a.tracker_cpu] + contender_command(name, scn, a, port, outdir, cert, key)
    row = {"scenario": scn, "round": rnd, "contender": name, "port": port, "ok": 0, "note": ""}
    tracker_log = open(os.path.join(outdir, f"{tag}.tracker.log"), "w")
    tracker = None
    try:
        B.log(f"{scn} round {rnd}: {name} on 127.0.0.1:{port}: {' '.join(cmd)}")
        tracker = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=tracker_log, stderr=subprocess.STDOUT,
                                   env=B.child_env(), cwd=outdir, preexec_fn=B.raise_nofile)
        if not B.wait_tcp(port, tracker.pid):
            row["note"] = "tracker did not accept connections within 10 s"
            return row
        status, body = http_check(port, sc["tls"], tracker.pid)
        row["check"] = f"{status} {body[:120]!r}" if isinstance(body, bytes) else f"{status} {body}"
        if not body_ok(status, body):
            row["note"] += f"check of the fixed announce URL: {row['check']}; "
            if status is None:
                return row
        if sc["load"] == "wrk":
            run_wrk(row, a, tracker, port, outdir, tag)
        else:
            run_aquatic_load(row, a, tracker, port, sc["tls"], outdir, tag)
        if tracker.poll() is not None:
            row["note"] += f"tracker exited during the run (status {tracker.returncode}); "
            row["ok"] = 0
        if row["ok"]:
            row["noisy"] = int(row["others_cpu_pct"] > a.noisy)
        return row
    finally:
        if tracker is not None:
            B.stop(tracker, name)
        tracker_log.close()
        try:
            row["tracker_log_bytes"] = os.path.getsize(os.path.join(outdir, f"{tag}.tracker.log"))
        except OSError:
            pass


# ---------------------------------------------------------------- report

FIELDS = ["scenario", "round", "contender", "port", "ok", "noisy", "window_s", "responses_per_s",
          "responses_per_cpu_s", "tracker_cpu_pct", "load_cpu_pct", "others_cpu_pct", "softirq_pct", "ksoftirqd_pct",
          "rss_kib", "tracker_threads", "tcp_accepts_per_s", "tcp_out_rsts_per_s", "announce_per_s", "failure_per_s", "requests_per_s", "interval_rates",
          "total_responses", "whole_run_per_cpu_s", "whole_run_tracker_cpu_pct", "non2xx", "socket_errors",
          "latency_p50_ms", "latency_p99_ms", "rate_from", "tracker_log_bytes", "check", "note"]


def summarize(rows, a):
    out = []
    for scn in a.scenarios:
        mine = [r for r in rows if r["scenario"] == scn]
        cons = contenders_of(scn, a)
        out += [f"### {scn}: {TITLES[scn]}", ""]
        extra = [("rss_kib", "RSS KiB (median)", "{:,.0f}")]
        if SCENARIOS[scn]["load"] == "wrk":
            extra = [("whole_run_per_cpu_s", "whole run: responses per tracker CPU-s (median)", "{:,.0f}"),
                     ("latency_p99_ms", "wrk p99 ms (median)", "{:.2f}")] + extra
        else:
            extra = [("failure_per_s", "failure responses/s (median)", "{:,.0f}")] + extra
        lines, medians = B.table(mine, cons, a.keep_noisy,
                                 [("responses_per_s", "responses/s"),
                                  ("responses_per_cpu_s", "responses per tracker CPU-s")], extra)
        out += lines + [""]
        num, den, bar = SCENARIOS[scn]["bar"]
        pairs = [(num, den, bar)] + [(x, y, None) for x in cons for y in cons
                                     if x != y and x == "shoal" and (x, y) != (num, den)]
        for x, y, b in pairs:
            if x in medians and y in medians and medians[y].get("responses_per_cpu_s"):
                r = medians[x]["responses_per_cpu_s"] / medians[y]["responses_per_cpu_s"]
                verdict = "" if b is None else f" (issue bar >= {b}: {'met' if r >= b else 'NOT met'})"
                out.append(f"- median responses per tracker CPU-s, {x} / {y}: **{r:.2f}**{verdict}")
                rr = medians[x]["responses_per_s"] / medians[y]["responses_per_s"]
                out.append(f"- median responses/s, {x} / {y}: {rr:.2f}")
        n = B.notes(mine, a.noisy, a.keep_noisy)
        if n:
            out += [""] + n
        out.append("")
    return "\n".join(out)


def main():
    a = parse_args()
    B.set_log_prefix("http-compare")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    for k in ("RUST_BACKTRACE", "RUST_LIB_BACKTRACE"):
        os.environ.pop(k, None)
    need = {}
    for scn in a.scenarios:
        cons = contenders_of(scn, a)
        for c in cons:
            need[c] = {"shoal": a.shoal, "aquatic_http": a.aquatic_http, "opentracker": a.opentracker}[c]
        if SCENARIOS[scn]["load"] == "wrk":
            need["wrk"] = a.wrk
        else:
            need["aquatic_http_load_test"] = a.load_test
    for what, path in need.items():
        if not B.have(path):
            sys.exit(f"http-compare: {what} binary not found: {path}")
    outdir = os.path.abspath(a.out or os.path.join(B.REPO, "target/bench",
                                                   "http-compare-" + time.strftime("%Y%m%d-%H%M%S")))
    os.makedirs(outdir, exist_ok=True)
    os.chmod(outdir, 0o755)  # opentracker chroots here and drops to nobody
    cert, key = B.make_cert(outdir) if any(SCENARIOS[s]["tls"] for s in a.scenarios) else ("", "")
    B.log(f"output in {outdir}")
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    rows = []
    csv_path = os.path.join(outdir, "runs.csv")
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        for scn in a.scenarios:
            for rnd in range(1, a.rounds + 1):
                for name in contenders_of(scn, a):
                    row = one_run(scn, name, rnd, a, outdir, cert, key)
                    rows.append(row)
                    w.writerow(row)
                    f.flush()
                    if row["ok"]:
                        B.log(f"  {row['responses_per_s']:,} responses/s, tracker CPU {row['tracker_cpu_pct']}%, "
                              f"{row['responses_per_cpu_s']:,} per CPU-s, load gen {row['load_cpu_pct']}%, "
                              f"others {row['others_cpu_pct']}%{' (NOISY)' if row.get('noisy') else ''}, "
                              f"RSS {row.get('rss_kib', 0) / 1024:.1f} MiB {row['note']}")
                    else:
                        B.log(f"  FAILED: {row['note']}")
                    time.sleep(1)
    mach = B.machine()
    with open(csv_path) as f:
        raw = f.read()
    md = [f"# HTTP tracker comparison, {started}", "",
          f"Machine: {mach['nproc']} CPUs ({mach['cpu']}), kernel {mach['kernel']}. {a.rounds} rounds per scenario, "
          f"contenders alternated; {a.duration} s runs, CPU over the window after the first {a.warmup} s; tracker "
          f"on CPU {a.tracker_cpu} (all threads), load generator on CPU {a.load_cpu}.",
          f"Command: `bench/http-compare.sh {' '.join(shlex.quote(x) for x in sys.argv[1:])}`", "",
          summarize(rows, a), "## Configs", "",
          "shoal (`shoal --config FILE`; keepalive / close / tls differ only in the lines shown):", "```toml",
          SHOAL_CONFIG.format(http_listen='"127.0.0.1:PORT"  # [] for tls', https_listen='"127.0.0.1:PORT" (tls only)',
                              keep_alive="true  # false for close", cert="OUTDIR/cert.pem (tls only)",
                              key="OUTDIR/key.pem (tls only)").rstrip(), "```",
          "aquatic_http (`aquatic_http -c FILE`):", "```toml",
          AQUATIC_HTTP_CONFIG.format(port="PORT", keep_alive="true  # false for close", tls="false  # true for tls",
                                     cert="OUTDIR/cert.pem (tls only)", key="OUTDIR/key.pem (tls only)").rstrip(),
          "```", "aquatic_http_load_test (`aquatic_http_load_test -c FILE`):", "```toml",
          LOAD_TEST_CONFIG.format(port="PORT", duration=a.duration, tls="false  # true for tls").rstrip(), "```",
          f"wrk: `{' '.join(shlex.quote(x) for x in wrk_command(a, 'PORT'))}`", "",
          f"opentracker: `{opentracker_display()}`", "",
          "TLS: `openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem -days 30 -subj /CN=localhost`",
          "", "## Raw runs (CSV)", "", "```csv", raw.rstrip(), "```", ""]
    text = "\n".join(md)
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    return 0 if any(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
