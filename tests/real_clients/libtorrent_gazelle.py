#!/usr/bin/python3
"""Real-client test of shoal as a Gazelle site's announce server (issue 34, points 1 and 3):
a real MariaDB (installed if missing and started by the test, db_servers.py) in the strict
sql_mode of Gazelle's development setup, holding Gazelle's tables (tests/fixtures/gazelle.sql)
and the rows the site inserts (users in `users_main` with 32-character passkeys and their
`users_leech_stats` row, torrents with the libtorrent torrents' info hashes and their
`torrents_leech_stats` row, a freeleech token in `users_freeleeches`), shoal started on it
with --private --schema gazelle and the site's two passwords, libtorrent clients on the URLs
the site hands out: http://HOST:P/<passkey>/announce, the same path over UDP (BEP 41 URL
data) and both on [::1]. Writes happen only on POST /api/private/flush (schedule_interval is
an hour), so each check knows which write it reads.

Scenarios (each with its own users and torrent):
  http, udp, ipv6  a seeder and a leecher over HTTP (over UDP; over [::1], the seeder on
      UDP, the leecher on HTTP): while both run, a flush writes `torrents_leech_stats`
      Seeders 1, Leechers 1, last_action and their two `xbt_files_users` rows (active, the leecher with
      something remaining); after both stop and a flush: `users_leech_stats` (Uploaded and
      Downloaded gained), `torrents_leech_stats` (Seeders 0, Leechers 0, Snatched 1,
      Balance), `xbt_files_users` (libtorrent's peer id, address, agent, reported totals,
      nothing remaining, not active) and `xbt_snatched` (one row, the leecher's, with its
      address) equal what libtorrent moved and reported, within one piece (64 KiB);
  freeleech  FreeTorrent '1': the leecher is credited no download, the seeder its upload;
  neutral    FreeTorrent '2': neither is credited anything;
  token  a normal torrent on which the leecher holds a token (a `users_freeleeches` row,
      not expired): no download credited, and the token's row holds what it saved (the
      bytes downloaded); the leecher is stopped once halfway without an announce before
      (its stopped announce carries all it moved in that session) and then finishes in a
      new session (a second `xbt_files_users` row, its new peer id);
  refusals  a client with a passkey no member has is refused ("Passkey not found"), one
      announcing an info hash the site does not know too ("Unregistered torrent");
  outage  MariaDB is stopped in the middle of a (slowed down) transfer while both clients
      announce every 1.5 s: every announce is answered, POST /api/private/flush answers
      503; MariaDB is started again, the transfer finishes, a flush writes everything: the
      rows are those of the http scenario (nothing lost);
  restart  (a slowed down transfer, seeder over HTTP, leecher over UDP) both clients'
      counters announced, then SIGTERM: shoal exits 0 and the rows it had not written are
      in the tables right after it exited (no flush ran before); while it is away the
      transfer goes on; shoal is started again on the same database and state file: a new
      user's client is served and downloads, the old clients announce again and everything
      finishes: the rows equal what the three clients moved over both runs (nothing
      twice, nothing lost), Snatched 2.
No passkey appears in shoal's log or in /metrics.

A MariaDB that cannot be installed or started fails the test with the reason, unless
SHOAL_SKIP_DB_SERVERS=1: then it says it skipped and passes. Prints "N passed, N failed"
last; exits non-zero on any failure.

  tests/real_clients/libtorrent_gazelle.py                  # target/release/shoal
  SHOAL_BIN=/path/to/shoal tests/real_clients/libtorrent_gazelle.py --only token
"""
import os
import secrets
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
import db_servers  # noqa: E402
import libtorrent_private  # noqa: E402
import libtorrent_private_accounting  # noqa: E402
import lt_site  # noqa: E402
import lt_swarm  # noqa: E402
from libtorrent_private import PIECE, Swarm, finish  # noqa: E402
from lt_site import CLIENTS, UPLOADER, SiteDb, SiteScenario, SiteTracker, near  # noqa: E402
from lt_swarm import REPO  # noqa: E402

FIXTURE = os.path.join(REPO, "tests/fixtures/gazelle.sql")
# The sql_mode of Gazelle's development setup (its docker-compose.yml), set on the server
# every time it starts.
SQL_MODE = "STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
SCENARIOS = ["http", "udp", "ipv6", "freeleech", "neutral", "token", "refusals", "outage", "restart"]
STARTING_UPLOAD = 3 << 30  # what a new Gazelle account starts with (its STARTING_UPLOAD)
SITE_PASSWORD = secrets.token_hex(16)  # 32 characters, as Gazelle's TRACKER_SECRET
REPORT_PASSWORD = secrets.token_hex(16)


class GSwarm(Swarm):
    """libtorrent_private's Swarm whose clients on a [::1] tracker URL run in a session on
    ::1 (an IPv6 peer announcing over IPv6)."""

    def join(self, name, url, seed, **kw):
        host = "::1" if "://[::1]" in url else "127.0.0.1"
        libtorrent_private.session = lambda: lt_swarm.session(host)
        try:
            return super().join(name, url, seed, **kw)
        finally:
            libtorrent_private.session = lt_swarm.session


# Scenario.run builds its swarm from this name.
libtorrent_private_accounting.Swarm = GSwarm


class GazelleDb(SiteDb):
    """The Gazelle site's database on the test's MariaDB: Gazelle's tables (the fixture's
    DDL) and the rows the site inserts, read and written with the `mariadb` client."""

    def __init__(self, server, name):
        super().__init__(server, name, FIXTURE,
                         "insert into torrents_group (ID, CategoryID, Name, WikiBody, WikiImage) "
                         "values (1, 1, 'An album', 'About it.', '')")

    def add_user(self, user_id, name):
        """An enabled member as the site registers one (with its `users_leech_stats` row and
        the starting upload); its passkey (32 characters)."""
        passkey = secrets.token_hex(16)
        self.passkeys.append(passkey)
        self.execute(f"insert into users_main (ID, Username, Email, PassHash, IP, Enabled, PermissionID, "
                     f"torrent_pass, auth_key, stylesheet_id) values ({user_id}, '{name}', '{name}@example.org', "
                     f"'$2y$10$hash', '198.51.100.{user_id % 250}', '1', 2, '{passkey}', "
                     f"'{secrets.token_hex(16)}', 1); "
                     f"insert into users_leech_stats (UserID, Uploaded, Downloaded) "
                     f"values ({user_id}, {STARTING_UPLOAD}, 0)")
        return passkey

    def add_torrent(self, torrent_id, info_hash, free="0"):
        """A torrent of the album with this v1 info hash, FreeTorrent `free` ('0' normal,
        '1' free, '2' neutral), and its `torrents_leech_stats` row."""
        self.execute(f"insert into torrents (ID, GroupID, UserID, Media, Format, Encoding, info_hash, FileCount, "
                     f"FileList, Size, FreeTorrent, FreeLeechType) values ({torrent_id}, 1, {UPLOADER}, 'CD', 'FLAC', "
                     f"'Lossless', 0x{info_hash}, 1, 'payload.bin', 4194304, '{free}', '{0 if free == '0' else 1}'); "
                     f"insert into torrents_leech_stats (TorrentID) values ({torrent_id})")

    def add_token(self, user_id, torrent_id):
        """A freeleech token the member spent on the torrent."""
        self.execute(f"insert into users_freeleeches (UserID, TorrentID, Time) "
                     f"values ({user_id}, {torrent_id}, now())")

    def user(self, user_id):
        r = self.rows(f"select Uploaded, Downloaded from users_leech_stats where UserID = {user_id}")[0]
        return int(r["Uploaded"]) - STARTING_UPLOAD, int(r["Downloaded"])

    def torrent(self, torrent_id):
        return self.rows(f"select Seeders, Leechers, Snatched, Balance, last_action from torrents_leech_stats "
                         f"where TorrentID = {torrent_id}")[0]

    def peers(self, torrent_id):
        """The torrent's `xbt_files_users` rows by user id (a list each: one row per peer id)."""
        rows = self.rows(f"select uid, hex(peer_id) as peer_id, active, announced, uploaded, downloaded, remaining, "
                         f"timespent, useragent, ip, mtime from xbt_files_users where fid = {torrent_id} "
                         "order by mtime, remaining desc")
        by_user = {}
        for r in rows:
            by_user.setdefault(int(r["uid"]), []).append(r)
        return by_user

    def snatches(self, torrent_id):
        return self.rows(f"select uid, IP, tstamp from xbt_snatched where fid = {torrent_id} order by uid")

    def token(self, user_id, torrent_id):
        rows = self.rows(f"select Downloaded, Expired from users_freeleeches "
                         f"where UserID = {user_id} and TorrentID = {torrent_id}")
        return rows[0] if rows else None


class GazelleTracker(SiteTracker):
    """shoal as the site's announce server: --schema gazelle on the site's database with the
    site's two passwords, on 127.0.0.1 and [::1], writing only when flushed, an interval of
    60 s without jitter (so a client announces when the test makes it). Its UDP connection
    ids are issued under a key file, so that they survive a restart."""

    schema = "gazelle"
    private_lines = f'site_password = "{SITE_PASSWORD}"\nreport_password = "{REPORT_PASSWORD}"\n'
    section = "[gazelle]\nschedule_interval = 3600\nannounce_interval = 60\nannounce_jitter = 0\n"
    path = "/{passkey}/announce"


class GazelleScenario(SiteScenario):
    """A scenario's seeder and leecher (members `first_user` and the next) and its torrent
    (v1: Gazelle keeps one info hash per torrent), inserted in the site's tables before
    shoal starts. `v6`: both clients on [::1]."""

    swarm_class = GSwarm

    def __init__(self, res, site, args, base, label, first_user, torrent_id, size_mib=None, free="0",
                 token=False, v6=False):
        self.v6 = v6
        super().__init__(res, site, args, base, label, first_user, torrent_id, size_mib)
        self.free, self.token = free, token
        site.add_torrent(torrent_id, self.info_hash, free)
        if token:
            site.add_token(self.leecher, torrent_id)

    def url(self, proto, user):
        return self.tracker.url(proto, self.keys[user], self.v6)

    def factors(self):
        """(upload, download) credited per byte moved."""
        if self.free == "2":
            return 0, 0
        return 1, (0 if self.free == "1" or self.token else 1)

    def check_live(self, t, peers):
        leecher = peers.get(self.leecher, [{}])[-1]
        self.res.check(f"{self.label}: while both run, `torrents_leech_stats` has Seeders 1, Leechers 1, last_action "
                       "set, and `xbt_files_users` the two clients, active, the leecher with something remaining",
                       (t["Seeders"], t["Leechers"]) == ("1", "1") and t["last_action"] is not None
                       and set(peers) == {self.seeder, self.leecher}
                       and all(r["active"] == "1" for rows in peers.values() for r in rows)
                       and int(leecher.get("remaining", 0)) > 0, f"torrent {t}, peers {peers}")

    def address(self):
        return "::1" if self.v6 else "127.0.0.1"

    def check_rows(self, moved, completions=1):
        """After the clients stopped: a flush, then the site's rows against what libtorrent
        moved and reported."""
        if moved is None or not self.flush():
            return
        res, label, site, tid = self.res, self.label, self.site, self.torrent_id
        uf, df = self.factors()
        for role, user in (("seeder", self.seeder), ("leecher", self.leecher)):
            up, down = moved[role]
            got = site.user(user)
            res.check(f"{label}: {role}'s `users_leech_stats` gained Uploaded x{uf} and Downloaded x{df} what "
                      "libtorrent moved, within one piece", near(got[0], uf * up) and near(got[1], df * down),
                      f"gained {got}, libtorrent {up}/{down}")
        t = site.torrent(tid)
        balance = sum(moved[r][0] - moved[r][1] for r in CLIENTS)
        res.check(f"{label}: `torrents_leech_stats` has Seeders 0, Leechers 0 (both stopped), Snatched {completions}, "
                  "Balance the upload less the download within two pieces",
                  (t["Seeders"], t["Leechers"], t["Snatched"]) == ("0", "0", str(completions))
                  and near(t["Balance"], balance, 2 * PIECE),
                  f"{t}, libtorrent's balance {balance}")
        snatches = site.snatches(tid)
        res.check(f"{label}: `xbt_snatched` has one row, the leecher's, with its address {self.address()}",
                  [(s["uid"], s["IP"]) for s in snatches] == [(str(self.leecher), self.address())]
                  and int(snatches[0]["tstamp"]) > 0, f"{snatches}")
        if self.token:
            tok = site.token(self.leecher, tid)
            res.check(f"{label}: the token's `users_freeleeches` row holds what it saved (the leecher's download, "
                      "within one piece)", tok is not None and near(tok["Downloaded"], moved["leecher"][1]),
                      f"{tok}, libtorrent {moved['leecher'][1]}")
        self.check_peers(moved)

    def check_peers(self, moved):
        peers = self.site.peers(self.torrent_id)
        res = self.res
        if not res.check(f"{self.label}: `xbt_files_users` has one row per client",
                         set(peers) == {self.seeder, self.leecher}, f"{list(peers)}"):
            return
        for role, user in (("seeder", self.seeder), ("leecher", self.leecher)):
            rows, (up, down) = peers[user], moved[role]
            # The token's leecher ran in two sessions: two peer ids, two rows.
            runs = 2 if role == "leecher" and self.token else 1
            total = [sum(int(r[what]) for r in rows) for what in ("uploaded", "downloaded")]
            res.check(f"{self.label}: {role}'s `xbt_files_users` row{'s' if runs > 1 else ''} ({runs}, one per peer "
                      f"id): libtorrent's peer id, ip {self.address()}, useragent {self.agent(role)!r}, its reported "
                      "totals within one piece a row, nothing remaining at the end, not active, announced twice or "
                      "more, mtime set",
                      len(rows) == runs and all(bytes.fromhex(p["peer_id"]).startswith(b"-LT2080-")
                                                and p["ip"] == self.address() and p["useragent"] == self.agent(role)
                                                and p["active"] == "0" and int(p["announced"]) >= 2
                                                and int(p["mtime"]) > 0 for p in rows)
                      and near(total[0], up, runs * PIECE) and near(total[1], down, runs * PIECE)
                      and rows[-1]["remaining"] == "0", f"{rows}, libtorrent {up}/{down}")


    # The restart scenario (lt_site.restart): a start on the same database and state file.
    restart_sources = False

    def restart_unwritten(self):
        site = self.site
        return site.user(self.seeder) == (0, 0) and site.user(self.leecher) == (0, 0) \
            and not site.peers(self.torrent_id)

    def check_after_sigterm(self, announced):
        res, site, tid = self.res, self.site, self.torrent_id
        (up, _), (_, down), t = site.user(self.seeder), site.user(self.leecher), site.torrent(tid)
        peers = {u: rows[-1] for u, rows in site.peers(tid).items()}
        res.check("restart: right after SIGTERM, `users_leech_stats` holds what both clients had announced "
                  "(within one piece)", near(up, announced["seeder"][0]) and near(down, announced["leecher"][1]),
                  f"seeder uploaded {up}, leecher downloaded {down}, announced {announced}")
        res.check("restart: right after SIGTERM, `torrents_leech_stats` has Seeders 1, Leechers 1 and "
                  "`xbt_files_users` both clients, active, with their announced totals",
                  (t["Seeders"], t["Leechers"]) == ("1", "1") and set(peers) == {self.seeder, self.leecher}
                  and all(p["active"] == "1" for p in peers.values())
                  and near(peers[self.seeder]["uploaded"], announced["seeder"][0])
                  and near(peers[self.leecher]["downloaded"], announced["leecher"][1]), f"{t}, {peers}")

    def start_again(self, tracker):
        return self.res.check("restart: shoal starts again on the same database and state file", tracker.start())

    def check_newcomer(self, swarm, since):
        self.res.check("restart: a new member's client is served by the new process", swarm.wait_reply("newcomer"))

    def check_restart_rows(self, moved, newcomer_id, away):
        res, site, tid = self.res, self.site, self.torrent_id
        for name, user, i in (("seeder", self.seeder, 0), ("leecher", self.leecher, 1), ("newcomer", newcomer_id, 1)):
            got, want = site.user(user)[i], moved[name][i]
            what = "Uploaded" if i == 0 else "Downloaded"
            res.check(f"restart: {name}'s `users_leech_stats` {what} gained everything libtorrent moved over both "
                      "runs, within one piece (nothing lost, nothing twice)", near(got, want),
                      f"gained {got}, libtorrent {want}")
        t = site.torrent(tid)
        res.check("restart: `torrents_leech_stats` has Seeders 0, Leechers 0, Snatched 2 (the leecher and the new "
                  "client)", (t["Seeders"], t["Leechers"], t["Snatched"]) == ("0", "0", "2"), f"{t}")
        res.check("restart: `xbt_snatched` has the leecher's and the new client's rows",
                  [r["uid"] for r in site.snatches(tid)] == sorted([str(self.leecher), str(newcomer_id)]),
                  f"{site.snatches(tid)}")

def token(res, tracker, s):
    """The leecher holds a token: it is stopped halfway without announcing before (its
    stopped announce carries every byte since its start), started again in a new session
    (a new peer id) and finishes."""
    s.tracker = tracker
    first = []

    def halfway(swarm):
        got = swarm.stop(["leecher"])
        if not res.check("token: the leecher's stopped announce halfway is answered", got is not None):
            return False
        first.append(got["leecher"])
        save_dir = swarm.clients["leecher"][2]
        swarm.leave("leecher")
        since = len(swarm.pump.events)
        swarm.join("leecher", s.url("http", s.leecher), seed=False, save_dir=save_dir)
        return res.check("token: the leecher, started again in a new session, gets a reply with >= 1 peer",
                         swarm.wait_reply("leecher", since=since, min_peers=1))

    moved = s.run("http", "http", rate=lt_site.SLOW, at=0.5, during=halfway)
    if moved and first:
        size = len(s.payload)
        res.check("token: the leecher's download came in two runs, each a part of the file",
                  0 < first[0][1] < size and 0 < moved["leecher"][1] < size,
                  f"first run {first[0][1]}, second {moved['leecher'][1]} of {size}")
        moved["leecher"] = [a + b for a, b in zip(moved["leecher"], first[0])]
    s.check_rows(moved)


def start_server():
    """MariaDB, with Gazelle's sql_mode set every time it starts (the outage starts it again)."""
    server = db_servers.start("mariadb")
    plain_start = server.start

    def start(timeout_s=60):
        plain_start(timeout_s)
        server.mariadb_sql("sql-mode", f"SET GLOBAL sql_mode = '{SQL_MODE}'")

    server.start = start
    server.mariadb_sql("sql-mode", f"SET GLOBAL sql_mode = '{SQL_MODE}'")
    return server


def test(res, args, server, base, trackers):
    if not socket.has_ipv6:
        args.which = [s for s in args.which if s != "ipv6"]
    site = GazelleDb(server, "gazelle_lt")
    mode = site.sql_mode()
    res.check("the site's database has Gazelle's tables, in Gazelle's strict sql_mode",
              all(m in mode.split(",") for m in SQL_MODE.split(",")), mode)
    scenarios = {}
    for label, first_user, tid, kw in (("http", 10, 100, {}), ("udp", 20, 101, {}), ("ipv6", 30, 102, {"v6": True}),
                                       ("freeleech", 40, 103, {"free": "1"}), ("neutral", 50, 104, {"free": "2"}),
                                       ("token", 60, 105, {"token": True}),
                                       ("outage", 70, 106, {"size_mib": args.size_mib + 2}),
                                       ("restart", 80, 107, {"size_mib": args.size_mib + 2})):
        if label in args.which:
            scenarios[label] = GazelleScenario(res, site, args, base, label, first_user, tid, **kw)
    newcomer = site.add_user(82, "newcomer")
    tracker = GazelleTracker(res, base, site.url)
    tracker.passkeys.extend(site.passkeys + [SITE_PASSWORD, REPORT_PASSWORD])
    if not lt_site.start_tracker(res, trackers, tracker, "gazelle"):
        return
    lt_site.transfers(res, tracker, scenarios, (("http", "http", "http"), ("udp", "udp", "udp"),
                                                ("ipv6", "udp", "http"), ("freeleech", "udp", "http"),
                                                ("neutral", "http", "udp")), ("freeleech", "neutral"))
    if "token" in args.which:
        token(res, tracker, scenarios["token"])
    if "refusals" in args.which:
        # Ocelot's refusals as libtorrent shows them.
        lt_site.refusals(res, tracker, GSwarm, args, base, site.passkeys[0], "Passkey not found",
                         "Unregistered torrent")
    lt_site.last_scenarios(res, args, tracker, server, scenarios, (82, newcomer))


def main():
    return lt_site.main(__doc__, SCENARIOS, "shoal-lt-gazelle-", test, start=start_server)


if __name__ == "__main__":
    finish(main())
