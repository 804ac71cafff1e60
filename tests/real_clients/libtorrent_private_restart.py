#!/usr/bin/python3
"""Real-client test of private mode across a tracker restart (issue 11, point 4): shoal is
stopped with SIGTERM in the middle of a libtorrent transfer, after both clients' counters
were announced, and started again with the same database (SQLite) and state file; the
transfer finishes; then the database's figures equal what libtorrent moved and reported,
within one piece: what was pending at SIGTERM was written (or carried in the state file),
and the clients' first announces after the restart count only what they moved since their
last announce before it (the per-peer baselines came back), so nothing is lost and nothing
counted twice. No passkey appears in the logs of either run or in /metrics.

The scenario is libtorrent_private_accounting.py's (a hybrid torrent with its v2 hash
registered, seeder over HTTP, leecher over UDP, the leecher slowed down so that the
transfer outlasts the restart). Prints "N passed, N failed" last; exits non-zero on any
failure.

  tests/real_clients/libtorrent_private_restart.py        # target/release/shoal
  SHOAL_BIN=/path/to/shoal tests/real_clients/libtorrent_private_restart.py --verbose
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
from libtorrent_private import PIECE, finish, reported, run_test  # noqa: E402
from libtorrent_private_accounting import Scenario, options  # noqa: E402
from lt_swarm import log  # noqa: E402

CLIENTS = ("seeder", "leecher")


def reannounce(swarm, what, timeout_s=15):
    """Both clients announce now; True once each got a reply to it."""
    since = len(swarm.pump.events)
    swarm.reannounce(CLIENTS)
    got = swarm.wait(lambda: all(swarm.pump.find(n, "tracker_reply_alert", since=since) for n in CLIENTS), timeout_s)
    errors = [f.get("reason") for n, k, f in swarm.pump.events[since:] if k == "tracker_error_alert"]
    return swarm.res.check(f"sigterm: {what}: both clients' announces are answered", bool(got), f"errors {errors}")


def sigterm_and_restart(res, tracker):
    """What happens once the leecher is well into the download: SIGTERM, start again."""

    def during(swarm):
        if not reannounce(swarm, f"at {swarm.progress('leecher'):.0%}, before SIGTERM"):
            return False
        announced = reported(swarm.handle("leecher").status())[1]
        status = tracker.sigterm()
        res.check("sigterm: shoal exits with status 0 within 30 s of SIGTERM", status == 0, f"status {status}")
        res.check("sigterm: the state file was written", os.path.exists(tracker.state))
        started = tracker.start()
        st = swarm.handle("leecher").status()
        log(f"sigterm: shoal started again; the leecher is at {st.progress:.0%}")
        if not res.check("sigterm: shoal starts again with the same database and state file", started):
            return False
        away = reported(st)[1] - announced
        # Whether bytes moved while shoal was away depends on libtorrent's pacing on a busy
        # machine; the accounting checks below hold either way (they compare the database
        # with everything libtorrent moved), this only says how strong this run's check is.
        if away > 2 * PIECE and st.progress < 1.0:
            print(f"  sigterm: {away} bytes moved while shoal was away (progress {st.progress:.1%}): "
                  "losing them would show", flush=True)
        else:
            print(f"  NOTE sigterm: only {away} bytes moved while shoal was away this run "
                  f"(progress {st.progress:.1%}); the totals below are still checked", flush=True)
        return reannounce(swarm, "after the restart")

    return during


def main():
    args = options(__doc__)

    def body(res, tracker, directory):
        s = Scenario(res, tracker, args, directory, "sigterm", 40, hybrid=True, size_mib=args.size_mib + 2)
        if s.registered:
            s.check_accounts(s.run("http", "udp", rate=768 << 10, at=0.3, during=sigterm_and_restart(res, tracker)))

    return run_test("shoal-lt-private-sigterm-", body)


if __name__ == "__main__":
    finish(main())
