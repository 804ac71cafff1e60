#!/usr/bin/python3
"""Real-client test of private-mode accounting (issue 11, point 2): what shoal writes to its
database equals what libtorrent moved and reported, with the database SQLite (the default).

Each scenario has its own seeder and leecher users (registered with PUT /api/users), a torrent
registered with PUT /api/torrents, and libtorrent clients on passkey URLs. After the transfer
each client is stopped (its counters read, then a stopped announce per hash that the tracker
must answer), POST /api/private/flush writes what is pending, and GET /api/users/<id> must
show, for the user and for its row of the torrent, uploaded and downloaded equal to what
libtorrent reports to trackers (torrent_status.total_payload_upload and
total_payload_download less failed and redundant bytes: the counters of its session with
the torrent, which are what it announces) within one piece (64 KiB; a client stopped
mid-download announces a few KiB less than its status showed, the part of a block it was
receiving when it disconnected):

  transfer   a hybrid torrent (v2 registered), seeder over HTTP, leecher over UDP; the
             leecher's completion is recorded (completed 1, completed_at set);
  freeleech  a v1 torrent with download_factor 0, seeder over UDP, leecher over HTTP: the
             leecher's downloaded is recorded 0, the seeder's upload is counted;
  restart    a hybrid torrent; the leecher (slowed down) announces at ~40% and is then
             stopped and removed, then a new libtorrent session starts it again from the
             partial data (its counters from zero) and finishes: the leecher's downloaded
             equals both runs together, within two pieces (nothing lost, nothing counted
             twice). libtorrent's stopped announce reports a few KiB less than the
             announce before it (the block it was receiving is left out): a tracker that
             takes that for a client restart counts the first run twice.

libtorrent_private_postgres.py and libtorrent_private_mariadb.py run the same scenarios
against real database servers, plus an outage. Prints "N passed, N failed" last; exits
non-zero on any failure.

  tests/real_clients/libtorrent_private_accounting.py      # target/release/shoal, SQLite
  SHOAL_BIN=/path/to/shoal tests/real_clients/libtorrent_private_accounting.py --only restart
"""
import argparse
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from libtorrent_private import PIECE, Swarm, finish, hashes, make_torrent, new_passkey, run_test  # noqa: E402
from lt_swarm import log, write_payload  # noqa: E402

SCENARIOS = ["transfer", "freeleech", "restart"]


def options(description, extra_scenarios=()):
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--timeout", type=float, default=60, help="time limit per transfer, seconds (default 60)")
    ap.add_argument("--size-mib", type=int, default=4, help="size of each random file (default 4 MiB)")
    ap.add_argument("--only", choices=SCENARIOS + list(extra_scenarios), action="append",
                    help="run only these scenarios (repeatable)")
    ap.add_argument("--verbose", action="store_true", help="log every libtorrent alert")
    args = ap.parse_args()
    args.which = args.only or SCENARIOS + list(extra_scenarios)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return args


class Scenario:
    """One scenario's users, torrent and file: a seeder user and a leecher user with fresh
    passkeys, so that their totals are this scenario's alone."""

    def __init__(self, res, tracker, args, base, label, first_user, hybrid, size_mib=None, **torrent_fields):
        self.res = res
        self.tracker = tracker
        self.args = args
        self.label = label
        self.dir = os.path.join(base, label)
        self.seeder, self.leecher = first_user, first_user + 1
        self.keys = {self.seeder: new_passkey(), self.leecher: new_passkey()}
        path, self.payload = write_payload(os.path.join(self.dir, "seeder"), (size_mib or args.size_mib) << 20)
        self.ti = make_torrent(path, hybrid)
        v1, v2 = hashes(self.ti)
        log(f"{label}: torrent v1 {v1} v2 {v2} {torrent_fields}")
        self.registered = res.check(
            f"{label}: users {self.seeder} and {self.leecher} and the torrent are registered (PUT /api/users, "
            f"PUT /api/torrents{' with v2' if v2 else ''}{' ' + str(torrent_fields) if torrent_fields else ''})",
            all(tracker.put_user(u, k) for u, k in self.keys.items()) and tracker.put_torrent(self.ti, **torrent_fields))

    def url(self, proto, user):
        return self.tracker.url(proto, self.keys[user])

    def run(self, seed_proto, leech_proto, rate=0, at=None, restart_proto=None, during=None):
        """The transfer: returns {"seeder": [up, down], "leecher": [up, down]}, the bytes
        libtorrent moved and reported (summed over the leecher's runs), or None if it did
        not get that far. With `at`, once the leecher has that fraction: a restart of the
        leecher (`restart_proto`: the second run's protocol) and/or `during(swarm)`."""
        label, res = self.label, self.res
        swarm = Swarm(res, label, self.ti, self.payload, self.dir, self.args.verbose)
        moved = {"seeder": [0, 0], "leecher": [0, 0]}
        self.leecher_runs = []  # what the leecher downloaded in each of its runs

        def stop(names):
            got = swarm.stop(names)
            if not res.check(f"{label}: the stopped announces of the {' and '.join(names)} are answered",
                             got is not None):
                return False
            for name in names:
                moved[name] = [m + g for m, g in zip(moved[name], got[name])]
            if "leecher" in names:
                self.leecher_runs.append(got["leecher"][1])
            return True

        try:
            swarm.join("seeder", self.url(seed_proto, self.seeder), seed=True)
            if not res.check(f"{label}: seeder ({seed_proto}) gets a tracker reply", swarm.wait_reply("seeder")):
                return None
            swarm.join("leecher", self.url(leech_proto, self.leecher), seed=False, download_rate_limit=rate)
            if not res.check(f"{label}: leecher ({leech_proto}) gets a reply with >= 1 peer",
                             swarm.wait_reply("leecher", min_peers=1)):
                return None
            if at is not None:
                reached = swarm.wait(lambda: swarm.progress("leecher") >= at, self.args.timeout)
                if not res.check(f"{label}: leecher reaches {at:.0%}", reached,
                                 f"progress {swarm.progress('leecher'):.1%}"):
                    return None
            if restart_proto is not None:
                # A client announces while it downloads; the last announce before it is
                # stopped counts the part of the block it is receiving, which libtorrent
                # then leaves out of its stopped announce (a counter that goes down a bit).
                since = len(swarm.pump.events)
                swarm.reannounce(["leecher"])
                res.check(f"{label}: the leecher's announce mid-download is answered",
                          swarm.wait_reply("leecher", since=since))
                partial = swarm.progress("leecher")
                if not stop(["leecher"]):
                    return None
                save_dir = swarm.clients["leecher"][2]
                swarm.leave("leecher")
                log(f"{label}: leecher stopped at {partial:.1%} having downloaded {moved['leecher'][1]} bytes; "
                    f"starting it again in a new session over {restart_proto}")
                swarm.join("leecher", self.url(restart_proto, self.leecher), seed=False, save_dir=save_dir)
                res.check(f"{label}: the restarted leecher ({restart_proto}) gets a reply with >= 1 peer",
                          swarm.wait_reply("leecher", min_peers=1))
            if during is not None and not during(swarm):
                return None
            swarm.handle("leecher").set_download_limit(0)
            finished, sources = swarm.wait_done("leecher", self.args.timeout)
            swarm.check_bytes("leecher", f"{label}: leecher downloads the file and its bytes equal the seed's",
                              finished)
            swarm.check_sources(f"{label}: leecher's peers came from the tracker", sources)
            if not finished or not stop(["seeder", "leecher"]):
                return None
            log(f"{label}: libtorrent moved (up, down): {moved}")
            return moved
        finally:
            for name in list(swarm.clients):
                swarm.leave(name)

    def flush(self, timeout_s=30):
        """POST /api/private/flush until it answers 200 (the database may be coming back)."""
        deadline = time.monotonic() + timeout_s
        status = None
        while time.monotonic() < deadline:
            status = self.tracker.flush()
            if status not in (None, 503):
                break
            time.sleep(1)
        return self.res.check(f"{self.label}: POST /api/private/flush answers 200", status == 200, f"got {status}")

    def check_accounts(self, moved, tolerance=PIECE, download_factor=1.0):
        """The database's figures for both users, in total and on this torrent, against
        what libtorrent moved (downloads times `download_factor`)."""
        if moved is None or not self.flush():
            return
        for role, user in (("seeder", self.seeder), ("leecher", self.leecher)):
            up, down = moved[role][0], int(moved[role][1] * download_factor)
            figures, rows = self.tracker.account(user, self.ti)
            if not self.res.check(f"{self.label}: GET /api/users/{user} ({role}) has one row for the torrent",
                                  rows is not None and len(rows) == 1, f"{rows}"):
                continue
            row = rows[0]
            for what, got_user, got_row, want in (("uploaded", figures["uploaded"], row["uploaded"], up),
                                                  ("downloaded", figures["downloaded"], row["downloaded"], down)):
                self.res.check(f"{self.label}: {role}'s {what} in the database (user total and torrent row) equals "
                               f"what libtorrent reported, within {tolerance // 1024} KiB",
                               abs(got_user - want) <= tolerance and abs(got_row - want) <= tolerance,
                               f"user {got_user}, row {got_row}, libtorrent {want}"
                               + (f" (x download factor {download_factor})" if download_factor != 1 else ""))
        figures, rows = self.tracker.account(self.leecher, self.ti)
        if rows:
            self.res.check(f"{self.label}: the leecher's completion is recorded once (completed 1, completed_at set)",
                           figures["completed"] == 1 and rows[0]["completed_at"] is not None,
                           f"completed {figures['completed']}, completed_at {rows[0]['completed_at']}")


def accounting(res, tracker, args, base, first_user=10):
    """The scenarios of args.which that this file defines, on a running tracker."""
    if "transfer" in args.which:
        s = Scenario(res, tracker, args, base, "transfer", first_user, hybrid=True)
        if s.registered:
            s.check_accounts(s.run("http", "udp"))
    if "freeleech" in args.which:
        s = Scenario(res, tracker, args, base, "freeleech", first_user + 10, hybrid=False, download_factor=0.0)
        if s.registered:
            moved = s.run("udp", "http")
            s.check_accounts(moved, download_factor=0.0)
            if moved:
                res.check("freeleech: the leecher really downloaded (libtorrent's counter is the file's size or more)",
                          moved["leecher"][1] >= len(s.payload), f"{moved['leecher'][1]} bytes")
    if "restart" in args.which:
        s = Scenario(res, tracker, args, base, "restart", first_user + 20, hybrid=True, size_mib=args.size_mib + 2)
        if s.registered:
            moved = s.run("http", "udp", rate=512 << 10, at=0.4, restart_proto="http")
            s.check_accounts(moved, tolerance=2 * PIECE)
            if moved:
                size, runs = len(s.payload), s.leecher_runs
                res.check("restart: each leecher run moved a part of the file (the second resumed from the "
                          "partial data of the first)", len(runs) == 2 and all(0 < r < size for r in runs),
                          f"downloaded per run {runs} of {size}")


def main():
    args = options(__doc__)
    return run_test("shoal-lt-private-acct-", lambda res, tracker, directory: accounting(res, tracker, args, directory))


if __name__ == "__main__":
    finish(main())
