#!/usr/bin/env python3
"""An opentracker exporter for Prometheus, written to opentracker's published /stats format.

    python3 tests/opentracker/exporter.py http://HOST:PORT [STATS_PATH]

Reads `STATS_PATH?mode=everything` (default /stats), the XML document opentracker's
`ot_stats.c` writes, and prints the figures in Prometheus' text format, under the metric
names the community opentracker exporters use (`tracker_torrents`, `tracker_peers`,
`tracker_connections{protocol,type}`, ...). No registry carries an opentracker exporter, so
this one stands in for them in tests/opentracker/run.sh: it reads every field those
exporters read, by XPath, and fails loudly on a missing one, which is what an exporter
pointed at a tracker that only looks like opentracker would do.
"""

import sys
import urllib.request
import xml.etree.ElementTree as ET


def number(root, path):
    node = root.find(path)
    if node is None or node.text is None:
        raise SystemExit(f"exporter: /stats?mode=everything has no {path}")
    return int(node.text)


def scrape(base, stats_path="/stats"):
    """The metrics, as (name, labels, value) triples."""
    with urllib.request.urlopen(f"{base}{stats_path}?mode=everything", timeout=10) as r:
        root = ET.fromstring(r.read())
    if root.tag != "stats":
        raise SystemExit(f"exporter: the document's root is <{root.tag}>, not <stats>")
    out = [
        ("tracker_uptime", {}, number(root, "uptime")),
        ("tracker_torrents", {}, number(root, "torrents/count_mutex")),
        ("tracker_peers", {}, number(root, "peers/count")),
        ("tracker_seeds", {}, number(root, "seeds/count")),
        ("tracker_completed", {}, number(root, "completed/count")),
        ("tracker_connections_livesync", {}, number(root, "connections/livesync/count")),
        ("tracker_mutex_stall", {}, number(root, "debug/mutex_stall/count")),
    ]
    for proto, types in (
        ("tcp", ("accept", "announce", "scrape")),
        ("udp", ("overall", "connect", "announce", "scrape", "missmatch")),
    ):
        for t in types:
            out.append(("tracker_connections", {"protocol": proto, "type": t},
                        number(root, f"connections/{proto}/{t}")))
    for node in root.findall("debug/renew/count"):
        out.append(("tracker_renew_count", {"interval": node.get("interval")}, int(node.text)))
    for node in root.findall("debug/http_error/count"):
        out.append(("tracker_http_error", {"code": node.get("code")}, int(node.text)))
    return out


def prometheus_text(metrics):
    lines = []
    for name, labels, value in metrics:
        if labels:
            inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
            lines.append(f"{name}{{{inner}}} {value}")
        else:
            lines.append(f"{name} {value}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    sys.stdout.write(prometheus_text(scrape(*sys.argv[1:])))
