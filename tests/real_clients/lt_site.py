"""What the site tests share (libtorrent_unit3d.py, libtorrent_gazelle.py and
libtorrent_nexusphp.py: shoal as a UNIT3D, a Gazelle or a NexusPHP site's announce server on
a real MariaDB): the site's database read
and written with the `mariadb` client, a scenario's two members and torrent inserted before
shoal starts, the plain transfers, the refusals, the outage, the two halves of the restart
scenario around what each site's tables show, and the test's frame (options, MariaDB
started or the test skipped, a temporary directory, the tracker stopped at the end).

A module, not a test: run.sh runs libtorrent_*.py only. Each test keeps its own tables'
checks and check names; the steps behind them live here once.
"""
import os
import secrets
import subprocess
import tempfile

import db_servers
from libtorrent_private import (PIECE, TCP_AND_UDP, TOKEN, PrivateTracker, Swarm, check_no_passkeys, hashes,
                                make_torrent, reported)
from libtorrent_private_accounting import Scenario, options
from libtorrent_private_postgres import outage, start_server
from lt_swarm import Results, free_port, log, write_payload

import libtorrent as lt  # lt_swarm explains when it cannot be imported

AGENT = "libtorrent/2.0.8.0"  # python3-libtorrent's User-Agent (settings user_agent)
UPLOADER = 1  # the user who uploaded every torrent
CLIENTS = ("seeder", "leecher")
SLOW = 512 << 10  # bytes/s: the leecher's download limit in a slowed down transfer


class SiteError(Exception):
    pass


class SiteDb:
    """A site's database on the test's MariaDB: its tables (the fixture's DDL, `fixture`)
    and `first_rows` (SQL the site runs before any member exists), then the uploader's
    account (`add_user`, a subclass's); read and written with the `mariadb` client."""

    def __init__(self, server, name, fixture, first_rows):
        self.server = server
        self.name = name
        self.url = server.create_database(name)
        with open(fixture) as f:
            self.execute(f.read())
        self.execute(first_rows)
        self.passkeys = []
        self.add_user(UPLOADER, "uploader")

    def client(self, sql, batch=False):
        cmd = ["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", str(self.server.port), "-u", "root",
               "-D", self.name] + (["-B"] if batch else [])
        try:
            done = subprocess.run(cmd, input=sql.encode(), capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise SiteError(f"mariadb client: {e}")
        if done.returncode != 0:
            raise SiteError(f"{sql[:200]}: {done.stderr.decode(errors='replace').strip()}")
        return done.stdout.decode(errors="replace")

    def execute(self, sql):
        self.client(sql)

    def rows(self, sql):
        """The query's rows as dicts of strings (None for NULL)."""
        lines = self.client(sql, batch=True).splitlines()
        if not lines:
            return []
        names = lines[0].split("\t")
        return [{n: (None if v == "NULL" else v) for n, v in zip(names, line.split("\t"))} for line in lines[1:]]

    def sql_mode(self):
        return self.rows("select @@session.sql_mode as mode")[0]["mode"]


def near(got, want, tolerance=PIECE):
    return got is not None and abs(int(got) - int(want)) <= tolerance


class SiteTracker(PrivateTracker):
    """shoal as a site's announce server on the site's database, on 127.0.0.1 and [::1],
    its UDP connection ids issued under a key file (so that they survive a restart). A
    subclass names its `schema`, the lines of `[private]` it adds (`private_lines`), its own
    section (`section`) and the path of its announce URL (`path`, `{passkey}` in it)."""

    schema = ""
    private_lines = ""
    section = ""
    path = ""

    def __init__(self, res, directory, database):
        super().__init__(res, directory, database=database)
        self.port6 = free_port("::1", kinds=TCP_AND_UDP, first=self.port + 7 - os.getpid() % 5000)
        with open(self.config, "w") as f:
            f.write(f'log_level = "info"\n[admin]\ntoken = "{TOKEN}"\n'
                    f'[private]\nenabled = true\nschema = "{self.schema}"\n{self.private_lines}'
                    f'[udp]\nconnection_id_key_file = "{os.path.join(directory, "udp.key")}"\n'
                    + self.section)

    def command(self):
        return super().command() + ["--schema", self.schema, "--udp", f"[::1]:{self.port6}",
                                    "--http", f"[::1]:{self.port6}"]

    def answers(self):
        return self.api("GET", "/metrics", token=False)[0] == 200

    def url(self, proto, passkey, v6=False):
        host = f"[::1]:{self.port6}" if v6 else f"127.0.0.1:{self.port}"
        return f"{proto}://{host}" + self.path.format(passkey=passkey)


class SiteScenario(Scenario):
    """A scenario's seeder and leecher (members `first_user` and the next, each with a
    passkey of the site's) and its file and v1 torrent (a site keeps one info hash per
    torrent); the subclass inserts the torrent in the site's tables before shoal starts.
    `swarm_class`: the Swarm its own steps (the restart) use."""

    swarm_class = Swarm

    def __init__(self, res, site, args, base, label, first_user, torrent_id, size_mib=None):
        self.res, self.site, self.args, self.label = res, site, args, label
        self.tracker = None
        self.dir = os.path.join(base, label)
        self.seeder, self.leecher = first_user, first_user + 1
        self.keys = {u: site.add_user(u, f"{label}{u}") for u in (self.seeder, self.leecher)}
        path, self.payload = write_payload(os.path.join(self.dir, "seeder"), (size_mib or args.size_mib) << 20)
        self.ti = make_torrent(path, hybrid=False)
        self.info_hash = hashes(self.ti)[0]
        self.torrent_id = torrent_id
        self.registered = True
        self.ports = {}
        self.protos = {}

    def run(self, seed_proto, leech_proto, **kw):
        self.protos = {"seeder": seed_proto, "leecher": leech_proto}
        return super().run(seed_proto, leech_proto, **kw)

    def note_ports(self, swarm):
        for name in CLIENTS:
            self.ports[name] = swarm.clients[name][0].listen_port()

    def agent(self, role):
        return AGENT if self.protos[role] == "http" else "shoal/udp"

    def live(self, swarm):
        """While both clients run (the leecher slowed down): a flush writes the torrent's
        figures and both clients' rows, active (`check_live`, the subclass's)."""
        self.note_ports(swarm)
        if not self.flush():
            return False
        self.check_live(self.site.torrent(self.torrent_id), self.site.peers(self.torrent_id))
        return True


def transfers(res, tracker, scenarios, plan, really_downloaded):
    """The plain transfers: each (label, seeder's protocol, leecher's protocol) of `plan`
    whose scenario runs, slowed down, the rows checked while both run (`live`) and after;
    for the labels in `really_downloaded` (whose rows show no download), that the leecher
    did download."""
    for label, seed_proto, leech_proto in plan:
        s = scenarios.get(label)
        if s is None:
            continue
        s.tracker = tracker
        moved = s.run(seed_proto, leech_proto, rate=SLOW, during=s.live)
        s.check_rows(moved)
        if moved and label in really_downloaded:
            res.check(f"{label}: the leecher really downloaded (libtorrent's counter is the file's size or more)",
                      moved["leecher"][1] >= len(s.payload), f"{moved['leecher'][1]} bytes")


def refusals(res, tracker, swarm_class, args, base, user_key, wrong_key_reason, unknown_hash_reason):
    """A client with a passkey no member has, and one of a member announcing an info hash
    the site does not know: each refused over HTTP with the site's reason. Returns the
    torrent of the unknown hash."""
    path, payload = write_payload(os.path.join(base, "refusals", "seed"), 1 << 20)
    ti = make_torrent(path, hybrid=False)
    swarm = swarm_class(res, "refusals", ti, payload, os.path.join(base, "refusals"), args.verbose)
    wrong = secrets.token_hex(16)
    tracker.passkeys.append(wrong)
    try:
        for name, key, reason in (("stranger", wrong, wrong_key_reason), ("unknown", user_key, unknown_hash_reason)):
            swarm.join(name, tracker.url("http", key), seed=False)
            refused = swarm.wait_error(name)
            replies = swarm.pump.count(name, "tracker_reply_alert")
            res.check(f"refusals: {name}: refused over HTTP with \"{reason}\", no reply",
                      refused is not None and refused["reason"] == reason and replies == 0,
                      f"{refused}, {replies} replies")
            swarm.leave(name)
    finally:
        for name in list(swarm.clients):
            swarm.leave(name)
    return ti


def run_outage(res, tracker, server, s):
    """The outage scenario: MariaDB stopped and started again in the middle of a slowed
    down transfer (seeder over UDP, leecher over HTTP), then the rows of `s` checked."""
    s.tracker = tracker
    during = outage(res, tracker, server)
    s.check_rows(s.run("udp", "http", rate=SLOW, at=0.2, during=lambda swarm: s.note_ports(swarm) or during(swarm)))


def start_tracker(res, trackers, tracker, schema):
    """Starts shoal as the site's announce server (a failed check where it does not); it
    joins `trackers`, stopped at the end."""
    trackers.append(tracker)
    return res.check(f"shoal starts with --schema {schema} on the site's database", tracker.start())


def last_scenarios(res, args, tracker, server, scenarios, newcomer):
    """The outage and the restart (`newcomer`: the new member's id and passkey) where they
    run, then no passkey in shoal's log or /metrics."""
    if "outage" in args.which:
        run_outage(res, tracker, server, scenarios["outage"])
    if "restart" in args.which:
        restart(res, tracker, scenarios["restart"], *newcomer)
    if tracker.tracker is not None:
        check_no_passkeys(res, tracker, tracker.passkeys)


def reannounce(swarm, names, what, res, timeout_s=15):
    """These clients announce now; True once each got a reply."""
    since = len(swarm.pump.events)
    swarm.reannounce(names)
    got = swarm.wait(lambda: all(swarm.pump.find(n, "tracker_reply_alert", since=since) for n in names), timeout_s)
    errors = [f.get("reason") for n, k, f in swarm.pump.events[since:] if k == "tracker_error_alert"]
    return res.check(f"restart: {what}: the announces of the {' and '.join(names)} are answered", bool(got),
                     f"errors {errors}")


def set_limits(swarm, names, rate):
    for name in names:
        h = swarm.handle(name)
        h.set_download_limit(rate)
        h.set_upload_limit(rate)


def wait_done(swarm, names, timeout_s):
    """Waits for these clients to seed, watching where each one's peers came from (a
    finished client drops its seeds, so each is watched until all are done)."""
    sources = {name: set() for name in names}

    def done():
        seeding = True
        for name in names:
            h = swarm.handle(name)
            sources[name].update(p.source for p in h.get_peer_info())
            st = h.status()
            seeding = seeding and st.is_seeding and st.state == lt.torrent_status.seeding
        return seeding

    return swarm.wait(done, timeout_s), sources


def restart_sigterm(res, tracker, s, swarm, unwritten):
    """The restart scenario up to shoal's exit: the seeder over HTTP, the leecher over UDP
    (slowed down) to 30%, both held still while they announce (so that what they announced
    is known), `unwritten()` (nothing of the scenario in the tables: no flush ran), then
    SIGTERM, which shoal must exit 0 on. Returns what each client had announced, or None
    where a step failed."""
    s.tracker = tracker
    s.protos = {"seeder": "http", "leecher": "udp"}
    swarm.join("seeder", s.url("http", s.seeder), seed=True)
    if not res.check("restart: seeder (http) gets a tracker reply", swarm.wait_reply("seeder")):
        return None
    swarm.join("leecher", s.url("udp", s.leecher), seed=False, download_rate_limit=SLOW)
    if not res.check("restart: leecher (udp) gets a reply with >= 1 peer", swarm.wait_reply("leecher", min_peers=1)):
        return None
    s.note_ports(swarm)
    if not res.check("restart: leecher reaches 30%", swarm.wait(lambda: swarm.progress("leecher") >= 0.3,
                                                                s.args.timeout)):
        return None
    set_limits(swarm, CLIENTS, 1)
    swarm.wait(lambda: None, 1.0)
    announced = {n: reported(swarm.handle(n).status()) for n in CLIENTS}
    if not reannounce(swarm, CLIENTS, "before SIGTERM", res):
        return None
    res.check("restart: nothing of this scenario is written before SIGTERM (no flush ran)", unwritten())
    status = tracker.sigterm()
    res.check("restart: shoal exits with status 0 within 30 s of SIGTERM", status == 0, f"status {status}")
    return announced


def restart_finish(res, swarm, args, sources):
    """After shoal started again: the old clients announce to it, the leecher and the
    newcomer finish (their bytes checked, with `sources` where their peers came from) and
    the three stop. Returns what each moved, or None where a step failed."""
    if not reannounce(swarm, CLIENTS, "after the restart", res):
        return None
    swarm.handle("leecher").set_download_limit(0)
    finished, seen = wait_done(swarm, ("leecher", "newcomer"), args.timeout)
    for name in ("leecher", "newcomer"):
        swarm.check_bytes(name, f"restart: {name} downloads the file and its bytes equal the seed's", finished)
        if sources:
            swarm.check_sources(f"restart: {name}'s peers came from the tracker", seen[name])
    if not finished:
        return None
    moved = swarm.stop(["seeder", "leecher", "newcomer"])
    if not res.check("restart: the stopped announces of the three clients are answered", moved is not None):
        return None
    return moved


def restart(res, tracker, s, newcomer_id, newcomer_key):
    """The restart scenario: SIGTERM in the middle of a slowed down transfer
    (`restart_sigterm`); while shoal is away the transfer goes on; shoal starts again and
    a new member's client (`newcomer_key`) joins; the old clients announce again and all
    three finish (`restart_finish`); then a flush. What the site's tables must show are
    the scenario's checks: `restart_unwritten()`, `check_after_sigterm(announced)`,
    `start_again(tracker)`, `check_newcomer(swarm, since)` and
    `check_restart_rows(moved, newcomer_id, away)`; `restart_sources`: whether where the
    finished clients' peers came from is checked too."""
    swarm = s.swarm_class(res, s.label, s.ti, s.payload, s.dir, s.args.verbose)
    moved = None
    try:
        announced = restart_sigterm(res, tracker, s, swarm, s.restart_unwritten)
        if announced is None:
            return
        s.check_after_sigterm(announced)
        # The transfer goes on while shoal is away.
        set_limits(swarm, CLIENTS, 0)
        swarm.handle("leecher").set_download_limit(SLOW)
        swarm.wait(lambda: None, 3.0)
        since = len(swarm.pump.events)
        if not s.start_again(tracker):
            return
        away = reported(swarm.handle("leecher").status())[1] - announced["leecher"][1]
        log(f"restart: {away} bytes moved while shoal was away")
        swarm.join("newcomer", tracker.url("http", newcomer_key), seed=False)
        s.check_newcomer(swarm, since)
        moved = restart_finish(res, swarm, s.args, s.restart_sources)
    finally:
        for name in list(swarm.clients):
            swarm.leave(name)
    if moved is None or not s.flush():
        return
    if away <= 2 * PIECE:
        print(f"  NOTE restart: only {away} bytes moved while shoal was away this run; the totals are still checked",
              flush=True)
    s.check_restart_rows(moved, newcomer_id, away)


def main(doc, scenarios, prefix, body, start=None):
    """The test's frame: its options (`scenarios` by name, "transfer" meaning http and
    udp), MariaDB started (by `start` where given), or the test failed or skipped where it
    cannot be; then `body(res, args, server, directory, trackers)` in a temporary
    directory, which appends the tracker it makes to `trackers` (stopped here); a
    SiteError or a server error fails "the site's database answers". Returns the exit
    status."""
    args = options(doc, extra_scenarios=[s for s in scenarios if s not in ("transfer", "freeleech", "restart")])
    args.which = args.only or scenarios
    if "transfer" in args.which:  # the accounting tests' name for the plain transfers
        args.which += ["http", "udp"]
    server, status = start_server("mariadb", start)
    if server is None:
        return status
    res = Results()
    tmp = tempfile.TemporaryDirectory(prefix=prefix)
    trackers = []
    try:
        body(res, args, server, tmp.name, trackers)
    except (SiteError, db_servers.ServerError) as e:
        res.check("the site's database answers", False, str(e))
    finally:
        for tracker in trackers:
            tracker.stop()
        tmp.cleanup()
        server.close()
    return res.summary()
