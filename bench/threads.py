#!/usr/bin/env python3
"""Sums bench/ws-16core.sh's OUT/threads.log: for each tracker process (one per round, in
the order they ran), its threads' CPU and how often they went to sleep (voluntary context
switches: a worker with nothing to do parks until a socket or another worker wakes it)
and were put off a CPU (nonvoluntary), per second of its busiest stretch.

    bench/threads.py OUT/threads.log.gz

Lines: `time pid tid name utime stime cpu voluntary nonvoluntary` (ticks of 1/100 s,
cumulative switch counts), one per thread per second. The stretch measured runs from the
first sample after the process used half a CPU or more to the last such sample, so that
start-up and the idle end of a round are left out.
"""

import gzip
import sys
from collections import defaultdict

TICK = 100.0


def main(path):
    samples = defaultdict(lambda: defaultdict(list))  # pid -> tid -> [(t, name, cpu, v, nv)]
    opener = gzip.open if path.endswith(".gz") else open
    for line in opener(path, "rt"):
        f = line.split()
        if len(f) < 9:
            continue
        t, pid, tid, name = float(f[0]), f[1], f[2], f[3]
        ticks = int(f[4]) + int(f[5])
        samples[pid][tid].append((t, name, ticks, int(f[7]), int(f[8])))
    print("| start (s) | pid | threads | busy s | CPU | voluntary switches/s | nonvoluntary/s |"
          " busiest threads: name CPU% vol/s |")
    print("|---|---|---|---|---|---|---|---|")
    first = min((s[0][0] for p in samples.values() for s in p.values()), default=0)
    for pid, threads in sorted(samples.items(), key=lambda kv: min(s[0][0] for s in kv[1].values())):
        times = sorted({s[0] for th in threads.values() for s in th})
        # Process CPU per sample interval, to find its busy stretch.
        per_time = defaultdict(int)
        for th in threads.values():
            for s in th:
                per_time[s[0]] += s[2]
        busy = [b for a, b in zip(times, times[1:])
                if (per_time[b] - per_time[a]) / TICK / (b - a) >= 0.5]
        if len(busy) < 2:
            continue
        t0, t1 = busy[0], busy[-1]
        rows = []
        for th in threads.values():
            within = [s for s in th if t0 <= s[0] <= t1]
            if len(within) < 2:
                continue
            a, b = within[0], within[-1]
            span = b[0] - a[0]
            rows.append((b[1], (b[2] - a[2]) / TICK / span, (b[3] - a[3]) / span,
                         (b[4] - a[4]) / span))
        cpu = sum(r[1] for r in rows)
        vol = sum(r[2] for r in rows)
        nv = sum(r[3] for r in rows)
        top = sorted(rows, key=lambda r: -r[1])[:6]
        tops = ", ".join(f"{n} {100 * c:.0f}% {v:,.0f}" for n, c, v, _ in top)
        print(f"| {t0 - first:.0f} | {pid} | {len(rows)} | {t1 - t0:.0f} | {100 * cpu:.0f}% |"
              f" {vol:,.0f} | {nv:,.0f} | {tops} |")


if __name__ == "__main__":
    main(sys.argv[1])
