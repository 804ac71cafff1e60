"""shoal with `--schema unit3d` against UNIT3D-Announce on the same MariaDB, the same
users and torrents, under the same shoal-bench HTTP keep-alive load; shoal over UDP under
the same load beside them. Run by bench/unit3d.sh, which documents the environment.

Every round runs each contender once, in the same order (shoal HTTP, UNIT3D-Announce HTTP,
shoal UDP): the site's activity tables are emptied, the tracker is started pinned to the
tracker CPU (it reads the site's tables at start), shoal-bench loads it from the other CPU
(`--tracker-pid`: the tracker's CPU over the measured window, warm-up excluded), MariaDB's
write counters are read before and after the load, and the tracker is stopped with
SIGTERM (it writes what it holds). The report gives responses per tracker CPU-second
(min / median / max over the rounds), shoal's ratio to UNIT3D-Announce round by round,
and database writes per second.
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import site_db as site  # noqa: E402


# A run where other processes used more than this % of a core is marked noisy.
NOISY = 10.0

# shoal's `[unit3d]` lines: the same rules as UNIT3D-Announce's, its defaults, except the
# minimum announce interval (a load's peers announce every few seconds, not every 30
# minutes: at 1800 s nearly every answer would be the rate-limit warning without peers)
# and, for shoal, the per-user peer-list rate limits this UNIT3D-Announce does not have.
SHOAL_UNIT3D = ("announce_min = 1\nannounce_max = 3600\n"
                "seed_list_rate_limits = []\nleech_list_rate_limits = []\n")


def is_noisy(r):
    """Whether processes other than the tracker, the load and MariaDB (which works for the
    tracker) used more than NOISY % of a core over the run."""
    return (r["others_percent"] or 0) - r["mariadb_percent"] > NOISY


def run_bench(args, protocol, port, tracker_pid, json_path, passkeys,
              passkey_path="/announce/{passkey}", keep_alive=True, extra=()):
    """One shoal-bench load against 127.0.0.1:port, pinned to the load CPU, announcing on
    `passkey_path`, with the workload flags `extra`; over HTTP without keep-alive unless
    `keep_alive`."""
    common = ["--duration", args.duration, "--warmup", args.warmup,
              "--tracker-pid", str(tracker_pid), "--json", json_path, "--quiet",
              "--torrents", str(args.torrents), "--peers", str(args.peers),
              "--weight-scrape", "0", "--passkeys", passkeys,
              "--passkey-path", passkey_path, *extra]
    if protocol == "http":
        cmd = [args.bench, "http", "--target", f"http://127.0.0.1:{port}/announce",
               "--connections", str(args.connections), "--user-agent", args.user_agent]
        if not keep_alive:
            cmd.append("--no-keep-alive")
    else:
        cmd = [args.bench, "udp", "--target", f"127.0.0.1:{port}"]
    cmd = ["taskset", "-c", args.bench_cpus] + cmd + common
    env = dict(os.environ)
    env.pop("RUST_BACKTRACE", None)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"shoal-bench failed: {r.stderr.strip()[-2000:]}")
    with open(json_path) as f:
        return json.load(f)


def one_run(args, db, tracker, protocol, passkeys, out, round_no, bench=None, reset=None):
    """One run of `tracker` under `bench` (run_bench's arguments; default run_bench):
    the site's activity emptied first (`reset(db)`, default the site's reset_activity),
    the database's write counters read around it."""
    bench = bench or run_bench
    (reset or site.reset_activity)(db)
    tracker.start()
    try:
        db_cpu0 = site.proc_cpu_seconds(db.proc.pid)
        before, t0 = db.status(), time.monotonic()
        path = os.path.join(out, f"r{round_no}-{tracker.name}-{protocol}.json")
        result = bench(args, protocol, tracker.port, tracker.proc.pid, path, passkeys)
        after, t1 = db.status(), time.monotonic()
        db_cpu1 = site.proc_cpu_seconds(db.proc.pid)
    finally:
        t_stop = time.monotonic()
        rc = tracker.stop()
        stop_s = time.monotonic() - t_stop
    seconds = t1 - t0
    delta = {k: after[k] - before[k] for k in after}
    statements = delta["Com_insert"] + delta["Com_update"] + delta["Com_delete"]
    rows = delta["Handler_write"] + delta["Handler_update"] + delta["Handler_delete"]
    cpu = result["cpu"]
    run = {
        "round": round_no,
        "contender": f"{tracker.name} {protocol}",
        "responses_per_second": result["responses_per_second"],
        "responses_per_tracker_cpu_second": result["responses_per_tracker_cpu_second"],
        "tracker_percent": cpu["tracker_percent"],
        "generator_percent": cpu["generator_percent"],
        "others_percent": cpu["others_percent"],
        "errors": {k: v for k, v in result["errors"].items() if v},
        "error_rate": result["error_rate"],
        "peers_per_response": result["peers_received"] / max(result["responses"], 1),
        "db_write_statements_per_second": statements / seconds,
        "db_rows_written_per_second": rows / seconds,
        "db_counters": delta,
        "mariadb_percent": 100.0 * (db_cpu1 - db_cpu0) / seconds,
        "stop_seconds": stop_s,
        "exit_code": rc,
    }
    if hasattr(tracker, "sigterms"):
        # How many SIGTERMs the tracker needed to exit (Ocelot may need a second).
        run["sigterms"] = tracker.sigterms
    return run


def mmm(values):
    if not values:
        return "-"
    return (f"{min(values):,.0f} / {statistics.median(values):,.0f} / "
            f"{max(values):,.0f}")


def mmm_ratio(values):
    if not values:
        return "-"
    return (f"{min(values):.2f}x / {statistics.median(values):.2f}x / "
            f"{max(values):.2f}x")


def contenders_table(runs):
    """The contenders in the order they ran, their runs by name, and the report's table of
    each contender's figures (median over the rounds)."""
    names = list(dict.fromkeys(r["contender"] for r in runs))
    by = {n: [r for r in runs if r["contender"] == n] for n in names}
    lines = ["| contender | responses per tracker CPU-s (min / median / max) | "
             "responses/s (median) | tracker CPU % | peers per answer | errors | "
             "DB write statements/s | DB rows written/s | MariaDB CPU % | others % |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for n in names:
        rs = by[n]
        med = lambda k: statistics.median([r[k] or 0 for r in rs])  # noqa: E731
        errs = sum(sum(r["errors"].values()) for r in rs)
        lines.append(
            f"| {n} | {mmm([r['responses_per_tracker_cpu_second'] or 0 for r in rs])} | "
            f"{med('responses_per_second'):,.0f} | {med('tracker_percent'):.0f} | "
            f"{med('peers_per_response'):.1f} | {errs} | "
            f"{med('db_write_statements_per_second'):,.1f} | "
            f"{med('db_rows_written_per_second'):,.0f} | {med('mariadb_percent'):.0f} | "
            f"{med('others_percent'):.0f} |")
    lines.append("")
    return names, by, lines


def round_ratios(by, name, base):
    """`name`'s responses per tracker CPU-second over `base`'s, round by round (the rounds
    both ran with a figure)."""
    pairs = [(a, b) for a in by[name] for b in by[base] if a["round"] == b["round"]]
    return [a["responses_per_tracker_cpu_second"] / b["responses_per_tracker_cpu_second"]
            for a, b in pairs if a["responses_per_tracker_cpu_second"]
            and b["responses_per_tracker_cpu_second"]]


def ratio_lines(names, by, base):
    """Each contender's responses per tracker CPU-second against `base`'s, round by round
    and as a ratio of medians (nothing where `base` did not run)."""
    if base not in by:
        return []
    lines = []
    for n in names:
        if n == base:
            continue
        ratios = round_ratios(by, n, base)
        med_a = statistics.median([a["responses_per_tracker_cpu_second"] or 0 for a in by[n]])
        med_b = statistics.median([b["responses_per_tracker_cpu_second"] or 0 for b in by[base]])
        lines.append(f"- **{n} / {base}**, per tracker CPU-second: round by round "
                     f"(min / median / max) {mmm_ratio(ratios)}; ratio of medians "
                     f"{med_a / med_b if med_b else 0:.2f}x.")
    return lines + [""]


def write_report(lines, runs, out, meta, stops=False):
    """`lines`, then the round-by-round table (with each run's stop time and SIGTERMs
    where `stops`), the noisy note and the command: OUT/report.md, and the runs in
    OUT/results.json. Returns the report's text."""
    lines += ["## Round by round", "",
              "| round | contender | responses/s | per tracker CPU-s | tracker % | "
              "others % | DB statements/s | DB rows/s | "
              + ("stop s (SIGTERMs) | " if stops else "") + "errors |",
              "|---" * (10 if stops else 9) + "|"]
    for r in runs:
        noisy = " (noisy)" if is_noisy(r) else ""
        lines.append(
            f"| {r['round']} | {r['contender']}{noisy} | {r['responses_per_second']:,.0f} | "
            f"{(r['responses_per_tracker_cpu_second'] or 0):,.0f} | "
            f"{(r['tracker_percent'] or 0):.0f} | {(r['others_percent'] or 0):.0f} | "
            f"{r['db_write_statements_per_second']:,.1f} | "
            f"{r['db_rows_written_per_second']:,.0f} | "
            + (f"{r['stop_seconds']:.1f} ({r.get('sigterms', 1)}) | " if stops else "")
            + f"{json.dumps(r['errors']) if r['errors'] else 0} |")
    if any(is_noisy(r) for r in runs):
        lines += ["", f"(noisy): processes other than the tracker, shoal-bench and MariaDB "
                  f"used more than {NOISY:.0f}% of a core over the run ('others %' counts "
                  "MariaDB too)."]
    lines += ["", "## Command", "", "```", meta["command"], "```", ""]
    text = "\n".join(lines)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"meta": meta, "runs": runs}, f, indent=1)
    return text


def report(args, runs, out, meta):
    names, by, table = contenders_table(runs)
    lines = [f"# shoal `--schema unit3d` against UNIT3D-Announce, {meta['date']}", ""]
    lines += [f"shoal commit {meta['commit']}; UNIT3D-Announce {meta['u3a']}; "
              f"{meta['rounds']} rounds, each contender once a round in the order below; "
              f"{args.warmup} warm-up then {args.duration} measured; tracker on CPU "
              f"{args.tracker_cpus}, shoal-bench on CPU {args.bench_cpus}, MariaDB on CPU "
              f"{args.db_cpus}; {args.users:,} users, {args.torrents:,} approved torrents, "
              f"{args.peers:,} simulated peers; HTTP keep-alive over "
              f"{args.connections} connections, `--user-agent {args.user_agent}`.", ""]
    lines += table + ratio_lines(names, by, "unit3d-announce http")
    return write_report(lines, runs, out, meta)


def options(description, site_tables, rival=None, rival_name=None, keep_alive_help=None,
            more=None):
    """The speed scripts' command line: `rival` is the other tracker's option (its binary;
    `--RIVAL-version` names its version for the report), none where shoal runs alone;
    `--keep-alive` where `keep_alive_help` is given; `more(parser)` adds a script's own.
    Exits where neither shoal nor the rival is given."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", required=True)
    p.add_argument("--ddl", required=True, help=f"{site_tables} tables (the test fixture's DDL)")
    p.add_argument("--bench", required=True, help="the shoal-bench binary")
    if rival:
        p.add_argument("--shoal", help=f"the shoal binary (left out: {rival_name} alone)")
        p.add_argument(f"--{rival}", help=f"the {rival_name} binary")
        p.add_argument(f"--{rival}-version", default="unknown")
    else:
        p.add_argument("--shoal", required=True, help="the shoal binary")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--duration", default="20s")
    p.add_argument("--warmup", default="5s")
    p.add_argument("--users", type=int, default=10_000)
    p.add_argument("--torrents", type=int, default=10_000)
    p.add_argument("--peers", type=int, default=100_000)
    p.add_argument("--connections", type=int, default=128)
    if keep_alive_help:
        p.add_argument("--keep-alive", action="store_true", help=keep_alive_help)
    p.add_argument("--user-agent", default="qBittorrent/4.6.5")
    p.add_argument("--tracker-cpus", default="0")
    p.add_argument("--bench-cpus", default="1")
    p.add_argument("--db-cpus", default="1")
    p.add_argument("--no-udp", action="store_true")
    p.add_argument("--commit", default="unknown")
    if more:
        more(p)
    args = p.parse_args()
    if rival and not args.shoal and not getattr(args, rival):
        sys.exit(f"nothing to run: give --shoal, --{rival} or both")
    return args


def load(args, db, work):
    """The site's tables (`--ddl`) and `--users` passkeys and `--torrents` info hashes from
    shoal-bench: (the passkeys file, the passkeys, the hashes)."""
    db.load_ddl(args.ddl)
    passkeys = os.path.join(work, "passkeys.txt")
    with open(passkeys, "w") as f:
        subprocess.run([args.bench, "passkeys", "--count", str(args.users)], stdout=f,
                       check=True)
    keys = open(passkeys).read().split()
    hashes = subprocess.run([args.bench, "info-hashes", "--torrents",
                             str(args.torrents)], capture_output=True, text=True,
                            check=True).stdout.split()
    return passkeys, keys, hashes


def run_rounds(args, db, trackers, passkeys, out, run=None, stops=False):
    """`--rounds` rounds, each (tracker, protocol) of `trackers` once a round in turn, each
    run (`run`, default one_run) printed as it ends (with its stop time where `stops`).
    Returns the runs."""
    run = run or one_run
    runs = []
    for round_no in range(1, args.rounds + 1):
        for tracker, protocol in trackers:
            r = run(args, db, tracker, protocol, passkeys, out, round_no)
            runs.append(r)
            print(f"round {round_no} {r['contender']}: "
                  f"{r['responses_per_second']:,.0f}/s, "
                  f"{(r['responses_per_tracker_cpu_second'] or 0):,.0f} per tracker "
                  f"CPU-s, DB {r['db_write_statements_per_second']:.1f} statements/s "
                  f"{r['db_rows_written_per_second']:,.0f} rows/s, "
                  + (f"stop {r['stop_seconds']:.1f} s, " if stops else "")
                  + f"errors {r['errors'] or 0}", flush=True)
    return runs


def main():
    args = options(__doc__.split("\n")[0], "UNIT3D's", "u3a", "UNIT3D-Announce",
                   more=lambda p: p.add_argument(
                       "--u3a-batches", type=int, default=1,
                       help="MAX_BATCHES_PER_FLUSH (v0.3 on; 1 as its .env.example has it)"))
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    work = site.tempdir("unit3d-speed-")
    db = site.MariaDB(os.path.join(work, "db"), cpus=args.db_cpus).start()
    trackers = []
    try:
        passkeys, keys, hashes = load(args, db, work)
        groups = site.insert_groups(db)
        site.insert_users(db, keys, groups["user"])
        site.insert_torrents(db, hashes, uploader=1)
        port = site.free_low_port()
        if args.shoal:
            shoal = site.Shoal(args.shoal, os.path.join(work, "shoal"), db.url, port,
                               unit3d=SHOAL_UNIT3D, cpus=args.tracker_cpus)
            trackers.append((shoal, "http"))
        if args.u3a:
            u3a = site.Unit3dAnnounce(args.u3a, os.path.join(work, "u3a"), db.url, port,
                                      apikey="b" * 32, cpus=args.tracker_cpus,
                                      env={"ANNOUNCE_MIN": "1",
                                           "MAX_BATCHES_PER_FLUSH": str(args.u3a_batches),
                                           # v0.2 on: no peer-list limits, as shoal's here
                                           "USER_RECEIVE_SEED_LIST_RATE_LIMITS": "",
                                           "USER_RECEIVE_LEECH_LIST_RATE_LIMITS": ""})
            trackers.append((u3a, "http"))
        if args.shoal and not args.no_udp:
            trackers.append((shoal, "udp"))
        runs = run_rounds(args, db, trackers, passkeys, out)
        for tracker, _ in trackers:
            log = os.path.join(tracker.workdir, "tracker.log")
            if os.path.exists(log):
                shutil.copy(log, os.path.join(out, f"{tracker.name}.log"))
        meta = {"date": datetime.date.today().isoformat(), "commit": args.commit,
                "u3a": args.u3a_version, "rounds": args.rounds,
                "command": " ".join(sys.argv)}
        print(report(args, runs, out, meta))
    finally:
        for tracker, _ in trackers:
            tracker.stop()
        db.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
