#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each, from the seed corpora kept in the repo:
#   fuzz/run.sh SECONDS            # e.g. 10 in CI, 600 by hand
#   fuzz/run.sh SECONDS TARGET...  # only these targets
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). When either is
# missing it says so and fails, unless SHOAL_SKIP_FUZZ=1 is set: then it exits 0 (for a CI
# whose toolchain cannot fuzz).
#
# Each target reads fuzz/corpus/<target> (the seeds, never written) and writes what it
# finds into a scratch corpus under fuzz/target/run-corpus/<target>, kept between runs so a
# long run goes on from the last. To keep new inputs in the repo, minimise them first:
#   cargo +nightly fuzz cmin <target> fuzz/target/run-corpus/<target>
# A crash stops that target (its input is in fuzz/artifacts/<target>/); the others still
# run; the script fails at the end. The summary gives each target's executions and
# executions per second (libFuzzer's own counts), and is written to
# fuzz/target/run-summary.md.
set -euo pipefail
cd "$(dirname "$0")"

seconds="${1:-}"
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: fuzz/run.sh SECONDS [TARGET...]" >&2
    exit 2
fi
shift

missing=""
cargo +nightly --version >/dev/null 2>&1 || missing="the nightly toolchain (rustup toolchain install nightly)"
if [ -z "$missing" ] && ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    missing="cargo-fuzz (cargo install cargo-fuzz)"
fi
if [ -n "$missing" ]; then
    if [ "${SHOAL_SKIP_FUZZ:-}" = 1 ]; then
        echo "fuzz/run.sh: SKIPPED (SHOAL_SKIP_FUZZ=1): $missing is not installed"
        exit 0
    fi
    echo "fuzz/run.sh: $missing is not installed (set SHOAL_SKIP_FUZZ=1 to skip)" >&2
    exit 1
fi

if [ $# -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo +nightly fuzz list)
fi

echo "==> building ${#targets[@]} fuzz targets"
cargo +nightly fuzz build >/dev/null

summary=target/run-summary.md
mkdir -p target
{
    echo "| target | seconds | executions | exec/s | result |"
    echo "|---|---:|---:|---:|---|"
} >"$summary"
failed=0
for t in "${targets[@]}"; do
    seeds="corpus/$t"
    work="target/run-corpus/$t"
    mkdir -p "$seeds" "$work"
    log="target/run-$t.log"
    echo "==> $t for ${seconds}s (seeds: $(find "$seeds" -type f | wc -l))"
    result=ok
    # -timeout: one input taking over 10 s counts as a hang; -rss_limit_mb: a leak fails.
    if ! cargo +nightly fuzz run "$t" "$work" "$seeds" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        >"$log" 2>&1; then
        result="FAILED (see fuzz/$log and fuzz/artifacts/$t/)"
        failed=1
    fi
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    echo "| $t | $seconds | ${runs:-?} | ${rate:-?} | $result |" >>"$summary"
    echo "    ${runs:-?} executions, ${rate:-?}/s: $result"
done
echo
cat "$summary"
exit "$failed"
