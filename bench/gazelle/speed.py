"""shoal with `--schema gazelle` against Ocelot on the same MariaDB (Gazelle's tables, strict
sql_mode), the same members and torrents, under the same shoal-bench HTTP load without
keep-alive (Ocelot closes every connection by default, and Gazelle sites run it so); shoal
over UDP under the same load beside them. Run by bench/gazelle.sh, which documents the
environment.

Every round runs each contender once, in the same order (shoal HTTP, Ocelot HTTP, shoal
UDP): the site's activity is emptied, the tracker is started pinned to the tracker CPU (it
reads the site's tables at start), shoal-bench loads it from the other CPU
(`--tracker-pid`: the tracker's CPU over the measured window, warm-up excluded),
MariaDB's write counters are read before and after the load, and the tracker is stopped
with SIGTERM (both write what they hold; Ocelot gets a second SIGTERM if it has not
exited a minute later). The report gives responses per tracker CPU-second (min / median /
max over the rounds), shoal's ratio to Ocelot round by round, and database writes per
second.
"""

import argparse
import datetime
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import site_db as site  # noqa: E402

# UNIT3D's speed script, for what the two share. Its `import site_db` finds this directory's
# site_db already imported, so its runs empty and read Gazelle's tables.
_spec = importlib.util.spec_from_file_location(
    "unit3d_speed",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "unit3d", "speed.py"))
_u3 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_u3)
NOISY, is_noisy, mmm, mmm_ratio = _u3.NOISY, _u3.is_noisy, _u3.mmm, _u3.mmm_ratio

SITE_PASSWORD = "S" * 32
REPORT_PASSWORD = "R" * 32
BASE = "ocelot http"


def run_bench(args, protocol, port, tracker_pid, json_path, passkeys):
    """One shoal-bench load against 127.0.0.1:port, pinned to the load CPU."""
    common = ["--duration", args.duration, "--warmup", args.warmup,
              "--tracker-pid", str(tracker_pid), "--json", json_path, "--quiet",
              "--torrents", str(args.torrents), "--peers", str(args.peers),
              "--weight-scrape", "0", "--passkeys", passkeys,
              "--passkey-path", "/{passkey}/announce"]
    if protocol == "http":
        cmd = [args.bench, "http", "--target", f"http://127.0.0.1:{port}/announce",
               "--connections", str(args.connections), "--user-agent", args.user_agent]
        if not args.keep_alive:
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


def one_run(args, db, tracker, protocol, passkeys, out, round_no):
    """UNIT3D's run (bench/unit3d/speed.py) under this site's load."""
    return _u3.one_run(args, db, tracker, protocol, passkeys, out, round_no, bench=run_bench)


def ratio_line(name, by):
    pairs = [(a, b) for a in by[name] for b in by[BASE] if a["round"] == b["round"]]
    ratios = [a["responses_per_tracker_cpu_second"] / b["responses_per_tracker_cpu_second"]
              for a, b in pairs if a["responses_per_tracker_cpu_second"]
              and b["responses_per_tracker_cpu_second"]]
    med_a = statistics.median([a["responses_per_tracker_cpu_second"] or 0 for a in by[name]])
    med_b = statistics.median([b["responses_per_tracker_cpu_second"] or 0 for b in by[BASE]])
    return (f"- **{name} / {BASE}**, per tracker CPU-second: round by round (min / median "
            f"/ max) {mmm_ratio(ratios)}; ratio of medians "
            f"{med_a / med_b if med_b else 0:.2f}x.")


def report(args, runs, out, meta):
    names = list(dict.fromkeys(r["contender"] for r in runs))
    by = {n: [r for r in runs if r["contender"] == n] for n in names}
    conn = (f"HTTP {'keep-alive' if args.keep_alive else 'without keep-alive (a connection per request)'}"
            f" over {args.connections} connections")
    lines = [f"# shoal `--schema gazelle` against Ocelot, {meta['date']}", ""]
    lines += [f"shoal commit {meta['commit']}; Ocelot {meta['ocelot']}; {meta['rounds']} "
              f"rounds, each contender once a round in the order below; {args.warmup} "
              f"warm-up then {args.duration} measured; tracker on CPU {args.tracker_cpus}, "
              f"shoal-bench on CPU {args.bench_cpus}, MariaDB on CPU {args.db_cpus} "
              f"(sql_mode {site.STRICT_SQL_MODE}); {args.users:,} members, "
              f"{args.torrents:,} torrents, {args.peers:,} simulated peers; {conn}, "
              f"`--user-agent {args.user_agent}`.", ""]
    lines += ["| contender | responses per tracker CPU-s (min / median / max) | "
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
    if args.shoal and not any(n.startswith("shoal") for n in names):
        lines += [f"shoal ({args.shoal}) did not start with `--schema gazelle`: left out.",
                  ""]
    if BASE in by:
        lines += [ratio_line(n, by) for n in names if n != BASE] + [""]
    lines += ["## Round by round", "",
              "| round | contender | responses/s | per tracker CPU-s | tracker % | "
              "others % | DB statements/s | DB rows/s | stop s (SIGTERMs) | errors |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        noisy = " (noisy)" if is_noisy(r) else ""
        lines.append(
            f"| {r['round']} | {r['contender']}{noisy} | {r['responses_per_second']:,.0f} | "
            f"{(r['responses_per_tracker_cpu_second'] or 0):,.0f} | "
            f"{(r['tracker_percent'] or 0):.0f} | {(r['others_percent'] or 0):.0f} | "
            f"{r['db_write_statements_per_second']:,.1f} | "
            f"{r['db_rows_written_per_second']:,.0f} | "
            f"{r['stop_seconds']:.1f} ({r['sigterms']}) | "
            f"{json.dumps(r['errors']) if r['errors'] else 0} |")
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


def contenders(args, db, work):
    """(tracker, protocol) in the order each round runs them; a shoal that does not start
    (one without `--schema gazelle`) is left out with a message."""
    port = site.free_low_port()
    out = []
    # The same rules for both: Ocelot's defaults (interval 1800 + jitter 240, numwant
    # limit 50, writes every 3 s).
    if args.shoal:
        shoal = site.Shoal(args.shoal, os.path.join(work, "shoal"), db, port, SITE_PASSWORD,
                           REPORT_PASSWORD, cpus=args.tracker_cpus)
        try:
            shoal.start()
            shoal.stop()
            out.append((shoal, "http"))
        except RuntimeError as e:
            print(f"shoal left out: {e} (see {shoal.workdir}/tracker.log)", flush=True)
            shoal = None
    if args.ocelot:
        ocelot = site.Ocelot(args.ocelot, os.path.join(work, "ocelot"), db, port,
                             SITE_PASSWORD, REPORT_PASSWORD, cpus=args.tracker_cpus,
                             conf={"keepalive_timeout": 60} if args.keep_alive else None)
        ocelot.first_wait = 60.0
        out.append((ocelot, "http"))
    if args.shoal and shoal and not args.no_udp:
        out.append((shoal, "udp"))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--ddl", required=True, help="Gazelle's tables (the test fixture's DDL)")
    p.add_argument("--bench", required=True, help="the shoal-bench binary")
    p.add_argument("--shoal", help="the shoal binary (left out: Ocelot alone)")
    p.add_argument("--ocelot", help="the Ocelot binary")
    p.add_argument("--ocelot-version", default="unknown")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--duration", default="20s")
    p.add_argument("--warmup", default="5s")
    p.add_argument("--users", type=int, default=10_000)
    p.add_argument("--torrents", type=int, default=10_000)
    p.add_argument("--peers", type=int, default=100_000)
    p.add_argument("--connections", type=int, default=128)
    p.add_argument("--keep-alive", action="store_true",
                   help="reuse connections (Ocelot then needs keepalive_timeout > 0)")
    p.add_argument("--user-agent", default="qBittorrent/4.6.5")
    p.add_argument("--tracker-cpus", default="0")
    p.add_argument("--bench-cpus", default="1")
    p.add_argument("--db-cpus", default="1")
    p.add_argument("--no-udp", action="store_true")
    p.add_argument("--commit", default="unknown")
    args = p.parse_args()
    if not args.shoal and not args.ocelot:
        sys.exit("nothing to run: give --shoal, --ocelot or both")
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    work = site.tempdir("gazelle-speed-")
    db = site.MariaDB(os.path.join(work, "db"), cpus=args.db_cpus).start()
    trackers = []
    try:
        db.load_ddl(args.ddl)
        passkeys = os.path.join(work, "passkeys.txt")
        with open(passkeys, "w") as f:
            subprocess.run([args.bench, "passkeys", "--count", str(args.users)], stdout=f,
                           check=True)
        keys = open(passkeys).read().split()
        hashes = subprocess.run([args.bench, "info-hashes", "--torrents",
                                 str(args.torrents)], capture_output=True, text=True,
                                check=True).stdout.split()
        site.insert_users(db, keys)
        site.insert_torrents(db, hashes, uploader=1)
        trackers = contenders(args, db, work)
        if not trackers:
            sys.exit("no tracker to run")
        runs = []
        for round_no in range(1, args.rounds + 1):
            for tracker, protocol in trackers:
                r = one_run(args, db, tracker, protocol, passkeys, out, round_no)
                runs.append(r)
                print(f"round {round_no} {r['contender']}: "
                      f"{r['responses_per_second']:,.0f}/s, "
                      f"{(r['responses_per_tracker_cpu_second'] or 0):,.0f} per tracker "
                      f"CPU-s, DB {r['db_write_statements_per_second']:.1f} statements/s "
                      f"{r['db_rows_written_per_second']:,.0f} rows/s, stop "
                      f"{r['stop_seconds']:.1f} s, errors {r['errors'] or 0}", flush=True)
        meta = {"date": datetime.date.today().isoformat(), "commit": args.commit,
                "ocelot": args.ocelot_version, "rounds": args.rounds,
                "command": " ".join(sys.argv)}
        print(report(args, runs, out, meta))
    finally:
        for tracker, _ in trackers:
            tracker.stop()
        db.stop()
        site.copy_logs(work, out)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
