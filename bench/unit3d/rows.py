"""The same scripted announces against UNIT3D-Announce and against shoal `--schema unit3d`,
each on a fresh copy of the same UNIT3D database, and the rows each leaves in the tables
an announce server writes, normalised and compared. Run by bench/unit3d-rows.sh.

The script (SCRIPT below) is what a handful of members' clients do: a seeder and a
leecher on an ordinary torrent (started, progress, completed, stopped), a freeleech
torrent, a double-upload torrent, an info hash the site does not know, and one member
running a second client on a torrent. Between some steps the script waits longer than
the flush interval, so that seed time (which grows between two flushes of an active
seeder) is exercised. After the last step each tracker gets SIGTERM (both write what they
hold before exiting), then `peers`, `history`, `users`, `torrents` and
`unregistered_info_hashes` are read back: ids, byte counts and flags as they are, times
only as present or absent (`seedtime` as zero or not), and the peer id in hex.

Each tracker's rows go to OUT/<name>.rows, its answers to OUT/<name>.answers, its log to
OUT/<name>.log; every
tracker after the first is diffed against the first (OUT/<name>.diff), and the summary
says which tables differ. Run one tracker twice (`--tracker a=... --tracker b=...` with
the same binary) to see that the normalisation leaves nothing that varies by itself.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import site_db as site  # noqa: E402
import site_rows  # noqa: E402

AGENT = "qBittorrent/4.6.5"
MEMBERS = ["alice", "bob", "carol", "dave"]  # user ids 2..5 (1 is the site's system user)
TORRENTS = ["plain", "freeleech", "double-upload"]  # torrent ids 1..3
UNKNOWN = "unknown"


def info_hash(name):
    """A fixed 20-byte hash per torrent name."""
    return (name.encode() * 20)[:20]


def passkey(member):
    return (member * 32)[:32]


def peer_id(member, client=0):
    return f"-qB4650-{member[:4]:<4}{client:08d}".encode()[:20]


# (member, client, torrent, event, uploaded, downloaded, left), or ("wait", seconds).
SCRIPT = [
    ("alice", 0, "plain", "started", 0, 0, 0),
    ("bob", 0, "plain", "started", 0, 0, 4_000_000),
    ("bob", 0, "plain", "", 100_000, 1_500_000, 2_500_000),
    ("alice", 0, "plain", "", 1_500_000, 0, 0),
    ("wait", 5),
    ("bob", 0, "plain", "completed", 300_000, 4_000_000, 0),
    ("alice", 0, "plain", "", 4_000_000, 0, 0),
    ("carol", 0, "freeleech", "started", 0, 0, 2_000_000),
    ("alice", 0, "freeleech", "started", 0, 0, 0),
    ("dave", 0, "double-upload", "started", 0, 0, 0),
    ("carol", 0, "freeleech", "", 0, 1_500_000, 500_000),
    ("alice", 0, "freeleech", "", 1_500_000, 0, 0),
    ("dave", 0, "double-upload", "", 1_000_000, 0, 0),
    ("carol", 0, UNKNOWN, "started", 0, 0, 7_000),
    ("dave", 0, "plain", "started", 0, 0, 4_000_000),
    ("dave", 1, "plain", "started", 0, 0, 4_000_000),
    ("dave", 0, "plain", "", 0, 1_000_000, 3_000_000),
    ("dave", 1, "plain", "", 50_000, 2_000_000, 2_000_000),
    ("wait", 5),
    ("bob", 0, "plain", "", 900_000, 4_000_000, 0),
    ("alice", 0, "plain", "", 4_500_000, 0, 0),
    ("dave", 0, "double-upload", "", 1_600_000, 0, 0),
    ("bob", 0, "plain", "stopped", 1_000_000, 4_000_000, 0),
    ("carol", 0, "freeleech", "completed", 0, 2_000_000, 0),
    ("dave", 1, "plain", "stopped", 60_000, 2_100_000, 1_900_000),
    ("alice", 0, "freeleech", "stopped", 2_000_000, 0, 0),
]


def fill(db, ddl):
    db.load_ddl(ddl)
    groups = site.insert_groups(db)
    site.insert_users(db, ["system" * 5 + "xx"] + [passkey(m) for m in MEMBERS],
                      groups["user"])
    hashes = [info_hash(t).hex() for t in TORRENTS]
    site.insert_torrents(db, hashes, uploader=1, free={1: 100}, doubleup={2: 1})


def announce(port, step):
    member, client, torrent, event, up, down, left = step
    q = [("info_hash", info_hash(torrent)), ("peer_id", peer_id(member, client)),
         ("port", str(50000 + MEMBERS.index(member) * 10 + client)), ("uploaded", str(up)),
         ("downloaded", str(down)), ("left", str(left)), ("compact", "1"),
         ("numwant", "50")]
    if event:
        q.append(("event", event))
    status, body = site_rows.get(port, f"/announce/{passkey(member)}?{site_rows.query(q)}",
                                 agent=AGENT)
    return f"{status} {site_rows.summarise(body)}"


QUERIES = {
    "peers": "select user_id, torrent_id, hex(peer_id), inet6_ntoa(ip), port, agent, "
             "uploaded, downloaded, `left`, seeder, active, visible, connectable, "
             "created_at is not null, updated_at is not null from peers "
             "order by user_id, torrent_id, hex(peer_id)",
    "history": "select user_id, torrent_id, agent, uploaded, actual_uploaded, "
               "client_uploaded, downloaded, refunded_download, actual_downloaded, "
               "client_downloaded, seeder, active, seedtime > 0, immune, hitrun, "
               "prewarned_at is not null, created_at is not null, "
               "updated_at is not null, completed_at is not null from history "
               "order by user_id, torrent_id",
    "users": "select id, uploaded, downloaded from users order by id",
    "torrents": "select id, seeders, leechers, times_completed, balance from torrents "
                "order by id",
    "unregistered_info_hashes": "select user_id, hex(info_hash), created_at is not null, "
                                "updated_at is not null from unregistered_info_hashes "
                                "order by user_id, hex(info_hash)",
}

HEADERS = {
    "peers": "user torrent peer_id ip port agent uploaded downloaded left seeder active "
             "visible connectable created? updated?",
    "history": "user torrent agent uploaded actual_up client_up downloaded refunded "
               "actual_down client_down seeder active seedtime>0 immune hitrun prewarned? "
               "created? updated? completed?",
    "users": "id uploaded downloaded",
    "torrents": "id seeders leechers times_completed balance",
    "unregistered_info_hashes": "user info_hash created? updated?",
}


def run_tracker(kind, name, binary, db, snapshot, work, out, flush):
    db.restore(snapshot)
    port = site.free_low_port()
    wd = os.path.join(work, name)
    if kind == "u3a":
        t = site.Unit3dAnnounce(binary, wd, db.url, port, apikey="c" * 32,
                                env={"FLUSH_INTERVAL": str(flush)})
    else:
        t = site.Shoal(binary, wd, db.url, port,
                       unit3d=f"flush_interval = {flush}\n")
    t.name = name
    t.start()
    answers = []
    try:
        for n, step in enumerate(SCRIPT, 1):
            if step[0] == "wait":
                time.sleep(step[1])
                answers.append(f"{n}: wait {step[1]} s")
                continue
            answers.append(f"{n}: {' '.join(map(str, step))} -> {announce(port, step)}")
    finally:
        rc = t.stop()
    answers.append(f"exit code after SIGTERM: {rc}")
    table = site_rows.rows(db, QUERIES, HEADERS)
    site_rows.save(out, name, table, answers)
    return table, answers


def main():
    site_rows.main(__doc__.split("\n")[0], site, ("u3a", "shoal"),
                   "UNIT3D's tables (the test fixture's DDL)",
                   "KIND is u3a (UNIT3D-Announce) or shoal; repeat; the first is the "
                   "reference the others are diffed against",
                   "flush interval, seconds", "unit3d-rows-", fill, run_tracker, whole_lines=False)


if __name__ == "__main__":
    main()
