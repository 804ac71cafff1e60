"""A NexusPHP site's database for the benchmark: NexusPHP's schema as it ships (the test
fixture, `database/schema/mysql-schema.sql` of the 1.10 line) in a private MariaDB, and the
rows an announce needs, inserted with the columns the end-to-end test
(crates/server/tests/nexusphp.rs) inserts them with: the site's address and the settings
the load depends on (`settings`), a client family for shoal-bench's clients
(`agent_allowed_family`), a category, members and torrents; shoal with `--schema nexusphp`
on it, started and stopped by PID.

Only the standard library. What does not depend on the site (ports, processes, the MariaDB
server, CPU seconds) is bench/lib/site_common.py's.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import site_common  # noqa: E402
from site_common import sql_str  # noqa: E402

BASE_URL = "https://pt.example.org"

# The settings rows written (NexusPHP reads `settings` with autoload = 'yes'). All are the
# installer's defaults (nexus/Install/settings.default.php), written out so that the run
# does not depend on them: no wait and no download slots (a member here runs hundreds of
# clients), no hit and run, no paid torrents, unapproved torrents visible. NexusPHP's
# own limits on how often one member announces one torrent are not settings at all (5 s,
# 30 s and 300 s, constants of public/announce.php and TrackerRepository): the load
# (`shoal-bench --sweep`) is what keeps within them, see bench/nexusphp.sh.
SETTINGS = {
    "basic.BASEURL": BASE_URL,
    "main.waitsystem": "no",
    "main.maxdlsystem": "no",
    "hr.mode": "disabled",
    "torrent.paid_torrent_enabled": "no",
    "torrent.approval_status_none_visible": "yes",
    "torrent.uploaderdouble": "1",
    "seed_box.enabled": "no",
}

# shoal-bench's clients: peer ids `-SB0001<letter><12 digits>`, any User-Agent. NexusPHP
# judges a pattern against the family's own start string first (AgentAllowRepository).
FAMILY = ("shoal-bench", "shoal-bench 1", "/^-SB0001/", "-SB0001A000000000000")

CATEGORY = 401
# Members' class: 1, the column's default (below VIP, 10: charged in full).
CLASS = 1


class MariaDB(site_common.MariaDB):
    """bench/lib's MariaDB with one database `nexusphp` and its user `nexusphp`."""

    database = "nexusphp"


def insert_site(db):
    """The settings, the client family and the category."""
    rows = ", ".join(f"({sql_str(k)}, {sql_str(v)}, 'yes')" for k, v in SETTINGS.items())
    family, start_name, pattern, start = FAMILY
    db.sql(f"insert into settings (name, value, autoload) values {rows}; "
           "insert into agent_allowed_family (family, start_name, peer_id_pattern, "
           "peer_id_match_num, peer_id_matchtype, peer_id_start, agent_pattern, "
           "agent_match_num, agent_matchtype, agent_start, exception, allowhttps) values "
           f"({sql_str(family)}, {sql_str(start_name)}, {sql_str(pattern)}, 0, 'dec', "
           f"{sql_str(start)}, '', 0, 'dec', '', 'no', 'yes'); "
           f"insert into categories (id, mode, name) values ({CATEGORY}, 4, 'Movies');")


def insert_users(db, passkeys, first=1, batch=2000):
    """One confirmed, enabled member per passkey (32 hex characters, as NexusPHP makes
    them), ids from `first`."""
    for start in range(0, len(passkeys), batch):
        values = []
        for i, key in enumerate(passkeys[start:start + batch], start + first):
            values.append(f"({i}, 'member{i}', 'member{i}@example.org', 'confirmed', NOW(), "
                          f"{CLASS}, 'yes', 'no', 'yes', {sql_str(key)})")
        db.sql("insert into users (id, username, email, status, added, class, enabled, "
               "parked, downloadpos, passkey) values " + ",\n".join(values))


def insert_torrents(db, info_hashes, owner, first=1, batch=2000):
    """One torrent per info hash (hex): normal promotion state, approved, not banned, a
    day old, larger than a client's `left`."""
    for start in range(0, len(info_hashes), batch):
        values = []
        for n, h in enumerate(info_hashes[start:start + batch], start):
            i = n + first
            values.append(f"({i}, UNHEX('{h}'), 'Torrent {i}', 'torrent-{i}.torrent', "
                          f"{CATEGORY}, {1_000_000_000 + i}, NOW() - INTERVAL 1 DAY, "
                          f"{owner}, 1, 'no', 1)")
        db.sql("insert into torrents (id, info_hash, name, filename, category, size, added, "
               "owner, sp_state, banned, approval_status) values " + ",\n".join(values))


def reset_activity(db):
    """Forgets every announce's effect: no peers, snatches, cheaters or hit and runs, the
    torrents' counts at zero, the members' transfer and announce marks as inserted."""
    db.sql("truncate table peers; truncate table snatched; truncate table cheaters; "
           "truncate table hit_and_runs; "
           "update torrents set seeders = 0, leechers = 0, times_completed = 0, "
           "last_action = NULL; "
           "update users set uploaded = 0, downloaded = 0, last_announce_at = NULL, "
           "clientselect = 0, showclienterror = 'no';")


class Shoal(site_common.Shoal):
    """shoal with `--private --schema nexusphp`, HTTP and UDP on one port, pinned to
    `cpus`; `nexusphp` is the lines of its `[nexusphp]` section."""

    schema = "nexusphp"

    def __init__(self, binary, workdir, db_url, port, nexusphp="", cpus=None, extra=()):
        super().__init__(binary, workdir, db_url, port, f"[nexusphp]\n{nexusphp}", cpus,
                         extra)
