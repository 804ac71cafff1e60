#!/usr/bin/python3
"""Real-client test of private mode on a real PostgreSQL server (issue 11, point 3), which
the test installs if missing (Debian's postgresql) and starts itself in a private data
directory on a free loopback port (db_servers.py), once for this file:

  the scenarios of libtorrent_private_accounting.py (transfer, freeleech, client restart):
      the database's figures equal what libtorrent moved and reported;
  outage  the database server is stopped in the middle of a (slowed down) transfer while
      both clients announce every 1.5 s (force_reannounce): shoal answers every announce
      meanwhile (tracker replies keep coming, no tracker error), POST /api/private/flush
      answers 503; the server is started again, the transfer finishes, and after a flush
      the figures are complete (equal to what libtorrent moved and reported, within one
      piece).

libtorrent_private_mariadb.py runs the same against MariaDB. A server that cannot be
installed or started fails the test with the reason, unless SHOAL_SKIP_DB_SERVERS=1 (as for
the Rust tests of crates/accounts): then it says it skipped and passes. Prints "N passed, N failed" last;
exits non-zero on any failure.

  tests/real_clients/libtorrent_private_postgres.py        # target/release/shoal
  SHOAL_BIN=/path/to/shoal tests/real_clients/libtorrent_private_postgres.py --only outage
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
import db_servers  # noqa: E402
from libtorrent_private import finish, run_test  # noqa: E402
from libtorrent_private_accounting import Scenario, accounting, options  # noqa: E402
from lt_swarm import Results, log  # noqa: E402

NAMES = {"postgres": "PostgreSQL", "mariadb": "MariaDB"}
CLIENTS = ("seeder", "leecher")


def server_step(res, what, step):
    """Stops or starts the database server; False (after a failed check) if it cannot."""
    try:
        step()
        return True
    except db_servers.ServerError as e:
        return res.check(f"outage: {what}", False, str(e))


def outage(res, tracker, server, hold_s=6.0):
    """What happens once the leecher is into the download: the database server goes away
    for `hold_s` seconds while the clients keep announcing, then comes back."""
    name = NAMES[server.kind]

    def during(swarm):
        since = len(swarm.pump.events)
        progress = swarm.progress("leecher")
        if not server_step(res, f"{name} stops", server.stop):
            return False
        log(f"outage: {name} stopped with the leecher at {progress:.0%}")
        t0 = time.monotonic()
        flush, flush_s, forced = None, None, 0
        while time.monotonic() - t0 < hold_s:
            swarm.reannounce(CLIENTS)
            forced += 1
            swarm.wait(lambda: None, 1.5)
            if flush is None:
                began = time.monotonic()
                flush, flush_s = tracker.flush(), time.monotonic() - began
        replies = {c: swarm.pump.count(c, "tracker_reply_alert", since) for c in CLIENTS}
        errors = [f.get("reason") for c, k, f in swarm.pump.events[since:] if k == "tracker_error_alert"]
        res.check(f"outage: POST /api/private/flush answers 503 while {name} is down", flush == 503,
                  f"got {flush} in {flush_s:.1f} s")
        res.check(f"outage: shoal answers every announce while {name} is down (replies keep coming, no "
                  "tracker error)", all(n >= forced for n in replies.values()) and not errors,
                  f"{forced} forced reannounces; replies {replies}; errors {errors}")
        moved_on = swarm.progress("leecher")
        res.check("outage: the transfer went on meanwhile", moved_on > progress,
                  f"progress {progress:.1%} -> {moved_on:.1%}")
        if not server_step(res, f"{name} starts again", server.start):
            return False
        log(f"outage: {name} is back after {time.monotonic() - t0:.1f} s")
        return True

    return during


def start_server(kind, start=None):
    """The test's database server (`kind`, started by `start` where given): (server, None),
    or (None, the test's exit status) where it cannot be installed or started: a failed
    check, or a skip (status 0) under SHOAL_SKIP_DB_SERVERS=1."""
    name = NAMES[kind]
    try:
        server = start() if start is not None else db_servers.start(kind)
    except (db_servers.ServerError, OSError, subprocess.SubprocessError) as e:
        if os.environ.get("SHOAL_SKIP_DB_SERVERS") == "1":
            print(f"SKIPPED (SHOAL_SKIP_DB_SERVERS=1): {name} could not be installed or started: {e}")
            print("0 passed, 0 failed")
            return None, 0
        res = Results()
        res.check(f"{name} is installed and started on a free loopback port", False, str(e))
        return None, res.summary()
    log(f"{name} on 127.0.0.1:{server.port}, data in {server.dir}")
    return server, None


def main(kind="postgres"):
    name = NAMES[kind]
    args = options(__doc__.replace("PostgreSQL", name), extra_scenarios=["outage"])
    server, status = start_server(kind)
    if server is None:
        return status

    def body(res, tracker, directory):
        accounting(res, tracker, args, directory)
        if "outage" in args.which:
            s = Scenario(res, tracker, args, directory, "outage", 50, hybrid=True, size_mib=args.size_mib + 2)
            if s.registered:
                s.check_accounts(s.run("udp", "http", rate=512 << 10, at=0.2, during=outage(res, tracker, server)))

    try:
        database = server.create_database("shoal_lt")
        return run_test(f"shoal-lt-private-{kind}-", body, database=database, where=name)
    finally:
        server.close()


if __name__ == "__main__":
    finish(main())
