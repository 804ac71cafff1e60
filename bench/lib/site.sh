# Sourced (from the repository root) by the scripts that run shoal against a site's own
# announce server: unit3d.sh and gazelle.sh (speed), unit3d-rows.sh and gazelle-rows.sh
# (rows). What they share; each script's header says what it runs and reads.

# site_db SITE: DDL (default tests/fixtures/SITE.sql) must exist (exit 2 if not);
# mariadb-server is installed when missing.
site_db() {
    DDL=${DDL:-tests/fixtures/$1.sql}
    command -v mariadbd > /dev/null || apt-get install -y --no-install-recommends mariadb-server
    [ -f "$DDL" ] || { echo "no DDL at $DDL (set DDL)" >&2; exit 2; }
}

# speed_args OUT: the array `args` with what bench/SITE/speed.py takes from both scripts'
# environment (BENCH_BIN, which must exist, ROUNDS, DURATION, WARMUP, CONNECTIONS,
# SHOAL_COMMIT, SHOAL_BIN).
speed_args() {
    BENCH_BIN=${BENCH_BIN:-target/release/shoal-bench}
    [ -x "$BENCH_BIN" ] || { echo "no shoal-bench at $BENCH_BIN (cargo build --release -p shoal-bench)" >&2; exit 2; }
    args=(--out "$1" --ddl "$DDL" --bench "$BENCH_BIN" --rounds "${ROUNDS:-7}"
          --duration "${DURATION:-20s}" --warmup "${WARMUP:-5s}"
          --connections "${CONNECTIONS:-128}" --commit "${SHOAL_COMMIT:-$(git rev-parse --short HEAD)}")
    [ -z "${SHOAL_BIN:-}" ] || args+=(--shoal "$SHOAL_BIN")
}

# rows_trackers VAR NAME KIND: the array `t` of bench/SITE/rows.py's --tracker arguments:
# NAME (of KIND, the binary in the variable named VAR) first where VAR is set, then shoal
# (SHOAL_BIN); with only one of the two, that one again as NAME-again (or shoal-again).
# Neither set: exit 2.
rows_trackers() {
    local var=$1 name=$2 kind=$3 bin=${!1:-}
    t=()
    [ -z "$bin" ] || t+=(--tracker "$name=$kind:$bin")
    [ -z "${SHOAL_BIN:-}" ] || t+=(--tracker "shoal=shoal:$SHOAL_BIN")
    case ${#t[@]} in
        0) echo "set $var, SHOAL_BIN or both" >&2; exit 2 ;;
        2) if [ -n "$bin" ]; then t+=(--tracker "$name-again=$kind:$bin");
           else t+=(--tracker "shoal-again=shoal:$SHOAL_BIN"); fi ;;
    esac
}
