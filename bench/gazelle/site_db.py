"""A Gazelle site's database for the benchmark and the row comparison: a private MariaDB in
the strict sql_mode of Gazelle's development setup, Gazelle's tables from the test
fixture's DDL, users and torrents inserted the way the site inserts them, the two announce
servers that serve it (Ocelot, and shoal with `--schema gazelle`) started and stopped by
PID, and a stand-in for the site's `tools.php` that Ocelot calls when a token is used up.

Only the standard library. What does not depend on the site (ports, processes, the MariaDB
server, CPU seconds) is bench/lib/site_common.py's, and is this module's too for the
scripts that import it.
"""

import http.server
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import site_common  # noqa: E402
from site_common import copy_logs, free_low_port, proc_cpu_seconds, spawn, sql_str, tempdir  # noqa: E402,F401

# Gazelle's development setup (docker-compose.yml, the mysql service's --sql-mode).
STRICT_SQL_MODE = ("STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
                   "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION")
STARTING_UPLOAD = 5_368_709_120  # Gazelle's default STARTING_UPLOAD (5 GiB)
PERMISSION_USER = 2  # the 'User' class of a fresh site


class MariaDB(site_common.MariaDB):
    """bench/lib's MariaDB with the database `gazelle`, its user `gazelle` and the strict
    sql_mode (the server's global mode: every connection, the trackers' too); its dumps
    write binary columns in hex (the file is text)."""

    database = "gazelle"
    hex_blob = True

    def __init__(self, root, cpus=None, sql_mode=STRICT_SQL_MODE):
        super().__init__(root, cpus)
        self.sql_mode = sql_mode


def insert_users(db, passkeys, first=1, batch=2000, enabled="1", visible="1"):
    """One member per passkey, as Gazelle's registration creates them (users_main with the
    required columns, users_leech_stats with the starting upload), enabled. Ids from
    `first`. Each has a registration address of its own in 10.0.0.0/8: Ocelot protects
    (never stores the address of) a member whose `IP` is 127.0.0.1."""
    for start in range(0, len(passkeys), batch):
        main, stats = [], []
        for i, key in enumerate(passkeys[start:start + batch], start + first):
            main.append(
                f"({i}, 'member{i}', 'member{i}@example.org', "
                "'$2y$10$abcdefghijklmnopqrstuuJ0SRpkVbZyQ1F.Vw1oO1oVXPzx2nK9S', "
                f"{sql_str(key)}, '10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}', "
                f"{PERMISSION_USER}, '{enabled}', "
                f"'{visible}', 'XX', '{i:032x}', 1)")
            stats.append(f"({i}, {STARTING_UPLOAD})")
        db.sql("insert into users_main (ID, Username, Email, PassHash, torrent_pass, IP, "
               "PermissionID, Enabled, Visible, ipcc, auth_key, stylesheet_id) values "
               + ",\n".join(main) + ";\n"
               "insert into users_leech_stats (UserID, Uploaded) values "
               + ",\n".join(stats))


def insert_torrents(db, info_hashes, uploader, first=1, batch=2000, free=None,
                    without_stats=()):
    """One torrent group and one torrent per info hash (hex), as an upload creates them
    (torrents_group, torrents, then torrents_leech_stats). `free` maps a torrent's index
    to its FreeTorrent ('1' free, '2' neutral); indexes in `without_stats` get no
    torrents_leech_stats row."""
    free = free or {}
    for start in range(0, len(info_hashes), batch):
        groups, torrents, stats = [], [], []
        for n, h in enumerate(info_hashes[start:start + batch], start):
            i = n + first
            groups.append(f"({i}, 1, 'Album {i}', 2024, '', '')")
            torrents.append(
                f"({i}, {i}, {uploader}, 'WEB', 'FLAC', 'Lossless', UNHEX('{h}'), 10, "
                f"'01 Track.flac', 'Album {i} [FLAC]', {30_000_000 + i}, "
                f"'{free.get(n, '0')}')")
            if n not in without_stats:
                stats.append(f"({i})")
        db.sql("insert into torrents_group (ID, CategoryID, Name, Year, WikiBody, WikiImage) "
               "values " + ",\n".join(groups) + ";\n"
               "insert into torrents (ID, GroupID, UserID, Media, Format, Encoding, "
               "info_hash, FileCount, FileList, FilePath, Size, FreeTorrent) values "
               + ",\n".join(torrents) + ";\n"
               + ("insert into torrents_leech_stats (TorrentID) values "
                  + ",\n".join(stats) if stats else "select 1"))


def reset_activity(db):
    """Forgets every announce's effect: no peers, no snatches, swarms and counters at
    zero, members' upload and download back to the start, tokens unused."""
    db.sql("delete from xbt_files_users; delete from xbt_snatched; "
           "update torrents_leech_stats set Seeders = 0, Leechers = 0, Snatched = 0, "
           "Balance = 0, last_action = NULL; "
           f"update users_leech_stats set Uploaded = {STARTING_UPLOAD}, Downloaded = 0; "
           "update users_freeleeches set Downloaded = 0, Expired = 0;")


def stop_twice(proc, first_wait=10.0, timeout=60.0):
    """SIGTERM to `proc` (ours, by PID); if it has not exited after `first_wait` seconds,
    a second SIGTERM (Ocelot's "press Ctrl-C again"); SIGKILL after `timeout`. Returns
    (exit code, how many SIGTERMs it took)."""
    if proc is None or proc.poll() is not None:
        return (proc.returncode if proc else None, 0)
    proc.send_signal(signal.SIGTERM)
    try:
        return (proc.wait(first_wait), 1)
    except subprocess.TimeoutExpired:
        pass
    proc.send_signal(signal.SIGTERM)
    try:
        return (proc.wait(timeout), 2)
    except subprocess.TimeoutExpired:
        proc.kill()
        return (proc.wait(), 3)


class Ocelot(site_common.Tracker):
    """Ocelot run from `workdir` with an `ocelot.conf` written there, pinned to `cpus`.
    Ocelot binds 0.0.0.0 (it has no listen address setting). `conf` adds or overrides
    keys of its config."""

    name = "ocelot"

    def __init__(self, binary, workdir, db, port, site_password, report_password,
                 site_port=None, cpus=None, conf=None):
        super().__init__(binary, workdir, port, cpus)
        self.sigterms = 0
        self.first_wait = 10.0  # seconds before the second SIGTERM
        values = {
            "listen_port": port,
            "mysql_host": "127.0.0.1",
            "mysql_port": db.port,
            "mysql_username": "gazelle",
            "mysql_password": "pw",
            "mysql_db": db.database,
            "site_password": site_password,
            "report_password": report_password,
            "site_host": "127.0.0.1",
            "site_service": site_port or 9,
            "site_path": "",
            "report_path": workdir,
        }
        values.update(conf or {})
        with open(os.path.join(workdir, "ocelot.conf"), "w") as f:
            for k, v in values.items():
                f.write(f"{k} = {v}\n")

    def start(self):
        self.proc, self.log = spawn([self.binary, "-c", "ocelot.conf"], self.workdir, self.port,
                                    self.name, self.cpus)
        return self

    def reload(self):
        """SIGUSR1: the users, torrents, tokens and whitelist read again."""
        self.proc.send_signal(signal.SIGUSR1)

    def stop(self):
        rc, self.sigterms = stop_twice(self.proc, first_wait=self.first_wait)
        return rc


class Shoal(site_common.Shoal):
    """shoal with `--private --schema gazelle`, HTTP and UDP on one port, pinned to `cpus`;
    its config file holds the site's passwords and address (`[private] site_password`,
    `report_password`, `site_url`) and `gazelle`, the lines of its `[gazelle]` section."""

    schema = "gazelle"

    def __init__(self, binary, workdir, db, port, site_password, report_password,
                 site_port=None, gazelle="", cpus=None, extra=()):
        site_url = f"http://127.0.0.1:{site_port or 9}"
        super().__init__(binary, workdir, db.url, port,
                         f'[private]\nsite_password = "{site_password}"\n'
                         f'report_password = "{report_password}"\nsite_url = "{site_url}"\n\n'
                         f'[gazelle]\n{gazelle}', cpus, extra)
        self.sigterms = 0

    def reload(self):
        self.proc.send_signal(signal.SIGUSR1)

    def stop(self):
        rc, self.sigterms = stop_twice(self.proc, first_wait=120.0)
        return rc


def runs(binary):
    """Whether `binary` starts at all (`--version` exits 0): a shoal without `--schema
    gazelle` still runs; the caller learns that from its start."""
    if not binary or not os.path.exists(binary):
        return False
    try:
        return subprocess.run([binary, "--version"], capture_output=True,
                              timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class StandInSite:
    """The site's `tools.php` as Ocelot calls it when a token is used up: each request is
    recorded; `GET /tools.php?key=<site password>&type=expiretoken&action=ocelot&tokens=
    u:t,u:t` marks those users_freeleeches rows Expired (what Gazelle's
    sections/tools/managers/ocelot.php does) and answers 200; anything else 403."""

    def __init__(self, db, site_password):
        self.db = db
        self.site_password = site_password
        self.calls = []
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (the http.server name)
                site.calls.append(self.path)
                url = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(url.query))
                ok = (url.path.endswith("/tools.php") and q.get("key") == site.site_password
                      and q.get("type") == "expiretoken" and "tokens" in q)
                if ok:
                    pairs = []
                    for item in q["tokens"].split(","):
                        u, _, t = item.partition(":")
                        if u.isdigit() and t.isdigit():
                            pairs.append(f"(UserID = {int(u)} and TorrentID = {int(t)})")
                    if pairs:
                        site.db.sql("update users_freeleeches set Expired = 1 where "
                                    + " or ".join(pairs))
                self.send_response(200 if ok else 403)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def wait_seconds(s):
    time.sleep(s)
