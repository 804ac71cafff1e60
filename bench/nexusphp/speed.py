"""shoal with `--schema nexusphp` against shoal's own UNIT3D mode (`--schema unit3d`) on the
same MariaDB server (NexusPHP's tables in database `nexusphp`, UNIT3D's in `unit3d`), the
same members and torrents, under the same shoal-bench HTTP keep-alive load, each on its
site's announce URL; shoal NexusPHP mode over UDP beside them. Run by bench/nexusphp.sh,
which documents the environment and the load.

Every round runs each contender once, in the same order (NexusPHP HTTP, UNIT3D HTTP,
NexusPHP UDP), as bench/unit3d/speed.py runs its own (whose runs, rounds and report this
reuses): the site's activity emptied, the tracker started pinned to the tracker CPU,
shoal-bench loading it from the other CPU (`--tracker-pid`), MariaDB's write counters read
around the load, the tracker stopped with SIGTERM. The report gives responses per tracker
CPU-second (min / median / max over the rounds), the NexusPHP / UNIT3D ratio round by
round, and whether the median of those ratios is at least TARGET.
"""

import datetime
import importlib.util
import json
import os
import shutil
import statistics
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# UNIT3D's speed script (its `import site_db` is UNIT3D's), then this site's tables.
_u3 = _load("unit3d_speed", os.path.join(HERE, "..", "unit3d", "speed.py"))
u3site = _u3.site
nx = _load("nexusphp_site_db", os.path.join(HERE, "site_db.py"))

# Where each site's clients put the passkey.
PATHS = {"nexusphp": "/announce.php?passkey={passkey}", "unit3d": "/announce/{passkey}"}
NEXUSPHP, BASE = "shoal-nexusphp http", "shoal-unit3d http"
ADMIN_METRICS = "http://127.0.0.1:6970/metrics"
# Issue 45: NexusPHP mode at least this fraction of UNIT3D mode per tracker CPU-second.
TARGET = 0.9


def one_run(args, _db, tracker, protocol, passkeys, out, round_no):
    """UNIT3D's run (bench/unit3d/speed.py) on `tracker`'s own database, emptied by its
    site's reset, under the load on its site's announce URL, each peer in turn
    (`--sweep`); with the run's announces, warm-up included, from shoal-bench's JSON."""
    schema = tracker.schema
    refused = {}
    work = {}

    def bench(a, proto, port, pid, json_path, keys):
        work["cpu0"], work["answered0"] = u3site.proc_cpu_seconds(pid), answered()
        result = _u3.run_bench(a, proto, port, pid, json_path, keys,
                               passkey_path=PATHS[schema], extra=["--sweep"])
        refused.update(refusals())
        work["answered1"] = answered()
        # The tracker's CPU until it exits: the SIGTERM that follows makes it write what
        # the load left pending.
        work["sampler"] = threading.Thread(target=cpu_until_exit, args=(pid, work))
        work["sampler"].start()
        return result

    reset = nx.reset_activity if schema == "nexusphp" else u3site.reset_activity
    r = _u3.one_run(args, tracker.db, tracker, protocol, passkeys, out, round_no,
                    bench=bench, reset=reset)
    # What the tracker refused over the whole run (warm-up included), by its reason.
    r["refusals"] = refused
    # All the work: the announces the tracker answered from the load's start (its own
    # counter, warm-up included) per CPU-second it spent from then until it exited, its
    # last writes of the site's tables included.
    if "sampler" in work:
        work["sampler"].join()
        cpu = work.get("cpu_last", 0.0) - work["cpu0"]
        n = work["answered1"] - work["answered0"]
        r["answered"], r["tracker_cpu_all"] = n, cpu
        r["answered_per_tracker_cpu_second_all"] = n / cpu if cpu > 0 and n > 0 else None
    with open(os.path.join(out, f"r{round_no}-{tracker.name}-{protocol}.json")) as f:
        result = json.load(f)
    # The measured window's requests, and the warm-up's at the same pace.
    warmup, duration = seconds(args.warmup), seconds(args.duration)
    r["announces_estimated"] = round(result["requests_sent"] * (warmup + duration) / duration)
    return r


def metrics_text():
    """The running tracker's admin `/metrics` page; empty where it cannot be read."""
    try:
        with urllib.request.urlopen(ADMIN_METRICS, timeout=5) as f:
            return f.read().decode()
    except OSError:
        return ""


def refusals():
    """The running tracker's refusals so far, by protocol and reason (its admin listener's
    `shoal_private_refused_total`, 127.0.0.1:6970 by default); empty where it cannot be
    read."""
    out = {}
    for line in metrics_text().splitlines():
        if line.startswith("shoal_private_refused_total{"):
            labels, value = line.rsplit(" ", 1)
            if float(value):
                out[labels[len("shoal_private_refused_total"):]] = int(float(value))
    return out


def answered():
    """The running tracker's announces answered so far, over every protocol and result
    (`shoal_requests_total{action="announce"}` on its admin listener); 0 where it cannot be
    read."""
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in metrics_text().splitlines()
               if line.startswith("shoal_requests_total{")
               and 'action="announce"' in line)


def cpu_until_exit(pid, work, every=0.02):
    """Samples process `pid`'s CPU seconds into work["cpu_last"] until it is gone (at most
    10 minutes)."""
    end = time.monotonic() + 600
    while time.monotonic() < end:
        try:
            work["cpu_last"] = u3site.proc_cpu_seconds(pid)
        except (OSError, ValueError, IndexError):
            return
        time.sleep(every)


def seconds(text):
    """A shoal-bench duration as the scripts give them (`20s`, `500ms`), in seconds."""
    if text.endswith("ms"):
        return float(text[:-2]) / 1000
    return float(text.rstrip("s"))


def all_work_ratios(by):
    """NexusPHP HTTP over UNIT3D HTTP in announces answered per tracker CPU-second, all the
    work counted, round by round."""
    pairs = [(a, b) for a in by.get(NEXUSPHP, []) for b in by.get(BASE, [])
             if a["round"] == b["round"]]
    return [a["answered_per_tracker_cpu_second_all"] / b["answered_per_tracker_cpu_second_all"]
            for a, b in pairs if a.get("answered_per_tracker_cpu_second_all")
            and b.get("answered_per_tracker_cpu_second_all")]


def verdict(by):
    """NexusPHP HTTP over UNIT3D HTTP per tracker CPU-second, all the work counted, round
    by round: (ratios, median, whether the median meets TARGET); None where either did not
    run.

    All the work, not the measured window alone: in this load neither mode's writes keep
    up, and how much of its writing a tracker has done by the window's end depends on how
    fast MariaDB takes each site's rows (NexusPHP mode's rows go in twice as fast as UNIT3D
    mode's since 2026-12-07), so the window charges each mode a different share of its own
    work. Counting until each tracker has exited, its last writes done, charges both all
    of it."""
    if NEXUSPHP not in by or BASE not in by:
        return None
    ratios = all_work_ratios(by)
    med = statistics.median(ratios) if ratios else 0.0
    return ratios, med, med >= TARGET


def report(args, runs, out, meta):
    names, by, table = _u3.contenders_table(runs)
    lines = [f"# shoal `--schema nexusphp` against shoal `--schema unit3d`, {meta['date']}",
             ""]
    lines += [f"shoal commit {meta['commit']}; {meta['rounds']} rounds, each contender once "
              f"a round in the order below; {args.warmup} warm-up then {args.duration} "
              f"measured; tracker on CPU {args.tracker_cpus} (one worker), shoal-bench on "
              f"CPU {args.bench_cpus}, MariaDB on CPU {args.db_cpus}; one MariaDB server, "
              f"NexusPHP's tables as shipped in one database and UNIT3D's in another, "
              f"{args.users:,} members and {args.torrents:,} torrents in each; HTTP "
              f"keep-alive over {args.connections} connections, `--user-agent "
              f"{args.user_agent}`, the passkey where each site's clients send it "
              f"(NexusPHP `{PATHS['nexusphp']}`, UNIT3D `{PATHS['unit3d']}`); "
              f"`--sweep` over {args.peers:,} simulated peers: each announce is a "
              "peer's first, each (member, torrent) announces once a run (NexusPHP's "
              "30-s and 300-s limits, see bench/nexusphp.sh).", ""]
    lines += table + _u3.ratio_lines(names, by, BASE)
    window = _u3.round_ratios(by, NEXUSPHP, BASE) if NEXUSPHP in by and BASE in by else []
    if window:
        med = statistics.median(window)
        lines += [f"NexusPHP / UNIT3D over HTTP, per tracker CPU-second in the measured "
                  f"window alone, median of the per-round ratios: {med:.3f}x (rounds: "
                  + ", ".join(f"{r:.3f}" for r in window)
                  + "); each mode has done a different share of its writes by then (the "
                  "DB rows/s and stop s columns), the verdict is on all the work below.",
                  ""]
        meta["nexusphp_over_unit3d_window"] = {"round_ratios": window, "median": med}
    lines += ["All the work: the announces each tracker answered from the load's start "
              "(its `shoal_requests_total`, warm-up included) per CPU-second it spent "
              "from then until it exited after SIGTERM, so that the writes the load left "
              "pending (the stop column) are counted as well:", "",
              "| round | contender | answered | tracker CPU s | per tracker CPU-s |",
              "|---|---|---|---|---|"]
    lines += [f"| {r['round']} | {r['contender']} | {r.get('answered', 0):,} | "
              f"{r.get('tracker_cpu_all', 0):.1f} | "
              f"{(r.get('answered_per_tracker_cpu_second_all') or 0):,.0f} |" for r in runs]
    v = verdict(by)
    if v and v[0]:
        ratios, med, ok = v
        lines += ["", f"**All the work, NexusPHP / UNIT3D over HTTP, median of the per-round "
                  f"ratios: {med:.3f}x** (rounds: "
                  + ", ".join(f"{x:.3f}" for x in ratios)
                  + f"): the {TARGET}x asked for is {'met' if ok else 'NOT met'}."]
        meta["nexusphp_over_unit3d"] = {"round_ratios": ratios, "median": med,
                                        "target": TARGET, "met": ok, "measure": "all the work"}
    lines += [""]
    lines += ["Refused by the tracker over each run, warm-up included "
              "(`shoal_private_refused_total`):", ""]
    lines += [f"- round {r['round']} {r['contender']}: "
              + (", ".join(f"{k} {v:,}" for k, v in r["refusals"].items()) or "none")
              for r in runs] + [""]
    most = max((r["announces_estimated"] for r in runs), default=0)
    over = [r for r in runs if r["announces_estimated"] > args.peers]
    lines += [f"Announces per run, warm-up included (the measured window's, and the "
              f"warm-up's at the same pace): at most {most:,} for {args.peers:,} peers"
              + (f"; {len(over)} runs more (some peers announced twice)." if over
                 else ": no peer announced twice."), ""]
    return _u3.write_report(lines, runs, out, meta, stops=True)


def contenders(args, nxdb, u3db, work):
    """(tracker, protocol) in the order each round runs them, each tracker with `db`, its
    site's database."""
    port = nx.site_common.free_low_port()
    nexus = nx.Shoal(args.shoal, os.path.join(work, "nexusphp"), nxdb.url, port,
                     cpus=args.tracker_cpus)
    unit3d = u3site.Shoal(args.shoal, os.path.join(work, "unit3d"), u3db.url, port,
                          unit3d=_u3.SHOAL_UNIT3D, cpus=args.tracker_cpus)
    nexus.name, nexus.db = "shoal-nexusphp", nxdb
    unit3d.name, unit3d.db = "shoal-unit3d", u3db
    return [(nexus, "http"), (unit3d, "http")] + ([] if args.no_udp else [(nexus, "udp")])


def main():
    args = _u3.options(__doc__.split("\n")[0], "NexusPHP's",
                       more=lambda p: p.add_argument(
                           "--unit3d-ddl", required=True,
                           help="UNIT3D's tables (the test fixture's DDL)"))
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    work = nx.site_common.tempdir("nexusphp-speed-")
    nxdb = nx.MariaDB(os.path.join(work, "db"), cpus=args.db_cpus).start()
    trackers = []
    try:
        passkeys, keys, hashes = _u3.load(args, nxdb, work)
        nx.insert_site(nxdb)
        nx.insert_users(nxdb, keys)
        nx.insert_torrents(nxdb, hashes, owner=1)
        u3db = nxdb.add_database("unit3d")
        u3db.load_ddl(args.unit3d_ddl)
        groups = u3site.insert_groups(u3db)
        u3site.insert_users(u3db, keys, groups["user"])
        u3site.insert_torrents(u3db, hashes, uploader=1)
        trackers = contenders(args, nxdb, u3db, work)
        runs = _u3.run_rounds(args, nxdb, trackers, passkeys, out, run=one_run)
        meta = {"date": datetime.date.today().isoformat(), "commit": args.commit,
                "rounds": args.rounds, "command": " ".join(sys.argv)}
        print(report(args, runs, out, meta))
    finally:
        for tracker, _ in trackers:
            tracker.stop()
        nxdb.stop()
        nx.site_common.copy_logs(work, out)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
