#!/usr/bin/env python3
"""Compare UDP trackers (BEP 15) under aquatic_udp_load_test, following
docs/benchmarking.md: tracker pinned to one core, load generator to the other,
contenders alternated A,B,C,A,B,C... for R rounds, the first W seconds of every
run excluded, tracker CPU from /proc/PID/stat over the steady window, the CPU
of everything else from /proc/stat so noisy runs are flagged (and dropped).

Run it through bench/udp-compare.sh; see bench/README.md. Standard library only.
"""
import argparse
import csv
import datetime
import os
import queue
import shlex
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time

# Helpers shared with http_compare.py and ws_compare.py.
from benchlib import (
    child_env,
    find_tool,
    ksoftirqd_pids,
    mmm,
    proc_affinities,
    proc_rss_kib,
    system_ticks,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")
REPORT_EVERY_S = 5  # aquatic_udp_load_test prints a report every 5 s; not configurable
CONTENDERS = ("shoal", "aquatic_udp", "io-limit")


def log(msg):
    print(f"[udp-compare {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)



def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5, help="rounds; each round runs every contender once (default 5)")
    p.add_argument("--duration", type=int, default=20, help="seconds per run, multiple of 5 (default 20)")
    p.add_argument("--warmup", type=int, default=5, help="seconds excluded at the start, multiple of 5 (default 5)")
    p.add_argument("--contenders", default=",".join(CONTENDERS),
                   help=f"comma-separated subset of {','.join(CONTENDERS)}, in run order (default: all)")
    p.add_argument("--shoal", default=os.environ.get("SHOAL_BIN", os.path.join(REPO, "target/release/shoal")),
                   help="shoal binary (env SHOAL_BIN; default target/release/shoal)")
    p.add_argument("--shoal-args", default=os.environ.get("SHOAL_ARGS", "--udp 127.0.0.1:{port} --workers 1"),
                   help="shoal arguments, {port} is replaced (env SHOAL_ARGS; default '%(default)s')")
    p.add_argument("--aquatic-udp", default=find_tool("AQUATIC_UDP", "aquatic_udp"),
                   help="aquatic_udp binary (env AQUATIC_UDP)")
    p.add_argument("--load-test", default=find_tool("AQUATIC_UDP_LOAD_TEST", "aquatic_udp_load_test"),
                   help="aquatic_udp_load_test binary (env AQUATIC_UDP_LOAD_TEST)")
    p.add_argument("--responder", default=os.path.join(REPO, "target/bench/udp_responder"),
                   help="io-limit responder binary; built from bench/io-limit/udp_responder.c if missing or stale")
    p.add_argument("--port-base", type=int, default=23000, help="first port tried (below 32768; default 23000)")
    p.add_argument("--tracker-cpu", default="0", help="CPU list for the tracker (default 0)")
    p.add_argument("--load-cpu", default="1", help="CPU list for the load generator (default 1)")
    p.add_argument("--noisy", type=float, default=10.0,
                   help="flag a run when other processes used more than this %% of one core (default 10)")
    p.add_argument("--keep-noisy", action="store_true", help="keep noisy runs in the summary (default: drop them)")
    p.add_argument("--out", default=None, help="output directory (default target/bench/udp-compare-TIMESTAMP)")
    a = p.parse_args()
    a.contenders = [c.strip() for c in a.contenders.split(",") if c.strip()]
    for c in a.contenders:
        if c not in CONTENDERS:
            p.error(f"unknown contender {c!r}")
    if a.rounds < 1 or a.rounds > 100:
        p.error("--rounds must be 1..100")
    if a.duration % REPORT_EVERY_S or a.warmup % REPORT_EVERY_S or not 0 <= a.warmup < a.duration <= 600:
        p.error("--duration and --warmup must be multiples of 5 with 0 <= warmup < duration <= 600")
    if not 1024 <= a.port_base < 32768 - 100:
        p.error("--port-base must be in 1024..32667")
    return a


# ---------------------------------------------------------------- /proc readers

def proc_cpu_ticks(pid):
    """utime + stime of the whole process (all threads), in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of stat(5)



KSOFTIRQD = ksoftirqd_pids()


def snapshot(tracker_pid, load_pid):
    busy, softirq = system_ticks()
    ksoft = 0
    for pid in KSOFTIRQD:
        try:
            ksoft += proc_cpu_ticks(pid)
        except OSError:
            pass
    return {
        "ksoftirqd": ksoft,
        "t": time.monotonic(),
        "tracker": proc_cpu_ticks(tracker_pid),
        "load": proc_cpu_ticks(load_pid),
        "busy": busy,
        "softirq": softirq,
    }


# ---------------------------------------------------------------- ports, processes

def port_free(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def pick_port(base):
    for port in range(base, base + 100):
        if port_free(port):
            return port
    raise RuntimeError(f"no free UDP port in {base}..{base + 99}")


def probe_connect(port, pid, timeout_s=10.0):
    """Send BEP 15 connect requests until a valid connect response arrives."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.1)
    deadline = time.monotonic() + timeout_s
    tid = 0x5e0a1000
    try:
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return False
            tid += 1
            s.sendto(struct.pack(">QII", 0x41727101980, 0, tid), ("127.0.0.1", port))
            try:
                data = s.recv(64)
            except (socket.timeout, ConnectionRefusedError):
                continue
            if len(data) >= 16 and struct.unpack(">II", data[:8]) == (0, tid):
                return True
        return False
    finally:
        s.close()


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def stop(proc, name):
    """Stop one process we started, by its PID: SIGTERM, then SIGKILL after 5 s."""
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        log(f"{name} (pid {proc.pid}) ignored SIGTERM; SIGKILL")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)



def build_responder(path):
    src = os.path.join(REPO, "bench/io-limit/udp_responder.c")
    if os.path.exists(path) and os.path.getmtime(path) >= os.path.getmtime(src):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    cmd = [os.environ.get("CC", "cc"), "-O2", "-o", path, src]
    log("building the io-limit responder: " + " ".join(cmd))
    subprocess.run(cmd, check=True)


def contender_command(name, a, port, outdir):
    if name == "shoal":
        return [a.shoal] + shlex.split(a.shoal_args.replace("{port}", str(port)))
    if name == "aquatic_udp":
        cfg = os.path.join(outdir, "aquatic_udp.toml")
        with open(cfg, "w") as f:
            f.write(AQUATIC_UDP_CONFIG.format(port=port))
        return [a.aquatic_udp, "-c", cfg]
    if name == "io-limit":
        return [a.responder, "127.0.0.1", str(port)]
    raise ValueError(name)


AQUATIC_UDP_CONFIG = """\
# written by bench/udp-compare.sh; everything not named here is aquatic_udp 0.9.0's default
socket_workers = 1
log_level = "error"

[network]
address = "127.0.0.1:{port}"
"""

LOAD_TEST_CONFIG = """\
# written by bench/udp-compare.sh; everything not named here is aquatic_udp_load_test 0.9.0's default
server_address = "127.0.0.1:{port}"
log_level = "error"
workers = 1
duration = {duration}
summarize_last = {summarize}
# its per-info-hash histograms cost the load generator CPU, and it already runs out first
extra_statistics = false
"""


# ---------------------------------------------------------------- one run

def one_run(name, rnd, a, outdir):
    port = pick_port(a.port_base)
    tag = f"r{rnd}-{name}"
    cmd = ["taskset", "-c", a.tracker_cpu] + contender_command(name, a, port, outdir)
    lt_cfg = os.path.join(outdir, "load_test.toml")
    with open(lt_cfg, "w") as f:
        f.write(LOAD_TEST_CONFIG.format(port=port, duration=a.duration, summarize=a.duration - a.warmup))
    lt_cmd = ["taskset", "-c", a.load_cpu, a.load_test, "-c", lt_cfg]
    row = {"round": rnd, "contender": name, "port": port, "ok": 0, "note": ""}
    tracker_log = open(os.path.join(outdir, f"{tag}.tracker.log"), "w")
    lt_log = open(os.path.join(outdir, f"{tag}.load_test.log"), "w")
    tracker = loadgen = None
    try:
        log(f"round {rnd}: {name} on 127.0.0.1:{port}: {' '.join(cmd)}")
        tracker = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=tracker_log, stderr=subprocess.STDOUT,
                                   env=child_env())
        if not probe_connect(port, tracker.pid):
            row["note"] = "tracker did not answer a connect request within 10 s"
            return row
        loadgen = subprocess.Popen(lt_cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, env=child_env(), text=True, bufsize=1)
        lines = queue.Queue()

        def reader():
            for line in loadgen.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=reader, daemon=True).start()
        first_report, last_report = a.warmup // REPORT_EVERY_S, a.duration // REPORT_EVERY_S
        reports, snaps, interval_rates, peers_per_announce, summary = 0, {}, [], [], {}
        if first_report == 0:
            snaps["start"] = snapshot(tracker.pid, loadgen.pid)
        deadline = time.monotonic() + a.duration + 60
        in_summary = False
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                break
            lt_log.write(line)
            s = line.strip()
            if s.startswith("Responses in:") and not in_summary:
                reports += 1
                interval_rates.append(float(s.split()[2].split("/")[0]))
                if reports == first_report:
                    snaps["start"] = snapshot(tracker.pid, loadgen.pid)
                if reports == last_report:
                    snaps["end"] = snapshot(tracker.pid, loadgen.pid)
                    row["rss_kib"] = proc_rss_kib(tracker.pid)
                    aff = proc_affinities(tracker.pid)
                    bad = {t: c for t, c in aff.items() if c != a.tracker_cpu}
                    row["tracker_threads"] = len(aff)
                    if bad:
                        row["note"] += f"threads not pinned to {a.tracker_cpu}: {bad}; "
            elif s.startswith("Peers per announce response:") and not in_summary:
                peers_per_announce.append(float(s.split(":")[1]))
            elif s.startswith("# aquatic load test report"):
                in_summary = True
            elif in_summary and s.startswith("Average responses per second:"):
                summary["responses"] = float(s.split(":")[1])
            elif in_summary and s.startswith("- ") and "responses:" in s:
                kind, val = s[2:].split("responses:")
                summary[kind.strip().lower()] = float(val)
        else:
            row["note"] += "load test did not finish in time; "
        if loadgen.poll() is None:
            stop(loadgen, "load test")
        loadgen.wait(timeout=5)
        if tracker.poll() is not None:
            row["note"] += f"tracker exited during the run (status {tracker.returncode}); "
            return row
        if "start" not in snaps or "end" not in snaps or "responses" not in summary:
            row["note"] += f"incomplete load test output ({reports} reports); "
            return row
        s0, s1 = snaps["start"], snaps["end"]
        window = s1["t"] - s0["t"]
        tr = (s1["tracker"] - s0["tracker"]) / CLK_TCK
        lg = (s1["load"] - s0["load"]) / CLK_TCK
        busy = (s1["busy"] - s0["busy"]) / CLK_TCK
        soft = (s1["softirq"] - s0["softirq"]) / CLK_TCK
        ksoft = (s1["ksoftirqd"] - s0["ksoftirqd"]) / CLK_TCK
        # everything else on the machine; ksoftirqd is left out: on loopback it is the benchmark's own
        # packet delivery (shown in its own column)
        others = max(0.0, busy - tr - lg - ksoft)
        resp = summary["responses"]
        window_rates = interval_rates[first_report:last_report]
        if window_rates and abs(statistics.mean(window_rates) - resp) > 0.01 * resp:
            row["note"] += (f"load test summary {resp:.0f}/s differs from the mean of its window reports "
                            f"{statistics.mean(window_rates):.0f}/s; ")
        ppa = [x for x in peers_per_announce[first_report:last_report] if x == x]  # drop NaN
        row.update({
            "ok": 1,
            "window_s": round(window, 2),
            "responses_per_s": round(resp),
            "interval_rates": " ".join(str(round(r)) for r in window_rates),
            "peers_per_announce": round(statistics.mean(ppa), 2) if ppa else "",
            "connect_per_s": round(summary.get("connect", 0)),
            "announce_per_s": round(summary.get("announce", 0)),
            "scrape_per_s": round(summary.get("scrape", 0)),
            "error_per_s": round(summary.get("error", 0)),
            "tracker_cpu_pct": round(100 * tr / window, 1),
            "responses_per_cpu_s": round(resp * window / tr) if tr > 0 else "",
            "load_cpu_pct": round(100 * lg / window, 1),
            "others_cpu_pct": round(100 * others / window, 1),
            "softirq_pct": round(100 * soft / window, 1),
            "ksoftirqd_pct": round(100 * ksoft / window, 1),
        })
        row["noisy"] = int(row["others_cpu_pct"] > a.noisy)
        if row["error_per_s"] > 0.01 * resp:
            row["note"] += "more than 1% error responses; "
        return row
    finally:
        for proc, pname in ((loadgen, "load test"), (tracker, name)):
            if proc is not None:
                stop(proc, pname)
        tracker_log.close()
        lt_log.close()


# ---------------------------------------------------------------- report

FIELDS = ["round", "contender", "port", "ok", "noisy", "window_s", "responses_per_s", "responses_per_cpu_s",
          "tracker_cpu_pct", "load_cpu_pct", "others_cpu_pct", "softirq_pct", "ksoftirqd_pct", "rss_kib", "tracker_threads",
          "connect_per_s", "announce_per_s", "scrape_per_s", "error_per_s", "peers_per_announce", "interval_rates",
          "note"]



def summarize(rows, a):
    out = ["| contender | runs used (dropped) | responses/s min / median / max "
           "| responses per tracker CPU-s min / median / max | tracker CPU % (median) "
           "| load gen CPU % (median) | others CPU % (median) | RSS MiB (median) | peers per announce (median) |",
           "|---|---|---|---|---|---|---|---|---|"]
    medians = {}
    for name in a.contenders:
        mine = [r for r in rows if r["contender"] == name]
        ok = [r for r in mine if r["ok"]]
        used = ok if a.keep_noisy else [r for r in ok if not r["noisy"]]
        dropped = len(mine) - len(used)
        rps = [r["responses_per_s"] for r in used]
        rpc = [r["responses_per_cpu_s"] for r in used if r["responses_per_cpu_s"] != ""]
        med = lambda k: statistics.median([r[k] for r in used]) if used else None  # noqa: E731
        if rpc:
            medians[name] = statistics.median(rpc)
        ppa = [r["peers_per_announce"] for r in used if r["peers_per_announce"] != ""]
        out.append("| {} | {} ({}) | {} | {} | {} | {} | {} | {} | {} |".format(
            name, len(used), dropped, mmm(rps), mmm(rpc),
            "-" if not used else f"{med('tracker_cpu_pct'):.0f}",
            "-" if not used else f"{med('load_cpu_pct'):.0f}",
            "-" if not used else f"{med('others_cpu_pct'):.1f}",
            "-" if not used else f"{med('rss_kib') / 1024:.1f}",
            f"{statistics.median(ppa):.1f}" if ppa else "-"))
    out.append("")
    for num, den, bar in (("shoal", "aquatic_udp", "bar: >= 1.15"), ("shoal", "io-limit", "bar: >= 0.85"),
                          ("aquatic_udp", "io-limit", "")):
        if num in medians and den in medians:
            out.append(f"- median responses per tracker CPU-s, {num} / {den}: "
                       f"**{medians[num] / medians[den]:.3f}**{' (' + bar + ')' if bar else ''}")
    notes = [f"round {r['round']} {r['contender']}: {r['note']}" for r in rows if r["note"]]
    noisy = [f"round {r['round']} {r['contender']}: others {r['others_cpu_pct']}%" for r in rows
             if r["ok"] and r["noisy"]]
    if noisy:
        out.append("")
        out.append(f"Noisy runs (others > {a.noisy}% of a core){' (kept)' if a.keep_noisy else ' (dropped)'}: "
                   + "; ".join(noisy))
    if notes:
        out.append("")
        out.append("Notes: " + "; ".join(notes))
    return "\n".join(out)


def main():
    a = parse_args()
    # on SIGTERM (e.g. from `timeout`), unwind so the processes we started are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    for key in ("RUST_BACKTRACE", "RUST_LIB_BACKTRACE"):
        os.environ.pop(key, None)
    if os.cpu_count() and os.cpu_count() < 2:
        log("warning: fewer than 2 CPUs; tracker and load generator will share a core")
    need = {"load_test": a.load_test}
    if "shoal" in a.contenders:
        need["shoal"] = a.shoal
    if "aquatic_udp" in a.contenders:
        need["aquatic_udp"] = a.aquatic_udp
    if "io-limit" in a.contenders:
        build_responder(a.responder)
    for what, path in need.items():
        if not (os.access(path, os.X_OK) or shutil.which(path)):
            sys.exit(f"udp-compare: {what} binary not found: {path}")
    outdir = a.out or os.path.join(REPO, "target/bench", "udp-compare-" + time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(outdir, exist_ok=True)
    log(f"output in {outdir}")
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    rows = []
    csv_path = os.path.join(outdir, "runs.csv")
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        for rnd in range(1, a.rounds + 1):
            for name in a.contenders:
                row = one_run(name, rnd, a, outdir)
                rows.append(row)
                w.writerow(row)
                f.flush()
                if row["ok"]:
                    log(f"  {row['responses_per_s']:,} responses/s, tracker CPU {row['tracker_cpu_pct']}%, "
                        f"{row['responses_per_cpu_s']:,} per CPU-s, load gen {row['load_cpu_pct']}%, "
                        f"others {row['others_cpu_pct']}%{' (NOISY)' if row['noisy'] else ''}, "
                        f"RSS {row['rss_kib'] / 1024:.1f} MiB {row['note']}")
                else:
                    log(f"  FAILED: {row['note']}")
                time.sleep(1)
    table = summarize(rows, a)
    with open(csv_path) as f:
        raw = f.read()
    header = [
        f"# UDP tracker comparison, {started}",
        "",
        f"{a.rounds} rounds x {a.duration} s runs, first {a.warmup} s excluded; tracker on CPU {a.tracker_cpu}, "
        f"aquatic_udp_load_test on CPU {a.load_cpu}; machine: {os.uname().release}, {os.cpu_count()} CPUs.",
        f"Command: `bench/udp-compare.sh {' '.join(shlex.quote(x) for x in sys.argv[1:])}`",
        "",
    ]
    configs = ["", "## Configs", "", "aquatic_udp (port varies per run):", "```toml",
               AQUATIC_UDP_CONFIG.format(port="PORT").rstrip(), "```", "aquatic_udp_load_test:", "```toml",
               LOAD_TEST_CONFIG.format(port="PORT", duration=a.duration,
                                       summarize=a.duration - a.warmup).rstrip(), "```",
               f"shoal: `{a.shoal} {a.shoal_args}`" if "shoal" in a.contenders else "",
               f"io-limit: `{a.responder} 127.0.0.1 PORT` (bench/io-limit/udp_responder.c, cc -O2)"
               if "io-limit" in a.contenders else "",
               "", "## Raw runs (CSV)", "", "```csv", raw.rstrip(), "```", ""]
    md = "\n".join(header) + table + "\n" + "\n".join(configs)
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write(md)
    print(md)
    return 0 if any(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
