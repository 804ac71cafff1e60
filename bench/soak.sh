#!/usr/bin/env bash
# Soak test: hours of load on loopback, bounded in time, with a report.
#   bench/soak.sh MINUTES [OUT_DIR]       # e.g. 30 (the issue's figure), 60 better; 1 to try it
#
# Starts a release shoal on 127.0.0.1 (UDP, HTTP, admin on free ports; no state file; short
# peer and torrent lifetimes so that swarms keep expiring), measures its capacity with one
# closed-loop shoal-bench UDP run (CAL_SECONDS), then drives it open-loop at LOAD_PERCENT
# of that for MINUTES, in back-to-back SEGMENT_SECONDS runs of shoal-bench udp. Churn: each
# segment has its own seed (new peer ids and ports: the previous segment's peers expire)
# and a different torrent count (10k, 20k, 40k in turn: the tail torrents come and go),
# and 2% of re-announces stop and rejoin another torrent.
#
# Every SAMPLE_SECONDS it samples shoal's RSS, CPU (user+system, % of one core), open
# file descriptors and threads from /proc; each segment gives announce latency (p50, p99,
# max), responses per second, timeouts and errors. Output in OUT_DIR (default
# target/soak-<date>): samples.csv, segments.csv, the segments' JSON, shoal.log,
# report.md with the RSS slope after warm-up (linear fit), fd growth and error totals, and
# soak.svg (RSS, fds, CPU and p99 over time). Exits 1 if shoal died, errors occurred or
# descriptors grew.
#
# Environment: LOAD_PERCENT (80), SEGMENT_SECONDS (30), SAMPLE_SECONDS (5), CAL_SECONDS
# (10), WARMUP_MINUTES (min(5, MINUTES/3): excluded from the RSS slope), BENCH_WORKERS (1),
# SHOAL_WORKERS (1), SHOAL_BIN / BENCH_BIN (default: cargo build --release).
# Loopback only; stops only the processes it started.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
    "" | *[!0-9]* | 0*) echo "usage: bench/soak.sh MINUTES [OUT_DIR]" >&2; exit 2 ;;
esac
minutes=$1
out="${2:-target/soak-$(date +%Y%m%d-%H%M%S)}"
load_percent="${LOAD_PERCENT:-80}"
segment="${SEGMENT_SECONDS:-30}"
sample="${SAMPLE_SECONDS:-5}"
cal="${CAL_SECONDS:-10}"
warmup_min="${WARMUP_MINUTES:-$(( minutes / 3 < 5 ? minutes / 3 : 5 ))}"
bench_workers="${BENCH_WORKERS:-1}"
shoal_workers="${SHOAL_WORKERS:-1}"
mkdir -p "$out"

if [ -z "${SHOAL_BIN:-}" ] || [ -z "${BENCH_BIN:-}" ]; then
    echo "==> cargo build --release -p shoal-server -p shoal-bench"
    cargo build --release -p shoal-server -p shoal-bench
fi
shoal_bin="${SHOAL_BIN:-target/release/shoal}"
bench_bin="${BENCH_BIN:-target/release/shoal-bench}"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
udp_port=$(free_port); http_port=$(free_port); admin_port=$(free_port)
cat >"$out/shoal.toml" <<EOF
workers = $shoal_workers
[udp]
listen = ["127.0.0.1:$udp_port"]
[http]
listen = ["127.0.0.1:$http_port"]
[store]
peer_ttl = 90
torrent_ttl = 90
clean_interval = 10
[state]
file = ""
[admin]
listen = ["127.0.0.1:$admin_port"]
EOF

"$shoal_bin" --config "$out/shoal.toml" >"$out/shoal.log" 2>&1 &
shoal_pid=$!
sampler_pid=""
cleanup() {
    [ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null || true
    kill "$shoal_pid" 2>/dev/null || true
    wait "$shoal_pid" 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 50); do
    curl -sf "http://127.0.0.1:$admin_port/metrics" >/dev/null 2>&1 && break
    sleep 0.1
done
kill -0 "$shoal_pid" || { echo "shoal did not start:"; cat "$out/shoal.log"; exit 1; }

bench() {  # bench JSON_FILE SECONDS SEED TORRENTS [--rate R]
    local json=$1 secs=$2 seed=$3 torrents=$4
    shift 4
    "$bench_bin" udp --target "127.0.0.1:$udp_port" --quiet --workers "$bench_workers" \
        --warmup 1s --duration "${secs}s" --seed "$seed" --torrents "$torrents" \
        --tracker-pid "$shoal_pid" --json "$json" "$@" >/dev/null
}
json_field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))$2)" "$1"; }

echo "==> capacity: closed loop for ${cal}s"
bench "$out/capacity.json" "$cal" 1 10000
capacity=$(json_field "$out/capacity.json" "['responses_per_second']")
rate=$(python3 -c "print(round($capacity * $load_percent / 100))")
echo "    ${capacity%.*} responses/s; soaking at $rate/s ($load_percent%) for $minutes min"

clock_ticks=$(getconf CLK_TCK)
start=$(date +%s.%N)
echo "t_s,rss_kib,cpu_percent,open_fds,threads" >"$out/samples.csv"
(
    prev_cpu=""; prev_t=""
    while kill -0 "$shoal_pid" 2>/dev/null; do
        now=$(date +%s.%N)
        rss=$(awk '/^VmRSS/ {print $2}' "/proc/$shoal_pid/status" 2>/dev/null || echo 0)
        threads=$(awk '/^Threads/ {print $2}' "/proc/$shoal_pid/status" 2>/dev/null || echo 0)
        fds=$(ls "/proc/$shoal_pid/fd" 2>/dev/null | wc -l)
        cpu=$(awk '{print $14 + $15}' "/proc/$shoal_pid/stat" 2>/dev/null || echo 0)
        pct=""
        if [ -n "$prev_cpu" ]; then
            pct=$(python3 -c "print(round(100 * ($cpu - $prev_cpu) / $clock_ticks / ($now - $prev_t), 1))")
        fi
        t=$(python3 -c "print(round($now - $start, 1))")
        echo "$t,$rss,$pct,$fds,$threads" >>"$out/samples.csv"
        prev_cpu=$cpu; prev_t=$now
        sleep "$sample"
    done
) &
sampler_pid=$!

echo "segment,start_s,end_s,torrents,seed" >"$out/segments.csv"
end=$(python3 -c "print($start + $minutes * 60)")
n=0
torrent_counts=(10000 20000 40000)
while :; do
    # The last segment is cut to the time left (at least 5 s, each has 1 s of warm-up).
    secs=$(python3 -c "print(min($segment, int($end - $(date +%s.%N)) - 1))")
    [ "$secs" -ge 5 ] || break
    n=$((n + 1))
    torrents=${torrent_counts[$(( (n - 1) % 3 ))]}
    seg_start=$(date +%s.%N)
    if ! bench "$out/segment-$n.json" "$secs" "$((1000 + n))" "$torrents" --rate "$rate"; then
        echo "    segment $n: shoal-bench failed" >&2
    fi
    seg_end=$(date +%s.%N)
    echo "$n,$(python3 -c "print(round($seg_start - $start, 1), round($seg_end - $start, 1), sep=',')"),$torrents,$((1000 + n))" >>"$out/segments.csv"
    kill -0 "$shoal_pid" 2>/dev/null || { echo "shoal died during segment $n" >&2; break; }
    printf '    %s/%s min\r' "$(python3 -c "print(round(($seg_end - $start) / 60, 1))")" "$minutes"
done
echo
alive=1
kill -0 "$shoal_pid" 2>/dev/null || alive=0
kill "$sampler_pid" 2>/dev/null || true
wait "$sampler_pid" 2>/dev/null || true
sampler_pid=""

python3 - "$out" "$minutes" "$warmup_min" "$rate" "$capacity" "$load_percent" "$alive" <<'PY'
import csv, json, os, sys
out, minutes, warmup_min, rate, capacity, pct, alive = sys.argv[1:]
warmup = float(warmup_min) * 60
samples = list(csv.DictReader(open(f"{out}/samples.csv")))
segments = list(csv.DictReader(open(f"{out}/segments.csv")))
seg_rows = []
for s in segments:
    path = f"{out}/segment-{s['segment']}.json"
    if not os.path.exists(path):
        continue
    r = json.load(open(path))
    op = r["ops"].get("announce") or {}
    errors = sum(r.get("errors", {}).values())
    seg_rows.append(dict(n=int(s["segment"]), start=float(s["start_s"]), end=float(s["end_s"]),
                         rps=r["responses_per_second"], p50=op.get("p50", 0), p99=op.get("p99", 0),
                         max=op.get("max", 0), errors=errors, error_kinds=r.get("errors", {})))
t = [float(s["t_s"]) for s in samples]
rss = [int(s["rss_kib"] or 0) / 1024 for s in samples]
fds = [int(s["open_fds"] or 0) for s in samples]
cpu = [float(s["cpu_percent"]) if s["cpu_percent"] else 0.0 for s in samples]

def slope(xs, ys):
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0

after = [(x, y) for x, y in zip(t, rss) if x >= warmup]
rss_slope = slope([x / 3600 for x, _ in after], [y for _, y in after]) if after else 0.0
fds_after = [f for x, f in zip(t, fds) if x >= warmup] or fds
fd_growth = (max(fds_after) - min(fds_after)) if fds_after else 0
total_errors = sum(s["errors"] for s in seg_rows)
ok = alive == "1" and total_errors == 0 and fd_growth <= 2
achieved = sorted(s["rps"] for s in seg_rows)
achieved = achieved[len(achieved) // 2] if achieved else 0.0
kept_up = achieved >= 0.95 * float(rate)

# The chart: four panels sharing the time axis, drawn as plain SVG polylines.
W, H, P = 900, 170, 60
panels = [("RSS (MiB)", t, rss), ("open fds", t, fds), ("CPU (% of a core)", t, cpu),
          ("announce p99 (ms)", [s["end"] for s in seg_rows], [s["p99"] / 1000 for s in seg_rows])]
xmax = max(t + [s["end"] for s in seg_rows] + [1])
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H * len(panels) + 40}" '
       'font-family="sans-serif" font-size="12">', '<rect width="100%" height="100%" fill="white"/>',
       f'<text x="{W/2}" y="20" text-anchor="middle" font-size="16">shoal soak: {minutes} min at '
       f'{rate}/s ({pct}% of capacity)</text>']
for i, (name, xs, ys) in enumerate(panels):
    top = 30 + i * H
    ymax = max(ys + [1e-9]) * 1.15
    svg.append(f'<rect x="{P}" y="{top + 10}" width="{W - P - 20}" height="{H - 40}" fill="none" stroke="#999"/>')
    svg.append(f'<text x="{P + 5}" y="{top + 24}">{name} (max {max(ys + [0]):.1f})</text>')
    svg.append(f'<text x="{P - 5}" y="{top + 14}" text-anchor="end">{ymax:.0f}</text>')
    svg.append(f'<text x="{P - 5}" y="{top + H - 30}" text-anchor="end">0</text>')
    if warmup > 0:
        wx = P + (W - P - 20) * min(warmup, xmax) / xmax
        svg.append(f'<line x1="{wx:.1f}" y1="{top + 10}" x2="{wx:.1f}" y2="{top + H - 30}" stroke="#ccc" stroke-dasharray="4 3"/>')
    pts = " ".join(f"{P + (W - P - 20) * x / xmax:.1f},{top + H - 30 - (H - 40) * y / ymax:.1f}"
                   for x, y in zip(xs, ys))
    svg.append(f'<polyline points="{pts}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
svg.append(f'<text x="{W/2}" y="{30 + len(panels) * H}" text-anchor="middle">seconds '
           f'(0 to {xmax:.0f}; dashed: end of warm-up)</text></svg>')
open(f"{out}/soak.svg", "w").write("\n".join(svg))

lines = [f"# Soak: {minutes} minutes at {pct}% of capacity", "",
         f"- shoal alive at the end: {'yes' if alive == '1' else '**no**'}",
         f"- capacity (closed loop): {float(capacity):.0f} responses/s; offered: {rate}/s open loop; "
         f"answered: {achieved:.0f}/s (median of the segments)"
         + ("" if kept_up else " — **below 95% of the offered rate: the machine or the load "
            "generator did not keep up, so this is not a soak at the intended load**"),
         f"- segments: {len(seg_rows)}; errors and timeouts: {total_errors}"
         + (" (" + "; ".join(
             f"segment {s['n']} at {s['start']:.0f}-{s['end']:.0f} s: "
             + ", ".join(f"{k} {v}" for k, v in s["error_kinds"].items() if v)
             for s in seg_rows if s["errors"]) + ")" if total_errors else ""),
         f"- RSS: {rss[0] if rss else 0:.1f} MiB at start, {max(rss + [0]):.1f} max, {rss[-1] if rss else 0:.1f} at the end; "
         f"slope after the {warmup_min}-minute warm-up: {rss_slope:+.2f} MiB/hour (least squares)",
         f"- open fds after warm-up: {min(fds_after) if fds_after else 0} to {max(fds_after) if fds_after else 0} (growth {fd_growth})",
         f"- CPU: mean {sum(cpu) / max(len(cpu), 1):.0f}% of one core",
         f"- verdict: {'PASS' if ok else '**FAIL**'} (alive, no error, fds flat)", "",
         "![soak](soak.svg)", "",
         "| segment | start (s) | responses/s | p50 (µs) | p99 (µs) | max (µs) | errors |",
         "|---:|---:|---:|---:|---:|---:|---:|"]
lines += [f"| {s['n']} | {s['start']:.0f} | {s['rps']:.0f} | {s['p50']:.0f} | {s['p99']:.0f} | {s['max']:.0f} | {s['errors']} |"
          for s in seg_rows]
lines += ["", "Samples (every few seconds: RSS, CPU, fds, threads) are in samples.csv; each "
          "segment's full result in segment-N.json."]
open(f"{out}/report.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines[:10]))
sys.exit(0 if ok else 1)
PY
