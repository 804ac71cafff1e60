#!/bin/sh
# Writes the build context of deploy/container/Containerfile into CONTEXT:
#   deploy/container/rootfs.sh BINARY CONTEXT
# rootfs/usr/bin/shoal (BINARY), rootfs/etc/shoal/shoal.toml (BINARY --print-config, with
# the state in /var/lib/shoal and the admin listener on 0.0.0.0:6970), state/ (empty, the
# image's /var/lib/shoal). A static binary (musl) needs nothing else; a dynamically linked
# one (glibc) gets the libraries `ldd` lists, at the same paths, so either runs FROM scratch.
set -eu
bin=$1
ctx=$2
rm -rf "$ctx"
mkdir -p "$ctx/rootfs/usr/bin" "$ctx/rootfs/etc/shoal" "$ctx/state"
cp "$bin" "$ctx/rootfs/usr/bin/shoal"
# The release profile keeps line tables for profiling; the image does not need them.
strip "$ctx/rootfs/usr/bin/shoal" 2>/dev/null || true
"$bin" --print-config | sed \
    -e 's|^file = "shoal.state"$|file = "/var/lib/shoal/shoal.state"|' \
    -e 's|^listen = \["127.0.0.1:6970"\]$|listen = ["0.0.0.0:6970"]|' \
    > "$ctx/rootfs/etc/shoal/shoal.toml"
for line in 'file = "/var/lib/shoal/shoal.state"' 'listen = ["0.0.0.0:6970"]'; do
    grep -qxF "$line" "$ctx/rootfs/etc/shoal/shoal.toml" || {
        echo "rootfs.sh: --print-config changed: no line $line" >&2
        exit 1
    }
done
if ldd "$bin" >/dev/null 2>&1; then
    for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do
        mkdir -p "$ctx/rootfs$(dirname "$lib")"
        cp -L "$lib" "$ctx/rootfs$lib"
    done
fi
