#!/usr/bin/python3
"""Real-client test of shoal as a NexusPHP site's announce server (docs/nexusphp.md): a
real MariaDB (installed if missing and started by the test, db_servers.py) holding
NexusPHP's schema as it ships (tests/fixtures/nexusphp.sql, the 1.10 line's
database/schema/mysql-schema.sql, the same file as /work/shared/fixtures/nexusphp/) and the
rows a site holds (a few `settings` rows, a category, a client family in
`agent_allowed_family` that admits libtorrent, confirmed members whose passkeys are 32 hex
characters, torrents with the libtorrent torrents' info hashes and sizes; one free), shoal
started on it with --private --schema nexusphp, libtorrent clients on the tracker URL the
site hands out, http://HOST:P/announce.php?passkey=<key>, and on two NexusPHP's own
announce never offered: the same path and query over UDP (BEP 41 URL data) and both on
[::1]. Writes happen only on POST /api/private/flush ([nexusphp] flush_interval is an
hour), so each check knows which write it reads.

NexusPHP's windows run on the wall clock (public/announce.php:42-66): a member's second
announce on a torrent within 5 s is a re-announce (answered, nothing written, even for
`completed` or `stopped`), within 30 s too frequent unless `completed` or `stopped`. So
the leecher is held until 6 s after its `started` before it finishes (its `completed`),
and each client is stopped 6 s or more after its last announce.

Scenarios (each with its own members and torrent):
  http, udp, ipv6  a seeder and a leecher over HTTP (over UDP; over [::1], the seeder on
      UDP, the leecher on HTTP): the leecher downloads through shoal and its file equals
      the seed's; while both run, a flush writes `torrents` seeders 1, leechers 1 and the
      two `peers` rows as the site's pages show them (libtorrent's peer id, address, listen
      port, agent, passkey, to_go, seeder, connectable, started, last_action); after both
      stop and a flush: `users` uploaded and downloaded moved by what libtorrent moved
      (the payload's size, promotion factor 1), clientselect the family, last_announce_at
      set; `snatched` (the actual bytes, to_go 0, seed and leech time; the leecher's
      finished 'yes' and completedat now, the seeder's not finished); `torrents`
      (seeders 0, leechers 0, times_completed 1, visible); no `peers` row left;
  freeleech  the same on a free torrent (sp_state 2, seeder over UDP, leecher over HTTP):
      the leecher is credited no download in `users`, its `snatched` row has the actual
      bytes, the seeder is credited its upload; then a new member's client on that torrent
      is sent no peer: the two stopped clients are gone from shoal's swarm, as their rows
      are from `peers` (the last scenario run is the one probed);
  refusals  a client with a passkey no member has is refused over HTTP with NexusPHP's
      text ("Invalid passkey! Re-download the .torrent from <basic.BASEURL>"), one
      announcing an info hash the site does not know too ("torrent not registered with
      this tracker"); over UDP the client gets a tracker error (libtorrent 2.0.8 drops a
      UDP error's text) and the text itself is read from an announce built like
      libtorrent's.
No passkey appears in shoal's log or in /metrics.

A MariaDB that cannot be installed or started fails the test with the reason, unless
SHOAL_SKIP_DB_SERVERS=1: then it says it skipped and passes. Prints "N passed, N failed"
last; exits non-zero on any failure. Everything it starts is stopped by its PID; all
traffic stays on 127.0.0.1 and ::1.

  tests/real_clients/libtorrent_nexusphp.py                  # target/release/shoal
  SHOAL_BIN=/path/to/shoal tests/real_clients/libtorrent_nexusphp.py --only ipv6
"""
import hashlib
import os
import secrets
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
import libtorrent_private  # noqa: E402
import libtorrent_private_accounting  # noqa: E402
import lt_site  # noqa: E402
import lt_swarm  # noqa: E402
from libtorrent_private import (PIECE, PrivatePump, Swarm,  # noqa: E402
                                check_no_passkeys, finish, hashes, udp_announce)
from lt_site import AGENT, UPLOADER, SiteDb, SiteScenario, SiteTracker, near  # noqa: E402
from lt_swarm import REPO, log  # noqa: E402

FIXTURE = os.path.join(REPO, "tests/fixtures/nexusphp.sql")
SCENARIOS = ["http", "udp", "ipv6", "freeleech", "refusals"]
BASEURL = "https://nexus.example.org"  # basic.BASEURL: the site's address in its refusals
CATEGORY = 401  # Movies, in section (categories.mode) 4, as NexusPHP installs it
FAMILY = 30  # the allow list's family of libtorrent (rasterbar) 2.x
NORMAL, FREE = 1, 2  # torrents.sp_state
WINDOW = 6.0  # seconds: past NexusPHP's re-announce window (5 s)
SETTLE = 2.0  # seconds of alerts pumped before a stop is timed (NSwarm.stop)
INVALID_PASSKEY = f"Invalid passkey! Re-download the .torrent from {BASEURL}"
NOT_REGISTERED = "torrent not registered with this tracker"

# What a site holds before any member: the settings the refusals and intervals read (the
# others keep their defaults, as NexusPHP's installer writes them), a category, and a
# family of the client allow list for libtorrent 2.x: by its peer id (-LT2080-) and by its
# User-Agent (libtorrent/2.0.8.0), in the allow list's PCRE form.
FIRST_ROWS = (
    "insert into settings (name, value, autoload) values "
    f"('basic.BASEURL', '{BASEURL}', 'yes'), ('basic.SITENAME', 'Nexus', 'yes'), "
    "('main.announce_interval', '1800', 'yes'), ('main.annintertwoage', '7', 'yes'), "
    "('main.annintertwo', '2700', 'yes'), ('main.anninterthreeage', '30', 'yes'), "
    "('main.anninterthree', '3600', 'yes'), ('security.cheaterdet', '1', 'yes'); "
    f"insert into categories (id, mode, class_name, name, image, sort_index, icon_id) values "
    f"({CATEGORY}, 4, 'c_movies', 'Movies', 'catsprites.png', 0, 1); "
    "insert into agent_allowed_family (id, family, start_name, peer_id_pattern, peer_id_match_num, "
    "peer_id_matchtype, peer_id_start, agent_pattern, agent_match_num, agent_matchtype, agent_start, exception, "
    f"allowhttps, comment) values ({FAMILY}, 'libtorrent 2.x', 'libtorrent 2.0.0', '/^-LT2([0-9])([0-9])/', 2, "
    "'dec', '-LT200', '/^libtorrent\\\\/2\\\\.([0-9])\\\\.([0-9])/', 2, 'dec', 'libtorrent/2.0.0', 'no', 'yes', '')"
)


class TimedPump(PrivatePump):
    """libtorrent_private's pump that also records when it saw each alert (a monotonic
    time, at or after the alert was posted), for NexusPHP's wall-clock windows."""

    @staticmethod
    def fields(a):
        f = PrivatePump.fields(a)
        f["at"] = time.monotonic()
        return f


class NSwarm(Swarm):
    """libtorrent_private's Swarm that keeps to NexusPHP's windows: a client is stopped
    only once its last announce is WINDOW seconds old (a stop within 5 s would be a
    re-announce, written nowhere). Its clients on a [::1] tracker URL run in a session on
    ::1 (an IPv6 peer announcing over IPv6)."""

    def __init__(self, res, label, ti, payload, base_dir, verbose):
        super().__init__(res, label, ti, payload, base_dir, verbose)
        self.pump = TimedPump({}, verbose)

    def join(self, name, url, seed, **kw):
        host = "::1" if "://[::1]" in url else "127.0.0.1"
        libtorrent_private.session = lambda: lt_swarm.session(host)
        try:
            return super().join(name, url, seed, **kw)
        finally:
            libtorrent_private.session = lt_swarm.session

    def last_announce(self, name):
        """When this client last announced, as its alerts tell: an announce sent or a reply
        (the later of the two, should either alert be missing)."""
        times = [f["at"] for n, k, f in self.pump.events
                 if n == name and k in ("tracker_announce_alert", "tracker_reply_alert")]
        return max(times) if times else None

    def past_window(self, names):
        """Waits until the last announce of each of these clients is WINDOW s old."""
        def ready():
            now = time.monotonic()
            return all(self.last_announce(n) is None or now >= self.last_announce(n) + WINDOW for n in names)

        self.wait(ready, WINDOW + 2)

    def stop(self, names, timeout_s=20):
        # A client that has just finished downloading sends its `completed` announce a
        # moment later: pump its alerts for SETTLE seconds first, or the window may be
        # judged from the announce before it (a stop 1 s after `completed` was refused as a
        # re-announce once, on a loaded machine, and the client stayed listed).
        self.wait(lambda: None, SETTLE)
        self.past_window(names)
        return super().stop(names, timeout_s)


# Scenario.run builds its swarm from this name.
libtorrent_private_accounting.Swarm = NSwarm


class NexusDb(SiteDb):
    """The NexusPHP site's database on the test's MariaDB: NexusPHP's tables (its schema as
    shipped) and the rows the site holds, read and written with the `mariadb` client. Its
    `datetime` columns are in UTC (shoal's [nexusphp] time_zone "+00:00")."""

    def __init__(self, server, name):
        super().__init__(server, name, FIXTURE, FIRST_ROWS)

    def add_user(self, user_id, name):
        """A confirmed member of class 1 (User) as signup leaves it, then its passkey as the
        site sets it on the member's first .torrent download (an md5: 32 hex characters)."""
        passkey = hashlib.md5(secrets.token_bytes(16)).hexdigest()
        self.passkeys.append(passkey)
        self.execute(f"insert into users (id, username, passhash, secret, email, status, class, added, last_access) "
                     f"values ({user_id}, '{name}', '$2y$10$hash', '{secrets.token_hex(10)}', '{name}@example.org', "
                     f"'confirmed', 1, utc_timestamp(), utc_timestamp()); "
                     f"update users set passkey = '{passkey}' where id = {user_id}")
        return passkey

    def add_torrent(self, torrent_id, info_hash, size, sp_state=NORMAL):
        """An approved single-file torrent of the uploader in the category, with this v1
        info hash, the payload's size and promotion state `sp_state`."""
        self.execute(f"insert into torrents (id, filename, owner, visible, anonymous, name, size, numfiles, type, "
                     f"small_descr, category, save_as, sp_state, added, last_action, info_hash, approval_status) "
                     f"values ({torrent_id}, 'torrent-{torrent_id}.torrent', {UPLOADER}, 'yes', 'no', "
                     f"'Torrent {torrent_id}', {size}, 1, 'single', 'A file.', {CATEGORY}, 'payload.bin', {sp_state}, "
                     f"utc_timestamp(), utc_timestamp(), 0x{info_hash}, 1)")

    def user(self, user_id):
        return self.rows(f"select uploaded, downloaded, clientselect, last_announce_at from users "
                         f"where id = {user_id}")[0]

    def torrent(self, torrent_id):
        return self.rows(f"select seeders, leechers, times_completed, visible, last_action from torrents "
                         f"where id = {torrent_id}")[0]

    def peers(self, torrent_id):
        """The torrent's `peers` rows by member id."""
        rows = self.rows(f"select userid, hex(peer_id) as peer_id, ip, port, uploaded, downloaded, to_go, seeder, "
                         f"started, last_action, connectable, agent, passkey, ipv4, ipv6 from peers "
                         f"where torrent = {torrent_id}")
        return {int(r["userid"]): r for r in rows}

    def snatched(self, user_id, torrent_id):
        rows = self.rows(f"select ip, uploaded, downloaded, to_go, seedtime, leechtime, finished, startdat, "
                         f"completedat, abs(timestampdiff(second, completedat, utc_timestamp())) as completed_ago "
                         f"from snatched where userid = {user_id} and torrentid = {torrent_id}")
        return rows[0] if rows else None


class NexusTracker(SiteTracker):
    """shoal as the site's announce server: --schema nexusphp on the site's database, on
    127.0.0.1 and [::1], writing only when flushed. Its UDP connection ids are issued under
    a key file."""

    schema = "nexusphp"
    section = '[nexusphp]\nflush_interval = 3600\npoll_interval = 10\ntime_zone = "+00:00"\n'
    path = "/announce.php?passkey={passkey}"


class NexusScenario(SiteScenario):
    """A scenario's seeder and leecher (members `first_user` and the next) and its torrent
    (v1: NexusPHP keeps one info hash per torrent), inserted in the site's tables before
    shoal starts. `v6`: both clients on [::1]."""

    swarm_class = NSwarm

    def __init__(self, res, site, args, base, label, first_user, torrent_id, sp_state=NORMAL, v6=False):
        self.v6 = v6
        super().__init__(res, site, args, base, label, first_user, torrent_id)
        self.sp_state = sp_state
        site.add_torrent(torrent_id, self.info_hash, len(self.payload), sp_state)

    def url(self, proto, user):
        return self.tracker.url(proto, self.keys[user], self.v6)

    def agent(self, role):
        # UDP carries no User-Agent: NexusPHP's row keeps an empty agent.
        return AGENT if self.protos[role] == "http" else ""

    def address(self):
        return "::1" if self.v6 else "127.0.0.1"

    def factors(self):
        """(upload, download) credited per byte moved (promotion state 1 or 2)."""
        return 1, (0 if self.sp_state == FREE else 1)

    def live(self, swarm):
        """The rows while both run (lt_site's live), then the leecher held until its
        `started` is WINDOW s old, so that its `completed` is no re-announce."""
        if not super().live(swarm):
            return False
        swarm.handle("leecher").set_download_limit(1)
        swarm.past_window(["leecher"])
        return True

    def check_live(self, t, peers):
        res, label = self.res, self.label
        leecher = peers.get(self.leecher, {})
        res.check(f"{label}: while both run, `torrents` has seeders 1, leechers 1 and `peers` the two clients, the "
                  "leecher with something to go",
                  (t["seeders"], t["leechers"]) == ("1", "1") and set(peers) == {self.seeder, self.leecher}
                  and leecher.get("seeder") == "no" and int(leecher.get("to_go", 0)) > 0, f"torrent {t}, peers {peers}")
        v4, v6 = ("", "::1") if self.v6 else ("127.0.0.1", "")
        for role, user in (("seeder", self.seeder), ("leecher", self.leecher)):
            p, port = peers.get(user), self.ports.get(role)
            if p is None:
                continue
            res.check(f"{label}: {role}'s `peers` row as the site shows it: libtorrent's peer id, ip {self.address()} "
                      f"(ipv4 {v4!r}, ipv6 {v6!r}), its listen port, agent {self.agent(role)!r}, the member's passkey, "
                      f"seeder {'yes' if role == 'seeder' else 'no'}, connectable, started and last_action set",
                      bytes.fromhex(p["peer_id"]).startswith(b"-LT2080-") and p["ip"] == self.address()
                      and (p["ipv4"], p["ipv6"]) == (v4, v6) and port is not None and int(p["port"]) == port
                      and p["agent"] == self.agent(role) and p["passkey"] == self.keys[user]
                      and p["seeder"] == ("yes" if role == "seeder" else "no") and p["connectable"] == "yes"
                      and p["started"] is not None and p["last_action"] is not None,
                      f"{p}, listen port {port}")

    def check_rows(self, moved, completions=1):
        """After the clients stopped: a flush, then the site's rows against what libtorrent
        moved and reported."""
        if moved is None or not self.flush():
            return
        res, label, site, tid = self.res, self.label, self.site, self.torrent_id
        uf, df = self.factors()
        size = len(self.payload)
        for role, user in (("seeder", self.seeder), ("leecher", self.leecher)):
            up, down = moved[role]
            u = site.user(user)
            res.check(f"{label}: {role}'s `users` uploaded x{uf} and downloaded x{df} what libtorrent moved, within "
                      "one piece; clientselect the libtorrent family, last_announce_at set",
                      near(u["uploaded"], uf * up) and near(u["downloaded"], df * down)
                      and u["clientselect"] == str(FAMILY) and u["last_announce_at"] is not None,
                      f"users {u}, libtorrent {up}/{down}")
            s = site.snatched(user, tid)
            if not res.check(f"{label}: `snatched` has the {role}'s row", s is not None):
                continue
            done = role == "leecher"
            res.check(f"{label}: {role}'s `snatched` uploaded and downloaded are the actual bytes libtorrent moved "
                      f"(no factor), within one piece; to_go 0; "
                      + ("finished 'yes', completedat now (within 2 min), leechtime 5 s or more" if done else
                         "not finished, no completedat, seedtime 5 s or more"),
                      near(s["uploaded"], up) and near(s["downloaded"], down) and s["to_go"] == "0"
                      and s["startdat"] is not None
                      and ((s["finished"], s["completedat"] is not None) == ("yes", True)
                           and int(s["completed_ago"]) <= 120 and int(s["leechtime"]) >= 5 if done else
                           (s["finished"], s["completedat"]) == ("no", None) and int(s["seedtime"]) >= 5),
                      f"snatched {s}, libtorrent {up}/{down}")
        seeder_up, leecher_down = site.user(self.seeder)["uploaded"], site.user(self.leecher)["downloaded"]
        res.check(f"{label}: the members' accounts moved by the payload's size ({size} bytes): the seeder's uploaded "
                  f"within two pieces, the leecher's downloaded "
                  + ("0 (free)" if df == 0 else "within one piece"),
                  near(seeder_up, size, 2 * PIECE) and (int(leecher_down) == 0 if df == 0 else near(leecher_down, size)),
                  f"seeder uploaded {seeder_up}, leecher downloaded {leecher_down}")
        t = site.torrent(tid)
        res.check(f"{label}: `torrents` has seeders 0, leechers 0 (both stopped), times_completed {completions}, "
                  "visible, last_action set", (t["seeders"], t["leechers"], t["times_completed"], t["visible"])
                  == ("0", "0", str(completions), "yes") and t["last_action"] is not None, f"{t}")
        peers = site.peers(tid)
        res.check(f"{label}: no `peers` row is left (NexusPHP deletes a stopped client's row)", not peers, f"{peers}")


def stopped_gone(res, tracker, s, newcomer_key):
    """After the scenario's clients stopped: a new member's client on its torrent is sent
    no peer (the stopped clients left shoal's swarm as their `peers` rows left the table),
    then stops in turn."""
    swarm = NSwarm(res, f"{s.label}-newcomer", s.ti, s.payload, os.path.join(s.dir, "newcomer"), s.args.verbose)
    try:
        swarm.join("newcomer", tracker.url("http", newcomer_key), seed=False)
        got = swarm.wait_reply("newcomer")
        res.check(f"{s.label}: after both clients stopped, a new member's client is sent no peer (the stopped "
                  "clients are gone from shoal's swarm, as from `peers`)", got is not None and got["num_peers"] == 0,
                  f"first reply {got}")
        res.check(f"{s.label}: the new member's stopped announce is answered", swarm.stop(["newcomer"]) is not None)
    finally:
        for name in list(swarm.clients):
            swarm.leave(name)


def refusals(res, tracker, args, base, member_key):
    """A passkey no member has and an info hash the site does not know, over HTTP
    (lt_site's refusals), then the passkey no member has over UDP."""
    ti = lt_site.refusals(res, tracker, NSwarm, args, base, member_key, INVALID_PASSKEY, NOT_REGISTERED)
    v1 = bytes.fromhex(hashes(ti)[0])
    wrong = secrets.token_hex(16)
    tracker.passkeys.append(wrong)
    swarm = NSwarm(res, "refusals-udp", ti, b"", os.path.join(base, "refusals-udp"), args.verbose)
    try:
        swarm.join("stranger", tracker.url("udp", wrong), seed=False)
        refused = swarm.wait_error("stranger")
        replies = swarm.pump.count("stranger", "tracker_reply_alert")
        res.check("refusals: a client with a passkey no member has gets a tracker error over UDP "
                  "(\"tracker sent a failure message\": libtorrent 2.0.8 drops a UDP error's text), and no reply",
                  refused is not None and "failure message" in refused["message"] and replies == 0,
                  f"{refused}, {replies} replies")
    finally:
        for name in list(swarm.clients):
            swarm.leave(name)
    got = udp_announce(tracker.port, f"/announce.php?passkey={wrong}", v1)
    res.check(f"refusals: that announce (BEP 41 URL data /announce.php?passkey=<unknown>) is answered with a BEP 15 "
              f"error \"{INVALID_PASSKEY}\"", got == (3, INVALID_PASSKEY.encode()), f"{got}")


def test(res, args, server, base, trackers):
    if not socket.has_ipv6:
        args.which = [s for s in args.which if s != "ipv6"]
    site = NexusDb(server, "nexusphp_lt")
    mode = site.sql_mode()
    tables = site.rows("select count(*) as n from information_schema.tables where table_schema = database() "
                       "and table_name in ('users', 'torrents', 'peers', 'snatched', 'settings', 'torrents_state', "
                       "'agent_allowed_family', 'agent_allowed_exception', 'torrent_buy_logs')")[0]["n"]
    res.check("the site's database has NexusPHP's tables (its schema as shipped), in strict mode",
              tables == "9" and "STRICT_TRANS_TABLES" in mode, f"{tables} of 9 tables, sql_mode {mode}")
    scenarios = {}
    for label, first_user, tid, kw in (("http", 10, 100, {}), ("udp", 20, 101, {}), ("ipv6", 30, 102, {"v6": True}),
                                       ("freeleech", 40, 103, {"sp_state": FREE})):
        if label in args.which:
            scenarios[label] = NexusScenario(res, site, args, base, label, first_user, tid, **kw)
    newcomer = site.add_user(90, "newcomer")
    tracker = NexusTracker(res, base, site.url)
    tracker.passkeys.extend(site.passkeys)
    if not lt_site.start_tracker(res, trackers, tracker, "nexusphp"):
        return
    lt_site.transfers(res, tracker, scenarios, (("http", "http", "http"), ("udp", "udp", "udp"),
                                                ("ipv6", "udp", "http"), ("freeleech", "udp", "http")),
                      ("freeleech",))
    last = [s for s in scenarios.values() if s.tracker is not None]
    if last:
        # The freeleech scenario's seeder stopped over UDP and its leecher over HTTP.
        stopped_gone(res, tracker, last[-1], newcomer)
    if "refusals" in args.which:
        refusals(res, tracker, args, base, site.passkeys[0])
    if tracker.tracker is not None:
        check_no_passkeys(res, tracker, tracker.passkeys)


def main():
    began = time.monotonic()
    status = lt_site.main(__doc__, SCENARIOS, "shoal-lt-nexusphp-", test)
    log(f"done in {time.monotonic() - began:.0f} s")
    return status


if __name__ == "__main__":
    finish(main())
