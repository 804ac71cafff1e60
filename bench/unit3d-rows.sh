#!/usr/bin/env bash
# The rows UNIT3D-Announce and shoal `--schema unit3d` leave in a UNIT3D site's tables after
# the same scripted announces, each on a fresh copy of the same database (MariaDB started
# here, UNIT3D's tables from the test fixture's DDL): see bench/unit3d/rows.py for the
# script and what is compared.
#
#   U3A_BIN=/work/u3a/target/release/unit3d-announce SHOAL_BIN=target/release/shoal \
#     bench/unit3d-rows.sh /tmp/unit3d-rows
#
# The first tracker given is the reference: UNIT3D-Announce when U3A_BIN is set. With only
# one of the two, that one runs twice (a check that nothing in the normalised rows varies
# from run to run). OUT/<name>.rows, .answers and .diff, OUT/answers.md (each step's answer
# from each tracker). Exits 1 when the rows differ.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/unit3d-rows}
DDL=${DDL:-tests/fixtures/unit3d.sql}
command -v mariadbd > /dev/null || apt-get install -y --no-install-recommends mariadb-server
[ -f "$DDL" ] || { echo "no DDL at $DDL (set DDL)" >&2; exit 2; }
t=()
[ -z "${U3A_BIN:-}" ] || t+=(--tracker "unit3d-announce=u3a:$U3A_BIN")
[ -z "${SHOAL_BIN:-}" ] || t+=(--tracker "shoal=shoal:$SHOAL_BIN")
case ${#t[@]} in
    0) echo "set U3A_BIN, SHOAL_BIN or both" >&2; exit 2 ;;
    2) if [ -n "${U3A_BIN:-}" ]; then t+=(--tracker "unit3d-announce-again=u3a:$U3A_BIN");
       else t+=(--tracker "shoal-again=shoal:$SHOAL_BIN"); fi ;;
esac
exec python3 bench/unit3d/rows.py --out "$OUT" --ddl "$DDL" "${t[@]}"
