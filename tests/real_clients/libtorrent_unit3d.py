#!/usr/bin/python3
"""Real-client test of shoal as a UNIT3D site's announce server (issue 32, points 1 and 3):
a real MariaDB (installed if missing and started by the test, db_servers.py) holding UNIT3D's
tables (tests/fixtures/unit3d.sql) and the rows a site inserts (a group, users
with 32-hex passkeys, torrents with the libtorrent torrents' info hashes, approved; one 100%
free and double upload), shoal started on it with --private --schema unit3d, libtorrent
clients on the URLs the site hands out: http://HOST:P/announce/<passkey> and the same path
over UDP (BEP 41 URL data). Only POST /api/private/flush writes (flush_interval is an hour),
so each check knows which write it reads.

Scenarios (each with its own users and torrent):
  http, udp  a seeder and a leecher over HTTP (over UDP): the leecher downloads through
      shoal; while both run, a flush writes `torrents` seeders 1, leechers 1 and their two
      `peers` rows (active, the leecher not a seeder); after both stop and a flush:
      `history` (credited uploaded/downloaded, actual_*, client_*, seeder, active, agent,
      completed_at set for the leecher only), `users` (uploaded/downloaded), `torrents`
      (seeders 0, leechers 0, times_completed 1, balance) and `peers` (address, port,
      agent, reported totals, left, seeder, active, visible) equal what libtorrent moved and
      reported, within one piece (64 KiB);
  freeleech  the same on the 100% free, double-upload torrent (seeder over UDP, leecher over
      HTTP): the leecher's credited download is 0 and its actual one the bytes moved, the
      seeder is credited twice its upload;
  refusals  a client with a passkey no user has is refused ("Passkey does not exist...");
      one announcing an info hash the site does not know is refused ("InfoHash not found.")
      and (user, hash) lands in `unregistered_info_hashes`;
  outage  MariaDB is stopped in the middle of a (slowed down) transfer while both clients
      announce every 1.5 s: every announce is answered, POST /api/private/flush answers 503;
      MariaDB is started again, the transfer finishes, a flush writes everything: the rows
      are those of the http scenario (nothing lost, the rows' client state complete);
  restart  (a slowed down transfer, seeder over HTTP, leecher over UDP) both clients'
      counters announced, then SIGTERM: shoal exits 0 and the rows it had not written are in
      the tables after it exited (no flush ran before); while it is away the transfer goes
      on; shoal is started again with a new state file (nothing carried but the tables, as
      when a site switches announce servers): a new client's first reply holds the two peers
      of the `peers` table (the old clients had not announced yet), it downloads from them;
      the old clients announce again and everything finishes: the rows equal what the three
      clients moved (the old clients counted from where they were, nothing twice, nothing
      lost), times_completed 2.
No passkey appears in shoal's log or in /metrics.

A MariaDB that cannot be installed or started fails the test with the reason, unless
SHOAL_SKIP_DB_SERVERS=1: then it says it skipped and passes. Prints "N passed, N failed"
last; exits non-zero on any failure.

  tests/real_clients/libtorrent_unit3d.py                  # target/release/shoal
  SHOAL_BIN=/path/to/shoal tests/real_clients/libtorrent_unit3d.py --only restart
"""
import os
import secrets
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
import lt_site  # noqa: E402
from libtorrent_private import PIECE, TOKEN, PrivateTracker, Swarm, finish, hashes  # noqa: E402
from lt_site import CLIENTS, UPLOADER, SiteDb, SiteScenario, near  # noqa: E402
from lt_swarm import REPO  # noqa: E402

FIXTURE = os.path.join(REPO, "tests/fixtures/unit3d.sql")
SCENARIOS = ["http", "udp", "freeleech", "refusals", "outage", "restart"]


class Unit3dDb(SiteDb):
    """The UNIT3D site's database on the test's MariaDB: UNIT3D's tables (the fixture's
    DDL) and the rows the site inserts, read and written with the `mariadb` client."""

    def __init__(self, server, name):
        super().__init__(server, name, FIXTURE,
                         "insert into `groups` (id, name, slug, position, color, icon, download_slots, can_chat, "
                         "can_comment, can_invite, can_request) values "
                         "(1, 'User', 'user', 6, '#7289DA', 'fas fa-user', 8, 1, 1, 0, 1)")

    def add_user(self, user_id, name):
        """A user of group `user` as the site inserts it; its passkey (32 hex characters)."""
        passkey = secrets.token_hex(16)
        self.passkeys.append(passkey)
        self.execute(f"insert into users (id, username, email, password, passkey, group_id, rsskey, created_at, "
                     f"updated_at) values ({user_id}, '{name}', '{name}@example.org', '$2y$10$hash', '{passkey}', 1, "
                     f"'{secrets.token_hex(16)}', '2024-06-01 00:00:00', '2024-06-01 00:00:00')")
        return passkey

    def add_torrent(self, torrent_id, info_hash, free=0, doubleup=0):
        """An approved torrent (status 1) with this v1 info hash."""
        self.execute(f"insert into torrents (id, name, description, file_name, num_file, size, user_id, info_hash, "
                     f"status, free, doubleup, created_at, updated_at) values ({torrent_id}, 'Torrent {torrent_id}', "
                     f"'A description.', 'torrent-{torrent_id}.torrent', 1, 4194304.0, {UPLOADER}, 0x{info_hash}, 1, "
                     f"{free}, {doubleup}, '2024-06-02 00:00:00', '2024-06-02 00:00:00')")

    def history(self, user_id, torrent_id):
        rows = self.rows(f"select agent, uploaded, actual_uploaded, client_uploaded, downloaded, actual_downloaded, "
                         f"client_downloaded, seeder, active, immune, completed_at from history "
                         f"where user_id = {user_id} and torrent_id = {torrent_id}")
        return rows[0] if rows else None

    def user(self, user_id):
        return self.rows(f"select uploaded, downloaded from users where id = {user_id}")[0]

    def torrent(self, torrent_id):
        return self.rows(f"select seeders, leechers, times_completed, balance from torrents where id = {torrent_id}")[0]

    def peers(self, torrent_id):
        """The torrent's `peers` rows by user id."""
        rows = self.rows(f"select user_id, hex(peer_id) as peer_id, hex(ip) as ip, port, agent, uploaded, downloaded, "
                         f"`left`, seeder, active, visible from peers where torrent_id = {torrent_id}")
        return {int(r["user_id"]): r for r in rows}


class Unit3dTracker(PrivateTracker):
    """shoal as the site's announce server: --schema unit3d on the site's database, the
    site's key, and UNIT3D's knobs set for a test: writes only when flushed, an interval
    between 30 and 60 s (so a client announces when the test makes it, and libtorrent
    keeps to it), peer-list rates that a test cannot reach. Its UDP connection ids are
    issued under a key file, so that they survive a restart with a new state file."""

    def __init__(self, res, directory, database):
        super().__init__(res, directory, database=database)
        with open(self.config, "w") as f:
            f.write(f'log_level = "info"\n[admin]\ntoken = "{TOKEN}"\n'
                    f'[private]\nenabled = true\nschema = "unit3d"\nsite_api_key = "{secrets.token_hex(24)}"\n'
                    f'[udp]\nconnection_id_key_file = "{os.path.join(directory, "udp.key")}"\n'
                    "[unit3d]\nflush_interval = 3600\nannounce_min = 30\nannounce_max = 60\n"
                    "seed_list_rate_limits = [[60, 1000]]\nleech_list_rate_limits = [[60, 1000]]\n")

    def command(self):
        return super().command() + ["--schema", "unit3d"]

    def answers(self):
        return self.api("GET", "/metrics", token=False)[0] == 200

    def url(self, proto, passkey, form="suffix"):
        return super().url(proto, passkey, form)


class Unit3dScenario(SiteScenario):
    """A scenario's seeder and leecher (users `first_user` and the next, rows in `users`)
    and its torrent (a v1 torrent: UNIT3D keeps one info hash per torrent), inserted in the
    site's tables before shoal starts."""

    def __init__(self, res, site, args, base, label, first_user, torrent_id, size_mib=None, free=0, doubleup=0):
        super().__init__(res, site, args, base, label, first_user, torrent_id, size_mib)
        self.upload_factor = 2 if doubleup else 1
        self.download_factor = (100 - free) / 100
        site.add_torrent(torrent_id, self.info_hash, free, doubleup)

    def check_live(self, t, peers):
        leecher = peers.get(self.leecher, {})
        self.res.check(f"{self.label}: while both run, `torrents` has seeders 1, leechers 1 and `peers` the two "
                       "clients, active, the leecher not a seeder",
                       (t["seeders"], t["leechers"]) == ("1", "1") and set(peers) == {self.seeder, self.leecher}
                       and all(p["active"] == "1" for p in peers.values()) and leecher.get("seeder") == "0"
                       and int(leecher.get("left", 0)) > 0, f"torrent {t}, peers {peers}")

    def check_rows(self, moved, completions=1):
        """After the clients stopped: a flush, then the site's rows against what libtorrent
        moved and reported."""
        if moved is None or not self.flush():
            return
        res, label, site, tid = self.res, self.label, self.site, self.torrent_id
        uf, df = self.upload_factor, self.download_factor
        balance = 0
        for role, user in (("seeder", self.seeder), ("leecher", self.leecher)):
            up, down = moved[role]
            balance += up - down
            h = site.history(user, tid)
            if not res.check(f"{label}: `history` has the {role}'s row", h is not None):
                continue
            res.check(f"{label}: {role}'s `history` actual_uploaded and actual_downloaded equal what libtorrent moved, "
                      "within one piece", near(h["actual_uploaded"], up) and near(h["actual_downloaded"], down),
                      f"history {h['actual_uploaded']}/{h['actual_downloaded']}, libtorrent {up}/{down}")
            res.check(f"{label}: {role}'s `history` uploaded and downloaded are credited with the torrent's factors "
                      f"(upload x{uf}, download x{df:g})",
                      int(h["uploaded"]) == uf * int(h["actual_uploaded"])
                      and int(h["downloaded"]) == int(df * int(h["actual_downloaded"])),
                      f"credited {h['uploaded']}/{h['downloaded']}, actual {h['actual_uploaded']}/"
                      f"{h['actual_downloaded']}")
            res.check(f"{label}: {role}'s `history` client_uploaded and client_downloaded are libtorrent's last "
                      "report, within one piece", near(h["client_uploaded"], up) and near(h["client_downloaded"], down),
                      f"client {h['client_uploaded']}/{h['client_downloaded']}, libtorrent {up}/{down}")
            res.check(f"{label}: {role}'s `history` row: seeder, not active (stopped), agent {self.agent(role)!r}, "
                      f"completed_at {'set' if role == 'leecher' else 'null'}",
                      h["seeder"] == "1" and h["active"] == "0" and h["agent"] == self.agent(role)
                      and (h["completed_at"] is not None) == (role == "leecher"), f"{h}")
            u = site.user(user)
            res.check(f"{label}: {role}'s `users` uploaded and downloaded are what its history row was credited",
                      (u["uploaded"], u["downloaded"]) == (h["uploaded"], h["downloaded"]), f"users {u}, history {h}")
        t = site.torrent(tid)
        res.check(f"{label}: `torrents` has seeders 0, leechers 0 (both stopped), times_completed {completions}, "
                  "balance the actual upload less the actual download, within two pieces",
                  (t["seeders"], t["leechers"], t["times_completed"]) == ("0", "0", str(completions))
                  and near(t["balance"] or 0, balance, 2 * PIECE), f"{t}, libtorrent's balance {balance}")
        self.check_peers(moved)

    def check_peers(self, moved):
        peers = self.site.peers(self.torrent_id)
        res = self.res
        if not res.check(f"{self.label}: `peers` has one row per client", set(peers) == {self.seeder, self.leecher},
                         f"{list(peers)}"):
            return
        for role, user in (("seeder", self.seeder), ("leecher", self.leecher)):
            p, (up, down) = peers[user], moved[role]
            want_port = self.ports.get(role)
            res.check(f"{self.label}: {role}'s `peers` row: libtorrent's peer id, 127.0.0.1, its listen port, agent "
                      f"{self.agent(role)!r}, its reported totals within one piece, left 0, seeder, not active, "
                      "not visible (as UNIT3D-Announce writes a stopped client)",
                      bytes.fromhex(p["peer_id"]).startswith(b"-LT2080-") and p["ip"] == "7F000001"
                      and want_port is not None and int(p["port"]) == want_port and p["agent"] == self.agent(role)
                      and near(p["uploaded"], up) and near(p["downloaded"], down) and p["left"] == "0"
                      and (p["seeder"], p["active"], p["visible"]) == ("1", "0", "0"),
                      f"{p}, listen port {want_port}, libtorrent {up}/{down}")


    # The restart scenario (lt_site.restart): a start on the tables alone.
    restart_sources = True

    def restart_unwritten(self):
        site, tid = self.site, self.torrent_id
        return site.history(self.seeder, tid) is None and site.history(self.leecher, tid) is None \
            and not site.peers(tid)

    def check_after_sigterm(self, announced):
        res, site, tid = self.res, self.site, self.torrent_id
        hs, hl, t, peers = (site.history(self.seeder, tid), site.history(self.leecher, tid), site.torrent(tid),
                            site.peers(tid))
        res.check("restart: after SIGTERM, `history` holds what both clients had announced (within one piece)",
                  hs is not None and hl is not None and near(hs["actual_uploaded"], announced["seeder"][0])
                  and near(hl["actual_downloaded"], announced["leecher"][1]),
                  f"seeder {hs}, leecher {hl}, announced {announced}")
        res.check("restart: after SIGTERM, `torrents` has seeders 1, leechers 1 and `peers` both clients, active",
                  (t["seeders"], t["leechers"]) == ("1", "1") and set(peers) == {self.seeder, self.leecher}
                  and all(p["active"] == "1" for p in peers.values()), f"{t}, {peers}")

    def start_again(self, tracker):
        # A new start with nothing but the tables: a state file of its own (no snapshot of the
        # swarms, no ledger file), as when a site switches announce servers.
        tracker.state = os.path.join(tracker.dir, "shoal-2.state")
        return self.res.check("restart: shoal starts again on the site's tables (a new state file)", tracker.start())

    def check_newcomer(self, swarm, since):
        got = swarm.wait_reply("newcomer", min_peers=1)
        first = swarm.pump.find("newcomer", "tracker_reply_alert", since=since)
        old = [n for n in CLIENTS if swarm.pump.find(n, "tracker_reply_alert", since=since)]
        self.res.check("restart: a new client's first reply holds the two peers of the `peers` table, sent before "
                       "the old clients announced to the new process",
                       got is not None and first is not None and first["num_peers"] == 2 and not old,
                       f"first reply {first}; old clients answered before it: {old}")

    def check_restart_rows(self, moved, newcomer_id, away):
        res, site, tid = self.res, self.site, self.torrent_id
        if away > 2 * PIECE:
            print(f"  restart: {away} bytes moved while shoal was away: losing them would show", flush=True)
        for name, user, i in (("seeder", self.seeder, 0), ("leecher", self.leecher, 1), ("newcomer", newcomer_id, 1)):
            h, want = site.history(user, tid), moved[name][i]
            what = "uploaded" if i == 0 else "downloaded"
            res.check(f"restart: {name}'s `history` actual_{what} and `users` {what} equal everything libtorrent "
                      "moved over both runs, within one piece (counted from where it was: nothing lost, nothing "
                      "twice)", h is not None and near(h[f"actual_{what}"], want) and near(site.user(user)[what], want),
                      f"history {h and h[f'actual_{what}']}, users {site.user(user)[what]}, libtorrent {want}")
        t = site.torrent(tid)
        res.check("restart: `torrents` has seeders 0, leechers 0, times_completed 2 (the leecher and the new client)",
                  (t["seeders"], t["leechers"], t["times_completed"]) == ("0", "0", "2"), f"{t}")

def refusals(res, tracker, site, args, base, user_key, user_id):
    """A wrong passkey, and an info hash the site does not know (recorded)."""
    ti = lt_site.refusals(res, tracker, Swarm, args, base, user_key,
                          "Passkey does not exist. Please re-download the .torrent file.", "InfoHash not found.")
    res.check("refusals: POST /api/private/flush answers 200", tracker.flush() == 200)
    v1 = hashes(ti)[0]
    rows = site.rows(f"select user_id from unregistered_info_hashes where info_hash = 0x{v1}")
    res.check("refusals: the unknown info hash is recorded in `unregistered_info_hashes` for its user",
              [r["user_id"] for r in rows] == [str(user_id)], f"{rows}")


def test(res, args, server, base, trackers):
    site = Unit3dDb(server, "unit3d_lt")
    mode = site.sql_mode()
    res.check("the site's database has UNIT3D's tables, in strict mode", "STRICT_TRANS_TABLES" in mode, mode)
    scenarios = {}
    for label, first_user, tid, kw in (("http", 10, 100, {}), ("udp", 20, 101, {}),
                                       ("freeleech", 30, 102, {"free": 100, "doubleup": 1}),
                                       ("outage", 40, 103, {"size_mib": args.size_mib + 2}),
                                       ("restart", 50, 104, {"size_mib": args.size_mib + 2})):
        if label in args.which:
            scenarios[label] = Unit3dScenario(res, site, args, base, label, first_user, tid, **kw)
    newcomer = site.add_user(52, "newcomer")
    tracker = Unit3dTracker(res, base, site.url)
    tracker.passkeys.extend(site.passkeys)
    if not lt_site.start_tracker(res, trackers, tracker, "unit3d"):
        return
    lt_site.transfers(res, tracker, scenarios, (("http", "http", "http"), ("udp", "udp", "udp"),
                                                ("freeleech", "udp", "http")), ("freeleech",))
    if "refusals" in args.which:
        refusals(res, tracker, site, args, base, site.passkeys[0], UPLOADER)
    lt_site.last_scenarios(res, args, tracker, server, scenarios, (52, newcomer))


def main():
    return lt_site.main(__doc__, SCENARIOS, "shoal-lt-unit3d-", test)


if __name__ == "__main__":
    finish(main())
