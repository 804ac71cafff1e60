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

import argparse
import difflib
import http.client
import os
import shutil
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import site_db as site  # noqa: E402

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


def bdecode(b, i=0):
    """A small bencode reader for the answers (dicts, lists, ints, strings)."""
    c = b[i:i + 1]
    if c == b"i":
        j = b.index(b"e", i)
        return int(b[i + 1:j]), j + 1
    if c in (b"l", b"d"):
        i += 1
        items = []
        while b[i:i + 1] != b"e":
            v, i = bdecode(b, i)
            items.append(v)
        if c == b"l":
            return items, i + 1
        return dict(zip(items[::2], items[1::2])), i + 1
    j = b.index(b":", i)
    n = int(b[i:j])
    return b[j + 1:j + 1 + n], j + 1 + n


def summarise(body):
    try:
        d, _ = bdecode(body)
    except (ValueError, IndexError):
        return f"not bencode: {body[:80]!r}"
    if not isinstance(d, dict):
        return f"not a dict: {body[:80]!r}"
    if b"failure reason" in d:
        return f"failure: {d[b'failure reason'].decode(errors='replace')}"
    peers = d.get(b"peers", b"")
    n = len(peers) // 6 if isinstance(peers, bytes) else len(peers)
    warn = d.get(b"warning message")
    return (f"complete={d.get(b'complete')} incomplete={d.get(b'incomplete')} "
            f"downloaded={d.get(b'downloaded')} peers={n}"
            + (f" warning: {warn.decode(errors='replace')}" if warn else ""))


def announce(port, step):
    member, client, torrent, event, up, down, left = step
    q = [("info_hash", info_hash(torrent)), ("peer_id", peer_id(member, client)),
         ("port", str(50000 + MEMBERS.index(member) * 10 + client)), ("uploaded", str(up)),
         ("downloaded", str(down)), ("left", str(left)), ("compact", "1"),
         ("numwant", "50")]
    if event:
        q.append(("event", event))
    query = "&".join(f"{k}={urllib.parse.quote_from_bytes(v if isinstance(v, bytes) else v.encode())}"
                     for k, v in q)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", f"/announce/{passkey(member)}?{query}",
                     headers={"User-Agent": AGENT})
        r = conn.getresponse()
        return f"{r.status} {summarise(r.read())}"
    finally:
        conn.close()


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


def rows(db):
    out = []
    for table, q in QUERIES.items():
        out.append(f"## {table}: {HEADERS[table]}")
        for r in db.sql(q, rows=True):
            out.append(" ".join("NULL" if v is None else v for v in r))
    return out


def run_tracker(name, kind, binary, db, snapshot, ddl, work, out, flush):
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
    table = rows(db)
    with open(os.path.join(out, f"{name}.rows"), "w") as f:
        f.write("\n".join(table) + "\n")
    with open(os.path.join(out, f"{name}.answers"), "w") as f:
        f.write("\n".join(answers) + "\n")
    return table, answers


def by_table(lines):
    """Table name -> its rows, from the lines `rows` wrote."""
    out, current = {}, None
    for line in lines:
        if line.startswith("## "):
            current = line[3:].split(":")[0]
            out[current] = []
        else:
            out[current].append(line)
    return out


def changed_tables(a, b):
    ta, tb = by_table(a), by_table(b)
    return [t for t in ta if ta[t] != tb.get(t)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--ddl", required=True, help="UNIT3D's tables (the test fixture's DDL)")
    p.add_argument("--tracker", action="append", required=True, metavar="NAME=KIND:BINARY",
                   help="KIND is u3a (UNIT3D-Announce) or shoal; repeat; the first is the "
                        "reference the others are diffed against")
    p.add_argument("--flush", type=int, default=1, help="flush interval, seconds")
    args = p.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    work = site.tempdir("unit3d-rows-")
    db = site.MariaDB(os.path.join(work, "db")).start()
    results = []
    try:
        fill(db, args.ddl)
        snapshot = os.path.join(work, "fresh.sql")
        db.dump_to(snapshot)
        for spec in args.tracker:
            name, rest = spec.split("=", 1)
            kind, binary = rest.split(":", 1)
            if kind not in ("u3a", "shoal"):
                sys.exit(f"{spec}: KIND is u3a or shoal")
            table, answers = run_tracker(name, kind, binary, db, snapshot, args.ddl, work,
                                         out, args.flush)
            results.append((name, table, answers))
            print(f"== {name}: answers\n" + "\n".join(answers))
            print(f"== {name}: rows\n" + "\n".join(table))
    finally:
        db.stop()
        for name in os.listdir(work):
            log = os.path.join(work, name, "tracker.log")
            if os.path.exists(log):
                shutil.copy(log, os.path.join(out, f"{name}.log"))
        shutil.rmtree(work, ignore_errors=True)
    with open(os.path.join(out, "answers.md"), "w") as f:
        f.write("| step | " + " | ".join(n for n, _, _ in results) + " |\n")
        f.write("|---" * (len(results) + 1) + "|\n")
        for i, first in enumerate(results[0][2]):
            step = first.split(" -> ")[0]
            cells = [a[i].split(" -> ")[1] if " -> " in a[i] else "" for _, _, a in results]
            f.write(f"| {step} | " + " | ".join(cells) + " |\n")
    ref_name, ref, _ = results[0]
    same = True
    for name, table, _ in results[1:]:
        diff = list(difflib.unified_diff(ref, table, ref_name, name, lineterm="", n=1))
        with open(os.path.join(out, f"{name}.diff"), "w") as f:
            f.write("\n".join(diff) + "\n")
        if diff:
            same = False
            print(f"== {name} differs from {ref_name} in: "
                  f"{', '.join(changed_tables(ref, table))}")
            print("\n".join(diff))
        else:
            print(f"== {name}: the same rows as {ref_name}")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
