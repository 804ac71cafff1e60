#!/usr/bin/env bash
# shoal's opentracker surface against opentracker itself (issue 44):
#   tests/opentracker/run.sh     (SHOAL_BIN=path overrides target/release/shoal)
#
# Runs compare.py: both trackers get the same announces and scrapes, and the parsed fields
# of /stats?mode=everything and mode=tpbs&format=txt are compared; the exporter
# (exporter.py) reads shoal's /stats.
#
# opentracker is built from source as an IPv4 build (its own Makefile, no WANT_V6: Debian's
# package is built otherwise and answers IPv4 UDP in a form no load tester reads). The
# source is, in this order: OPENTRACKER_BIN (a binary already built), OPENTRACKER_SRC (a
# source tree), or Debian's source package (`apt-get source`, through a deb-src line in a
# private apt directory, so the machine's apt sources are left alone). The build needs
# libowfat-dev and zlib1g-dev, installed with apt-get where missing. The binary is kept in
# target/opentracker/ so a second run does not build it again.
#
# When opentracker cannot be had (no source package reachable, a failed build), the
# comparison is SKIPPED with the reason, and shoal's side (its counts against the
# workload's, the exporter) still runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
SHOAL_BIN=${SHOAL_BIN:-$TARGET/release/shoal}
[ -x "$SHOAL_BIN" ] || { echo "tests/opentracker/run.sh: no shoal binary at $SHOAL_BIN" >&2; exit 1; }
CACHE=$TARGET/opentracker
skip=""

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi

build_from() { # build_from SOURCE_DIR: the IPv4 build, into $CACHE/opentracker
    local src=$1 build
    if [ ! -e /usr/include/libowfat/io.h ] || [ ! -e /usr/include/zlib.h ]; then
        $sudo apt-get update >/dev/null 2>&1 || true
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends \
            libowfat-dev zlib1g-dev make >/dev/null 2>&1 || { skip="libowfat-dev could not be installed"; return 1; }
    fi
    build=$(mktemp -d /tmp/shoal-ot-build.XXXXXX)
    cp -a "$src"/. "$build"/
    if ! make -C "$build" opentracker LIBOWFAT_HEADERS=/usr/include/libowfat \
        LIBOWFAT_LIBRARY=/usr/lib >"$build/build.log" 2>&1; then
        skip="building opentracker failed (log: $build/build.log)"
        return 1
    fi
    mkdir -p "$CACHE"
    cp "$build/opentracker" "$CACHE/opentracker"
    rm -rf "$build"
}

debian_source() { # sets OT_SRC to the unpacked upstream tree of Debian's opentracker source package
    local apt codename dir
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ -n "$codename" ] || { skip="no Debian codename in /etc/os-release"; return 1; }
    apt=$(mktemp -d /tmp/shoal-ot-apt.XXXXXX)
    mkdir -p "$apt/lists/partial" "$apt/src"
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $codename main" >"$apt/sources.list"
    local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
        -o "Dir::State::Lists=$apt/lists")
    if ! apt-get "${opts[@]}" update >"$apt/update.log" 2>&1; then
        skip="apt-get update of a deb-src line failed (log: $apt/update.log)"
        return 1
    fi
    if ! (cd "$apt/src" && apt-get "${opts[@]}" source --download-only opentracker >"$apt/source.log" 2>&1); then
        skip="Debian's opentracker source package could not be downloaded: $(grep -m1 '^E:' "$apt/source.log" || echo "see $apt/source.log")"
        return 1
    fi
    (cd "$apt/src" && tar xf ./*.orig.tar.*) || { skip="the source tarball did not unpack"; return 1; }
    dir=$(find "$apt/src" -mindepth 2 -maxdepth 2 -name ot_stats.c -printf '%h\n' | head -1)
    [ -n "$dir" ] || { skip="no ot_stats.c in the source package"; return 1; }
    OT_SRC=$dir
}

OT_BIN=${OPENTRACKER_BIN:-}
if [ -z "$OT_BIN" ] && [ -x "$CACHE/opentracker" ]; then
    OT_BIN=$CACHE/opentracker
fi
if [ -z "$OT_BIN" ] && [ -n "${OPENTRACKER_SRC:-}" ]; then
    build_from "$OPENTRACKER_SRC" && OT_BIN=$CACHE/opentracker
fi
if [ -z "$OT_BIN" ] && [ -z "$skip" ]; then
    if debian_source; then
        build_from "$OT_SRC" && OT_BIN=$CACHE/opentracker
    fi
fi

if [ -n "$OT_BIN" ]; then
    echo "tests/opentracker/run.sh: opentracker: $OT_BIN"
    python3 tests/opentracker/compare.py "$SHOAL_BIN" "$OT_BIN"
else
    echo "tests/opentracker/run.sh: opentracker comparison SKIPPED: $skip"
    python3 tests/opentracker/compare.py "$SHOAL_BIN"
fi
