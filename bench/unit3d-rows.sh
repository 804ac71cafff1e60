#!/usr/bin/env bash
# The rows UNIT3D-Announce and shoal `--schema unit3d` leave in a UNIT3D site's tables after
# the same scripted announces, each on a fresh copy of the same database (MariaDB started
# here, UNIT3D's tables from the test fixture's DDL): see bench/unit3d/rows.py for the
# script and what is compared.
#
#   U3A_BIN=/work/u3a/target-031/release/unit3d-announce SHOAL_BIN=target/release/shoal \
#     bench/unit3d-rows.sh /tmp/unit3d-rows
#
# (UNIT3D-Announce v0.3.1 built from its source; docs/unit3d.md has the last run.) The first
# tracker given is the reference: UNIT3D-Announce when U3A_BIN is set. With only
# one of the two, that one runs twice (a check that nothing in the normalised rows varies
# from run to run). OUT/<name>.rows, .answers and .diff, OUT/answers.md (each step's answer
# from each tracker). Exits 1 when the rows differ.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/unit3d-rows}
. bench/lib/site.sh
site_db unit3d
rows_trackers U3A_BIN unit3d-announce u3a
exec python3 bench/unit3d/rows.py --out "$OUT" --ddl "$DDL" "${t[@]}"
