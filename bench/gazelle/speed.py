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

import datetime
import importlib.util
import os
import shutil
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

SITE_PASSWORD = "S" * 32
REPORT_PASSWORD = "R" * 32
BASE = "ocelot http"


def run_bench(args, protocol, port, tracker_pid, json_path, passkeys):
    """UNIT3D's load (bench/unit3d/speed.py) on Gazelle's announce URL, without keep-alive
    unless --keep-alive."""
    return _u3.run_bench(args, protocol, port, tracker_pid, json_path, passkeys,
                         passkey_path="/{passkey}/announce", keep_alive=args.keep_alive)


def one_run(args, db, tracker, protocol, passkeys, out, round_no):
    """UNIT3D's run (bench/unit3d/speed.py) under this site's load."""
    return _u3.one_run(args, db, tracker, protocol, passkeys, out, round_no, bench=run_bench)


def report(args, runs, out, meta):
    names, by, table = _u3.contenders_table(runs)
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
    lines += table
    if args.shoal and not any(n.startswith("shoal") for n in names):
        lines += [f"shoal ({args.shoal}) did not start with `--schema gazelle`: left out.",
                  ""]
    lines += _u3.ratio_lines(names, by, BASE)
    return _u3.write_report(lines, runs, out, meta, stops=True)


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
    args = _u3.options(__doc__.split("\n")[0], "Gazelle's", "ocelot", "Ocelot",
                       keep_alive_help="reuse connections (Ocelot then needs keepalive_timeout > 0)")
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    work = site.tempdir("gazelle-speed-")
    db = site.MariaDB(os.path.join(work, "db"), cpus=args.db_cpus).start()
    trackers = []
    try:
        passkeys, keys, hashes = _u3.load(args, db, work)
        site.insert_users(db, keys)
        site.insert_torrents(db, hashes, uploader=1)
        trackers = contenders(args, db, work)
        if not trackers:
            sys.exit("no tracker to run")
        runs = _u3.run_rounds(args, db, trackers, passkeys, out, run=one_run, stops=True)
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
