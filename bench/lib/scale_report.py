#!/usr/bin/env python3
"""The report of bench/opentracker-scale.sh: reads OUT's files (TAG-fill.json,
TAG-open.json, TAG-rss.txt, TAG-sigterm.txt, TAG-restart.json, TAG = TRACKER-TORRENTS-ROUND)
and prints markdown: each run's figures, then per size the median of each tracker's rounds
and each shoal build's ratios to the others, round by round. Usage: scale_report.py OUT."""
import glob
import json
import os
import re
import statistics
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def rss_mib(path):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("VmRSS"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def number(path):
    try:
        with open(path) as f:
            return float(f.read().strip())
    except (OSError, ValueError):
        return None


def log_line(path, pattern):
    """The first match of `pattern` (a regular expression with one group) in a log file."""
    try:
        with open(path, errors="replace") as f:
            m = re.search(pattern, f.read())
    except OSError:
        return None
    return m.group(1) if m else None


def fmt(v, spec="{:,.0f}"):
    return "-" if v is None else spec.format(v)


def runs(out):
    """{(torrents, tracker): {round: figures}}"""
    found = {}
    for path in glob.glob(os.path.join(out, "*-fill.json")):
        tag = os.path.basename(path)[: -len("-fill.json")]
        m = re.match(r"(.+)-(\d+)-(\d+)$", tag)
        if not m:
            continue
        tracker, torrents, rnd = m.group(1), int(m.group(2)), int(m.group(3))
        fill, open_ = load(path), load(os.path.join(out, f"{tag}-open.json"))
        restart = load(os.path.join(out, f"{tag}-restart.json")) or {}
        f = (fill or {}).get("fill") or {}
        ops = ((open_ or {}).get("ops") or {}).get("announce") or {}
        fig = {
            "fill_peers": f.get("answered"),
            "fill_rate": f.get("per_second"),
            "fill_per_cpu": f.get("responses_per_tracker_cpu_second"),
            "fill_rss": (f.get("tracker_rss_kib") or 0) / 1024 or None,
            "open_rate": (open_ or {}).get("responses_per_second"),
            "open_per_cpu": (open_ or {}).get("responses_per_tracker_cpu_second"),
            "p50": ops.get("p50"), "p99": ops.get("p99"), "p999": ops.get("p99.9"), "max": ops.get("max"),
            "valid": (open_ or {}).get("valid"),
            "behind": "; ".join(((open_ or {}).get("generator") or {}).get("behind") or []),
            "open_rss": rss_mib(os.path.join(out, f"{tag}-rss.txt")),
            "sigterm": number(os.path.join(out, f"{tag}-sigterm.txt")),
            "final": log_line(os.path.join(out, f"{tag}.log"), r"final snapshot written to \S+ in (\S+ \(\S+ of it syncing\)|\S+):"),
            "restored": log_line(os.path.join(out, f"{tag}-restart.log"),
                                 r"restored snapshot .*?: (\d+ torrents, \d+ peers)"),
            "first_answer": restart.get("first_answer_s"),
            "loaded": restart.get("loaded_s"),
            "restart_rss": (restart.get("rss_kib") or 0) / 1024 or None,
            "restart_exit": restart.get("exit_s"),
        }
        found.setdefault((torrents, tracker), {})[rnd] = fig
    return found


def main():
    out = sys.argv[1]
    found = runs(out)
    sizes = sorted({t for t, _ in found})
    print("# shoal, opentracker and aquatic_udp side by side (bench/opentracker-scale.sh)\n")
    try:
        with open(os.path.join(out, "trackers.txt")) as f:
            print("```\n" + f.read().strip() + "\n```\n")
    except OSError:
        pass
    print("Latencies in µs (announces of the open loop); memory in MiB (`VmRSS`); times in s. "
          "\"per CPU-s\": responses per tracker CPU-second. \"valid\": shoal-bench's verdict "
          "on its own sending (not valid: the generator, not the tracker, was behind).\n")
    for size in sizes:
        trackers = sorted(t for s, t in found if s == size)
        print(f"## {size:,} torrents\n")
        print("| tracker | round | fill: peers | answers/s | per CPU-s | MiB | open: answers/s | per CPU-s "
              "| p50 | p99 | p99.9 | max | valid | MiB | SIGTERM to exit | final snapshot | restart: first answer "
              "| loaded | what | exit |")
        print("|" + "---|" * 20)
        for t in trackers:
            for rnd, g in sorted(found[(size, t)].items()):
                print(f"| {t} | {rnd} | {fmt(g['fill_peers'])} | {fmt(g['fill_rate'])} | {fmt(g['fill_per_cpu'])} "
                      f"| {fmt(g['fill_rss'])} | {fmt(g['open_rate'])} | {fmt(g['open_per_cpu'])} | {fmt(g['p50'])} "
                      f"| {fmt(g['p99'])} | {fmt(g['p999'])} | {fmt(g['max'])} | {g['valid']} | {fmt(g['open_rss'])} "
                      f"| {fmt(g['sigterm'], '{:.2f}')} | {g['final'] or '-'} | {fmt(g['first_answer'], '{:.3f}')} "
                      f"| {fmt(g['loaded'], '{:.2f}')} | {g['restored'] or '-'} | {fmt(g['restart_exit'], '{:.2f}')} |")
        print()
        notes = [(t, r, g["behind"]) for t in trackers for r, g in sorted(found[(size, t)].items()) if g["behind"]]
        for t, r, why in notes:
            print(f"- {t}, round {r}: {why}")
        if notes:
            print()
        for me in [t for t in trackers if t.startswith("shoal")]:
            print(f"{me} against each, round by round (min / median / max of the rounds' ratios; "
                  "memory and p99.9: theirs over its, so above 1 is it ahead):\n")
            print("| against | fill per CPU-s | open per CPU-s | p99.9 | MiB after the open loop |")
            print("|---|---|---|---|---|")
            mine = found[(size, me)]
            for t in trackers:
                if t == me:
                    continue
                theirs = found[(size, t)]
                cells = []
                for key, inverse in (("fill_per_cpu", False), ("open_per_cpu", False), ("p999", True), ("open_rss", True)):
                    ratios = []
                    for rnd in sorted(set(mine) & set(theirs)):
                        a, b = mine[rnd][key], theirs[rnd][key]
                        if a and b:
                            ratios.append(b / a if inverse else a / b)
                    cells.append("-" if not ratios else
                                 f"{min(ratios):.2f} / **{statistics.median(ratios):.2f}** / {max(ratios):.2f}")
                print(f"| {t} | " + " | ".join(cells) + " |")
            print()

if __name__ == "__main__":
    main()
