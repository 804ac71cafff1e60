"""The same scripted announces and control calls against Ocelot and against shoal
`--schema gazelle`, each on a fresh copy of the same Gazelle database (strict sql_mode),
and the rows each leaves in the tables an announce server writes, normalised and
compared. Run by bench/gazelle-rows.sh.

The script (SCRIPT below) is what a few members' clients and the site do: a seeder and a
leecher on an ordinary torrent (started, progress, completed, stopped), a freeleech, a
neutral-leech and a token torrent (the token loaded at start, and one spent mid-run: the
site's row then `add_token`), a protected member (`Visible = '0'`), a member whose
leeching is turned off (`update_user`), a deleted torrent with a reason, an info hash, a
passkey and a disabled member the site does not serve, a torrent without its
torrents_leech_stats row, `compact=0`, the client whitelist, a change of freeleech type,
the reports (with Gazelle's `trace_user` and `get=torrent`, which Ocelot 2.1.3 lacks), a
reload (SIGUSR1) after the site adds a torrent, an `ip=` parameter with an
IPv6 address (its colons not percent-encoded), and at the end a user agent longer than `xbt_files_users.useragent` (51)
followed by more announces. Each member's client announces from its own loopback address.
Between some steps the script waits longer than the write interval, so that speeds and
time spent are non-zero. After the last step each tracker gets SIGTERM (a second one if it
has not exited 10 s later, as Ocelot asks), then `users_leech_stats`,
`torrents_leech_stats`, `xbt_files_users`, `xbt_snatched`, `users_freeleeches` and
`torrents` are read back: ids, byte counts and flags as they are, times, speeds and time
spent only as zero / non-zero (or present / absent), peer ids in hex. The calls the
stand-in site received (token expiry) are listed with the rows.

Each tracker's rows go to OUT/<name>.rows, its answers to OUT/<name>.answers, its log to
OUT/<name>.log; every tracker after the first is diffed against the first
(OUT/<name>.diff), and the summary says which tables differ. A tracker that does not
start (a shoal without `--schema gazelle`) is reported and skipped.
"""

import hashlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import site_db as site  # noqa: E402
import site_rows  # noqa: E402
from site_rows import get, quote  # noqa: E402

SITE_PASSWORD = "S" * 16 + "s" * 16
REPORT_PASSWORD = "R" * 16 + "r" * 16

# Members, in id order from 1: (name, client peer-id prefix, Enabled, Visible).
MEMBERS = [
    ("alice", "-qB4650-", "1", "1"),
    ("bob", "-TR4050-", "1", "1"),
    ("carol", "-DE2110-", "1", "1"),
    ("dave", "-lt0D80-", "1", "1"),
    ("erin", "-qB4650-", "1", "0"),   # protected: her address is never stored
    ("frank", "-qB4650-", "2", "1"),  # disabled: not served
]
NAMES = [m[0] for m in MEMBERS]

# Torrents, in id order from 1: (name, FreeTorrent, has a torrents_leech_stats row).
TORRENTS = [
    ("plain", "0", True),
    ("free", "1", True),
    ("neutral", "2", True),
    ("token", "0", True),
    ("deleted", "0", True),
    ("nostats", "0", False),
    ("added", "0", True),      # inserted by the site mid-run, then SIGUSR1
]
TNAMES = [t[0] for t in TORRENTS]
AGENT = "qBittorrent/4.6.5"
LONG_AGENT = ("Mozilla/5.0 (X11; Linux x86_64) libtorrent/2.0.10 "
              "qBittorrent/4.6.5 enhanced edition build 20240101")


def passkey(member):
    return hashlib.md5(member.encode()).hexdigest()


def info_hash(torrent):
    return hashlib.sha1(f"gazelle-rows {torrent}".encode()).digest()


def peer_id(member, client=0):
    prefix = MEMBERS[NAMES.index(member)][1].encode() if member in NAMES else b"-XX0000-"
    return prefix + f"{member[:5]}{client:07d}".encode()[:12].ljust(12, b"0")


def member_ip(member):
    return f"127.0.0.{10 + NAMES.index(member)}" if member in NAMES else "127.0.0.9"


def A(member, client, torrent, event, up, down, left, **extra):  # noqa: N802
    """An announce step; `extra` may carry agent=, compact=, ip=, passkey=, hash=."""
    return ("announce", member, client, torrent, event, up, down, left, extra)


SCRIPT = [
    A("alice", 0, "plain", "started", 0, 0, 0),
    A("bob", 0, "plain", "started", 0, 0, 1_000_000),
    A("carol", 0, "token", "started", 0, 0, 2_000_000),
    A("alice", 0, "token", "started", 0, 0, 0),
    A("erin", 0, "free", "started", 0, 0, 1_000_000),
    A("alice", 0, "free", "started", 0, 0, 0),
    A("dave", 0, "neutral", "started", 0, 0, 1_000_000),
    A("alice", 0, "neutral", "started", 0, 0, 0),
    ("wait", 3),
    A("bob", 0, "plain", "", 0, 400_000, 600_000),
    A("alice", 0, "plain", "", 400_000, 0, 0),
    A("carol", 0, "token", "", 0, 1_000_000, 1_000_000),
    A("alice", 0, "token", "", 1_000_000, 0, 0),
    A("erin", 0, "free", "", 0, 500_000, 500_000),
    A("alice", 0, "free", "", 500_000, 0, 0),
    A("dave", 0, "neutral", "", 100_000, 500_000, 500_000),
    A("alice", 0, "neutral", "", 500_000, 0, 0),
    ("wait", 2),
    A("carol", 0, "token", "completed", 0, 2_000_000, 0),
    A("bob", 0, "plain", "completed", 0, 1_000_000, 0),
    A("erin", 0, "free", "completed", 0, 1_000_000, 0),
    ("update", "update_user", {"passkey": passkey("dave"), "can_leech": "0", "visible": "1"}),
    A("dave", 0, "neutral", "", 100_000, 600_000, 400_000),
    ("update", "delete_torrent", {"id": "5", "info_hash": info_hash("deleted"), "reason": "0"}),
    A("alice", 0, "deleted", "started", 0, 0, 0),
    A("alice", 0, "unknown", "started", 0, 0, 0),
    A("nobody", 0, "plain", "started", 0, 0, 0, passkey=passkey("nobody")),
    A("frank", 0, "plain", "started", 0, 0, 0),
    A("alice", 0, "nostats", "started", 0, 0, 0),
    A("alice", 0, "plain", "", 400_000, 0, 0, compact="0"),
    ("update", "add_whitelist", {"peer_id": "-qB"}),
    A("bob", 0, "plain", "", 0, 1_000_000, 0),
    A("alice", 0, "plain", "", 450_000, 0, 0),
    ("update", "remove_whitelist", {"peer_id": "-qB"}),
    ("update", "update_torrent", {"info_hash": info_hash("plain"), "freetorrent": "2"}),
    A("alice", 0, "plain", "", 550_000, 0, 0),
    A("bob", 0, "plain", "", 100_000, 1_000_000, 0),
    ("site", "insert into users_freeleeches (UserID, TorrentID, Uses, Time) "
             "values (2, 4, 1, now())"),
    ("update", "add_token", {"info_hash": info_hash("token"), "userid": "2"}),
    A("bob", 0, "token", "started", 0, 0, 2_000_000),
    ("wait", 2),
    A("bob", 0, "token", "", 0, 300_000, 1_700_000),
    ("report", "get=stats"),
    ("report", f"get=user&key={passkey('dave')}"),
    ("report", f"get=user&key={passkey('nobody')}"),
    ("update", "trace_user", {"passkey": passkey("bob"), "trace": "1"}),
    ("report", "get=torrent&info_hash=" + quote(info_hash("plain"))),
    ("site", "insert into torrents_group (ID, CategoryID, Name, Year, WikiBody, WikiImage) "
             "values (7, 1, 'Album 7', 2024, '', ''); "
             "insert into torrents (ID, GroupID, UserID, Media, Format, Encoding, info_hash, "
             "FileCount, FileList, FilePath, Size) values (7, 7, 1, 'WEB', 'FLAC', "
             f"'Lossless', UNHEX('{info_hash('added').hex()}'), 1, 'f.flac', 'Album 7', "
             "1000); insert into torrents_leech_stats (TorrentID) values (7)"),
    ("reload",),
    ("wait", 2),
    A("alice", 0, "added", "started", 0, 0, 0),
    A("bob", 0, "plain", "stopped", 100_000, 1_000_000, 0),
    A("alice", 0, "free", "stopped", 1_000_000, 0, 0),
    A("alice", 1, "plain", "started", 0, 0, 0, ip="2001:db8::5"),
    ("wait", 3),
    A("erin", 1, "plain", "started", 0, 0, 1_000_000, agent=LONG_AGENT),
    ("wait", 2),
    A("bob", 0, "token", "", 0, 700_000, 1_300_000),
    A("alice", 0, "token", "", 1_800_000, 0, 0),
    ("wait", 3),
]


def fill(db, ddl):
    db.load_ddl(ddl)
    for i, (name, _, enabled, visible) in enumerate(MEMBERS, 1):
        site.insert_users(db, [passkey(name)], first=i, enabled=enabled, visible=visible)
    hashes = [info_hash(t).hex() for t in TNAMES[:-1]]
    site.insert_torrents(
        db, hashes, uploader=1,
        free={i: t[1] for i, t in enumerate(TORRENTS) if t[1] != "0"},
        without_stats={i for i, t in enumerate(TORRENTS) if not t[2]})
    # carol spent a token on "token" before the switch: the site's row, not expired.
    db.sql("insert into users_freeleeches (UserID, TorrentID, Uses, Time) "
           "values (3, 4, 1, now())")


def announce(port, step):
    _, member, client, torrent, event, up, down, left, extra = step
    q = [("info_hash", extra.get("hash", info_hash(torrent))),
         ("peer_id", peer_id(member, client)),
         ("port", str(50000 + (NAMES.index(member) if member in NAMES else 9) * 10 + client)),
         ("uploaded", str(up)), ("downloaded", str(down)), ("left", str(left)),
         ("compact", extra.get("compact", "1")), ("numwant", "50")]
    if event:
        q.append(("event", event))
    query = site_rows.query(q)
    if "ip" in extra:
        # As sent, ':' not percent-encoded (allowed in a query): Ocelot keeps parameters
        # percent-encoded, and "2001%3Adb8%3A%3A5" (17 characters) would not fit
        # xbt_files_users.ip (15) and stall its peer writes as the long agent does below.
        query += f"&ip={extra['ip']}"
    key = extra.get("passkey", passkey(member))
    status, body = get(port, f"/{key}/announce?{query}", member_ip(member) if member in NAMES
                       else "127.0.0.9", extra.get("agent", AGENT))
    return f"{status} {site_rows.summarise(body, peers6_and_interval=True, raw=120)}"


def control(port, action, params):
    query = "&".join([f"action={action}"] + [f"{k}={quote(v)}" for k, v in params.items()])
    status, body = get(port, f"/{SITE_PASSWORD}/update?{query}")
    return f"{status} {body[:200].decode(errors='replace').strip()}"


def report(port, query):
    status, body = get(port, f"/{REPORT_PASSWORD}/report?{query}")
    text = body.decode(errors="replace").strip()
    if query == "get=stats":
        # Figures vary with time: only whether the site's two keys are there.
        return (f"{status} announce interval: {'announce interval' in text}, "
                f"announce jitter: {'announce jitter' in text}")
    return f"{status} {text[:200]}"


def describe(step):
    if step[0] == "announce":
        _, member, client, torrent, event, up, down, left, extra = step
        more = " ".join(f"{k}={v if k != 'agent' else len(v)}" for k, v in extra.items()
                        if k != "passkey")
        return (f"{member}#{client} {torrent} {event or '-'} up={up} down={down} "
                f"left={left}{' ' + more if more else ''}")
    if step[0] == "update":
        return f"update {step[1]} " + " ".join(
            f"{k}={v.hex() if isinstance(v, bytes) else v}" for k, v in step[2].items())
    if step[0] == "site":
        return f"site: {step[1][:60]}..."
    return " ".join(map(str, step))


QUERIES = {
    "users_leech_stats": "select UserID, Uploaded, Downloaded from users_leech_stats "
                         "order by UserID",
    "torrents_leech_stats": "select TorrentID, Seeders, Leechers, Snatched, Balance, "
                            "last_action is not null from torrents_leech_stats "
                            "order by TorrentID",
    "xbt_files_users": "select uid, fid, hex(peer_id), active, announced, completed, "
                       "uploaded, downloaded, remaining, corrupt, upspeed > 0, "
                       "downspeed > 0, timespent > 0, useragent, connectable, ip, "
                       "mtime > 0 from xbt_files_users order by uid, fid, hex(peer_id)",
    "xbt_snatched": "select uid, fid, IP, tstamp > 0, seedtime from xbt_snatched "
                    "order by uid, fid, IP",
    "users_freeleeches": "select UserID, TorrentID, Expired, Downloaded, Uses, "
                         "Time is not null from users_freeleeches order by UserID, TorrentID",
    "torrents": "select ID, hex(info_hash), FreeTorrent from torrents order by ID",
}

HEADERS = {
    "users_leech_stats": "user uploaded downloaded",
    "torrents_leech_stats": "torrent seeders leechers snatched balance last_action?",
    "xbt_files_users": "uid fid peer_id active announced completed uploaded downloaded "
                       "remaining corrupt upspeed>0 downspeed>0 timespent>0 useragent "
                       "connectable ip mtime>0",
    "xbt_snatched": "uid fid ip tstamp>0 seedtime",
    "users_freeleeches": "user torrent expired downloaded uses time?",
    "torrents": "id info_hash freetorrent",
}


def rows(db, calls):
    out = site_rows.rows(db, QUERIES, HEADERS, sep=" | ")
    out.append("## site calls: path")
    for c in calls:
        out.append(c.replace(SITE_PASSWORD, "<site password>"))
    return out


def make_tracker(kind, name, binary, db, port, site_port, work, flush):
    wd = os.path.join(work, name)
    if kind == "ocelot":
        t = site.Ocelot(binary, wd, db, port, SITE_PASSWORD, REPORT_PASSWORD,
                        site_port=site_port, conf={"schedule_interval": flush})
    else:
        t = site.Shoal(binary, wd, db, port, SITE_PASSWORD, REPORT_PASSWORD,
                       site_port=site_port, gazelle=f"schedule_interval = {flush}\n")
    t.name = name
    return t


def run_step(t, db, step):
    kind = step[0]
    if kind == "wait":
        time.sleep(step[1])
        return f"wait {step[1]} s"
    if kind == "announce":
        return announce(t.port, step)
    if kind == "update":
        return control(t.port, step[1], step[2])
    if kind == "report":
        return report(t.port, step[1])
    if kind == "site":
        db.sql(step[1])
        return "done"
    if kind == "reload":
        t.reload()
        return "SIGUSR1 sent"
    raise ValueError(f"unknown step {step!r}")


def run_tracker(kind, name, binary, db, snapshot, work, out, flush):
    db.restore(snapshot)
    stand_in = site.StandInSite(db, SITE_PASSWORD).start()
    t = make_tracker(kind, name, binary, db, site.free_low_port(), stand_in.port, work, flush)
    answers = []
    try:
        try:
            t.start()
        except RuntimeError as e:
            return None, [f"did not start: {e}"]
        for n, step in enumerate(SCRIPT, 1):
            answers.append(f"{n}: {describe(step)} -> {run_step(t, db, step)}")
    finally:
        rc = t.stop()
        stand_in.stop()
    answers.append(f"exit code {rc} after {t.sigterms} SIGTERM(s)")
    table = rows(db, stand_in.calls)
    site_rows.save(out, name, table, answers)
    return table, answers


def main():
    site_rows.main(__doc__.split("\n")[0], site, ("ocelot", "shoal"),
                   "Gazelle's tables (the test fixture's DDL)",
                   "KIND is ocelot or shoal; repeat; the first that starts is the "
                   "reference the others are diffed against",
                   "write interval, seconds (Ocelot's schedule_interval)", "gazelle-rows-", fill,
                   run_tracker, whole_lines=True)


if __name__ == "__main__":
    main()
