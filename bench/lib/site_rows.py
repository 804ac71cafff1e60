"""What bench/unit3d/rows.py and bench/gazelle/rows.py share: the announce answers read
(a small bencode reader) and summarised, one GET on its own connection, the tables read
back into lines, each tracker's files written, the answers side by side in OUT/answers.md,
every tracker's rows diffed against the first's, and the script's command line and run.

Only the standard library.
"""

import argparse
import difflib
import http.client
import os
import shutil
import sys
import urllib.parse


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


def summarise(body, peers6_and_interval=False, raw=80):
    """An announce answer in one line: the failure reason, or the counts, how many peers
    and the warning; with `peers6_and_interval`, also how many IPv6 peers and whether an
    interval was given. An answer that is not bencode shows its first `raw` bytes."""
    try:
        d, _ = bdecode(body)
    except (ValueError, IndexError):
        return f"not bencode: {body[:raw]!r}"
    if not isinstance(d, dict):
        return f"not a dict: {body[:80]!r}"
    if b"failure reason" in d:
        return f"failure: {d[b'failure reason'].decode(errors='replace')}"
    peers = d.get(b"peers", b"")
    n = len(peers) // 6 if isinstance(peers, bytes) else len(peers)
    warn = d.get(b"warning message")
    more = ""
    if peers6_and_interval:
        n6 = len(d.get(b"peers6", b"")) // 18
        more = ((f" peers6={n6}" if n6 else "")
                + (" interval=ok" if isinstance(d.get(b"interval"), int) else " interval=missing"))
    return (f"complete={d.get(b'complete')} incomplete={d.get(b'incomplete')} "
            f"downloaded={d.get(b'downloaded')} peers={n}" + more
            + (f" warning: {warn.decode(errors='replace')}" if warn else ""))


def quote(v):
    return urllib.parse.quote_from_bytes(v if isinstance(v, bytes) else v.encode(), safe="")


def query(params):
    """`params` ((name, str or bytes), ...) as a query string, every value percent-encoded."""
    return "&".join(f"{k}={quote(v)}" for k, v in params)


def get(port, path, source="127.0.0.1", agent=None):
    """One GET to 127.0.0.1:port from `source` on its own connection (Ocelot closes every
    connection); (status, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10,
                                      source_address=(source, 0))
    try:
        conn.request("GET", path, headers={"User-Agent": agent} if agent else {})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def rows(db, queries, headers, sep=" "):
    """Each table of `queries` (name -> select) as a line `## name: <its headers>` and its
    rows, fields joined by `sep` (NULL for a null)."""
    out = []
    for table, q in queries.items():
        out.append(f"## {table}: {headers[table]}")
        for r in db.sql(q, rows=True):
            out.append(sep.join("NULL" if v is None else v for v in r))
    return out


def save(out, name, table, answers):
    """OUT/<name>.rows and OUT/<name>.answers."""
    with open(os.path.join(out, f"{name}.rows"), "w") as f:
        f.write("\n".join(table) + "\n")
    with open(os.path.join(out, f"{name}.answers"), "w") as f:
        f.write("\n".join(answers) + "\n")


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


def write_answers(out, results, whole_lines):
    """OUT/answers.md: a row per step (an answer line `N: step -> answer`), a column per
    tracker. A line without an answer (a wait, the exit) is shown whole where
    `whole_lines`, else left empty; `|` in an answer is escaped where `whole_lines` too."""
    with open(os.path.join(out, "answers.md"), "w") as f:
        f.write("| step | " + " | ".join(n for n, _, _ in results) + " |\n")
        f.write("|---" * (len(results) + 1) + "|\n")
        for i, first in enumerate(results[0][2]):
            step = first.split(" -> ")[0]
            if whole_lines:
                cells = [(a[i].split(" -> ", 1)[1] if " -> " in a[i] else a[i])
                         .replace("|", "\\|") if i < len(a) else "" for _, _, a in results]
            else:
                cells = [a[i].split(" -> ")[1] if " -> " in a[i] else "" for _, _, a in results]
            f.write(f"| {step} | " + " | ".join(cells) + " |\n")


def compare(out, results):
    """Every tracker's rows against the first's: OUT/<name>.diff and a line each; the
    exit status (1 where any differ)."""
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
    return 0 if same else 1


def main(description, site, kinds, ddl_help, tracker_help, flush_help, prefix, fill, run_tracker,
         whole_lines):
    """The script: `--out`, `--ddl`, `--tracker NAME=KIND:BINARY` (KIND one of `kinds`) and
    `--flush`; a MariaDB (`site.MariaDB`) filled by `fill(db, ddl)` and dumped, then each
    tracker on a fresh copy (`run_tracker(kind, name, binary, db, snapshot, work, out,
    flush)`: its (rows, answers), or (None, [why]) for one that did not start, which is
    skipped), the trackers' logs copied, answers.md written and the rows compared.
    Exits with `compare`'s status."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", required=True)
    p.add_argument("--ddl", required=True, help=ddl_help)
    p.add_argument("--tracker", action="append", required=True, metavar="NAME=KIND:BINARY",
                   help=tracker_help)
    p.add_argument("--flush", type=int, default=1, help=flush_help)
    args = p.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    work = site.tempdir(prefix)
    db = site.MariaDB(os.path.join(work, "db")).start()
    results = []
    try:
        fill(db, args.ddl)
        snapshot = os.path.join(work, "fresh.sql")
        db.dump_to(snapshot)
        for spec in args.tracker:
            name, rest = spec.split("=", 1)
            kind, binary = rest.split(":", 1)
            if kind not in kinds:
                sys.exit(f"{spec}: KIND is {' or '.join(kinds)}")
            table, answers = run_tracker(kind, name, binary, db, snapshot, work, out, args.flush)
            if table is None:
                print(f"== {name}: skipped, {answers[0]}")
                continue
            results.append((name, table, answers))
            print(f"== {name}: answers\n" + "\n".join(answers))
            print(f"== {name}: rows\n" + "\n".join(table))
    finally:
        db.stop()
        site.copy_logs(work, out)
        shutil.rmtree(work, ignore_errors=True)
    if not results:
        sys.exit("no tracker started")
    write_answers(out, results, whole_lines)
    sys.exit(compare(out, results))
