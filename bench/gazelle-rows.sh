#!/usr/bin/env bash
# The rows Ocelot and shoal `--schema gazelle` leave in a Gazelle site's tables after the
# same scripted announces and control calls, each on a fresh copy of the same database
# (MariaDB started here in Gazelle's strict sql_mode, Gazelle's tables from the test
# fixture's DDL): see bench/gazelle/rows.py for the script and what is compared, and
# bench/gazelle/README.md for building Ocelot.
#
#   OCELOT_BIN=/tmp/ocelot-build/build/ocelot SHOAL_BIN=target/release/shoal \
#     bench/gazelle-rows.sh /tmp/gazelle-rows
#
# The first tracker that starts is the reference: Ocelot when OCELOT_BIN is set. A shoal
# that does not start (one without `--schema gazelle`) is reported and skipped. With only
# one of the two, that one runs twice (a check that nothing in the normalised rows varies
# from run to run). OUT/<name>.rows, .answers, .log and .diff, OUT/answers.md (each step's
# answer from each tracker). Exits 1 when the rows differ.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/gazelle-rows}
. bench/lib/site.sh
site_db gazelle
rows_trackers OCELOT_BIN ocelot ocelot
exec python3 bench/gazelle/rows.py --out "$OUT" --ddl "$DDL" "${t[@]}"
