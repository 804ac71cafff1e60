"""A UNIT3D site's database for the benchmark and the row comparison: a private MariaDB,
UNIT3D's tables from the test fixture's DDL, groups, users and torrents inserted the way
the site inserts them, and the two announce servers that serve it (shoal with
`--schema unit3d`, UNIT3D-Announce) started and stopped by PID.

Only the standard library. What does not depend on the site (ports, processes, the MariaDB
server, CPU seconds) is bench/lib/site_common.py's, and is this module's too for the
scripts that import it.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import site_common  # noqa: E402
from site_common import copy_logs, free_low_port, proc_cpu_seconds, spawn, sql_str, stop, tempdir  # noqa: E402,F401

# UNIT3D's moderation statuses (torrents.status).
PENDING, APPROVED, REJECTED, POSTPONED = 0, 1, 2, 3

# The groups a fresh UNIT3D site seeds that the announce rules name, with the columns the
# site's seeder sets: (slug, name, position, level, download_slots, immune, freeleech,
# double upload). 'user' is where registered members land.
GROUPS = [
    ("validating", "Validating", 4, 0, None, 0, 0, 0),
    ("guest", "Guest", 3, 10, None, 0, 0, 0),
    ("user", "User", 6, 30, None, 0, 0, 0),
    ("administrator", "Administrator", 18, 5000, None, 1, 1, 1),
    ("banned", "Banned", 1, 0, None, 0, 0, 0),
    ("disabled", "Disabled", 2, 0, None, 0, 0, 0),
    ("leech", "Leech", 5, 20, 1, 0, 0, 0),
    ("uploader", "Uploader", 12, 250, None, 1, 1, 0),
]

DEFAULT_UPLOAD = 53_687_091_200  # what a new member starts with (50 GiB), the site's default
DEFAULT_DOWNLOAD = 1_073_741_824  # 1 GiB


class MariaDB(site_common.MariaDB):
    """bench/lib's MariaDB with one database `unit3d` and its user `unit3d`."""

    database = "unit3d"


def insert_groups(db):
    """The site's seeded groups (those the announce rules name). Returns slug -> id."""
    values = []
    for slug, name, position, level, slots, immune, fl, du in GROUPS:
        values.append(
            f"({sql_str(name)}, {sql_str(slug)}, {position}, {level}, "
            f"{'NULL' if slots is None else slots}, '#7289DA', 'fas fa-user', 'none', "
            f"{immune}, {fl}, {du}, 1, 1, 1, 1, 1)")
    db.sql("insert into `groups` (name, slug, position, level, download_slots, color, "
           "icon, effect, is_immune, is_freeleech, is_double_upload, can_chat, "
           "can_comment, can_invite, can_request, can_upload) values "
           + ",\n".join(values))
    return {slug: int(i) for i, slug in db.sql("select id, slug from `groups`", rows=True)}


def insert_users(db, passkeys, group_id, first=1, batch=2000):
    """One member per passkey, as registration creates them: name, e-mail, password hash,
    passkey, RSS key, the group, the site's starting upload and download. Ids first, ..."""
    now = "NOW()"
    for start in range(0, len(passkeys), batch):
        values = []
        for i, key in enumerate(passkeys[start:start + batch], start + first):
            rss = f"{(i * 2654435761) % (1 << 64):016x}{i:016x}"
            values.append(
                f"({i}, 'member{i}', 'member{i}@example.org', "
                "'$2y$10$abcdefghijklmnopqrstuuJ0SRpkVbZyQ1F.Vw1oO1oVXPzx2nK9S', "
                f"{sql_str(key)}, {group_id}, 1, {DEFAULT_UPLOAD}, {DEFAULT_DOWNLOAD}, "
                f"'{rss}', 1, {now}, {now}, {now})")
        db.sql("insert into users (id, username, email, password, passkey, group_id, "
               "active, uploaded, downloaded, rsskey, can_download, created_at, updated_at, "
               "email_verified_at) values " + ",\n".join(values))


def insert_torrents(db, info_hashes, uploader, status=APPROVED, first=1, batch=2000,
                    free=None, doubleup=None):
    """One torrent per info hash (hex), as an upload creates them and a moderator approves
    them: name, description, the stored file's name, file count, folder, NFO, size, the
    hash, the uploader, the status and who moderated it (the system user for an approved
    upload). `free` and `doubleup` map a torrent's index to its
    freeleech percentage and double-upload flag."""
    free = free or {}
    doubleup = doubleup or {}
    for start in range(0, len(info_hashes), batch):
        values = []
        for n, h in enumerate(info_hashes[start:start + batch], start):
            i = n + first
            values.append(
                f"({i}, 'Torrent {i} 1080p WEB-DL', 'Description of torrent {i}.', "
                f"'{i:013x}.torrent', 1, 'Torrent.{i}.1080p', '', {1_000_000_000 + i}, "
                f"UNHEX('{h}'), {uploader}, "
                f"{status}, {free.get(n, 0)}, {doubleup.get(n, 0)}, "
                f"{'NOW()' if status != PENDING else 'NULL'}, "
                f"{uploader if status != PENDING else 'NULL'}, NOW(), NOW(), NOW())")
        db.sql("insert into torrents (id, name, description, file_name, num_file, folder, "
               "nfo, size, info_hash, user_id, status, free, doubleup, moderated_at, "
               "moderated_by, created_at, updated_at, bumped_at) values "
               + ",\n".join(values))


def reset_activity(db):
    """Forgets every announce's effect: no peers, no history, no unregistered hashes,
    torrent counters at zero, members' upload and download back to the start."""
    db.sql("delete from peers; delete from history; "
           "delete from unregistered_info_hashes; "
           "update torrents set seeders = 0, leechers = 0, times_completed = 0, "
           "balance = NULL; "
           f"update users set uploaded = {DEFAULT_UPLOAD}, downloaded = {DEFAULT_DOWNLOAD};")


class Unit3dAnnounce(site_common.Tracker):
    """UNIT3D-Announce, run from `workdir` (which gets its `.env`), pinned to `cpus`."""

    name = "unit3d-announce"

    def __init__(self, binary, workdir, db_url, port, apikey, cpus=None, env=None):
        super().__init__(binary, workdir, port, cpus)
        values = {
            "DATABASE_URL": db_url,
            "FLUSH_INTERVAL": "3",
            "NUMWANT_DEFAULT": "25",
            "NUMWANT_MAX": "50",
            "ANNOUNCE_MIN": "1800",
            "ANNOUNCE_MAX": "3600",
            "UPLOAD_FACTOR": "100",
            "DOWNLOAD_FACTOR": "100",
            "PEER_EXPIRY_INTERVAL": "1800",
            "ACTIVE_PEER_TTL": "7200",
            "INACTIVE_PEER_TTL": "1814400",
            "MAX_PEERS_PER_TORRENT_PER_USER": "3",
            "APIKEY": apikey,
            "LISTENING_IP_ADDRESS": "127.0.0.1",
            "LISTENING_PORT": str(port),
            "IS_CONNECTIVITY_CHECK_ENABLED": "false",
            "CONNECTIVITY_CHECK_INTERVAL": "1800",
            "IS_ANNOUNCE_LOGGING_ENABLED": "false",
            # v0.3's and v0.3.1's keys (946b6e7 ignores what it does not read): one batch
            # per flush as `.env.example` has it, no connectivity requirement, and the
            # peer-list limits shoal's `[unit3d]` has by default. The flush in
            # milliseconds and the enforced minimum interval follow `FLUSH_INTERVAL` and
            # `ANNOUNCE_MIN` below, so that both releases run the same rules as shoal.
            "MAX_BATCHES_PER_FLUSH": "1",
            "REQUIRE_PEER_CONNECTIVITY": "false",
            "USER_RECEIVE_SEED_LIST_RATE_LIMITS": "60=10;3600=120",
            "USER_RECEIVE_LEECH_LIST_RATE_LIMITS": "60=10;3600=120",
        }
        values.update(env or {})
        values.setdefault("FLUSH_INTERVAL_MILLISECONDS", str(int(values["FLUSH_INTERVAL"]) * 1000))
        values.setdefault("ANNOUNCE_MIN_ENFORCED", values["ANNOUNCE_MIN"])
        with open(os.path.join(workdir, ".env"), "w") as f:
            for k, v in values.items():
                f.write(f"{k}={v}\n")

    def start(self):
        env = dict(os.environ)
        env.pop("DATABASE_URL", None)
        # One tokio worker, as shoal runs one worker: the tracker has one core.
        env["TOKIO_WORKER_THREADS"] = "1"
        self.proc, self.log = spawn([self.binary], self.workdir, self.port, self.name, self.cpus, env)
        return self

    def stop(self):
        return stop(self.proc)

    def announce_url(self, passkey):
        return f"http://127.0.0.1:{self.port}/announce/{passkey}"


class Shoal(site_common.Shoal):
    """shoal with `--private --schema unit3d`, HTTP and UDP on one port, pinned to `cpus`;
    its config file holds the site's key (`[private] site_api_key`) and `unit3d`, the
    lines of its `[unit3d]` section."""

    schema = "unit3d"

    def __init__(self, binary, workdir, db_url, port, unit3d="", apikey="s" * 32,
                 cpus=None, extra=()):
        super().__init__(binary, workdir, db_url, port,
                         f'[private]\nsite_api_key = "{apikey}"\n\n[unit3d]\n{unit3d}', cpus, extra)
