#!/usr/bin/env bash
# House rule: no Rust source file passes 600 lines before its test module.
#   tests/house/file_lengths.sh
#
# A file that long is usually two ideas (the house rules in docs/architecture.md); split it by job. Counted: the lines
# before the first `#[cfg(test)]` at the start of a line (the unit-test module), or the whole
# file where there is none. Scanned: crates/*/src, crates/*/benches, crates/*/examples and
# fuzz/fuzz_targets, all the way down. Not scanned: test code (any `tests/` directory, and
# files named tests.rs or *_tests.rs).
#
# A file may stay longer if one of its first 5 lines is a line comment that says why, with
# the words "longer than 600 lines because", e.g.
#   // This file is longer than 600 lines because ...
#
# Prints every offender with its count and exits 1; prints a one-line summary and exits 0
# when there is none.
set -euo pipefail
cd "$(dirname "$0")/../.."

limit=600
reason='^[[:space:]]*//.*longer than 600 lines because'

roots=()
for dir in crates/*/src crates/*/benches crates/*/examples fuzz/fuzz_targets; do
    [ -d "$dir" ] && roots+=("$dir")
done

checked=0
offenders=0
while IFS= read -r -d '' file; do
    checked=$((checked + 1))
    # Lines before the test module: one less than the line it starts on.
    lines=$(awk '/^#\[cfg\(test\)\]/ { print NR - 1; found = 1; exit }
                 END { if (!found) print NR }' "$file")
    if [ "$lines" -le "$limit" ]; then
        continue
    fi
    if head -n 5 "$file" | grep -Eqi "$reason"; then
        continue
    fi
    echo "$file: $lines lines before its tests (limit $limit; split it by job, or say in its first 5 lines why it is \"longer than $limit lines because\" ...)"
    offenders=$((offenders + 1))
done < <(find "${roots[@]}" -name '*.rs' -type f \
    -not -path '*/tests/*' -not -name 'tests.rs' -not -name '*_tests.rs' -print0 | sort -z)

if [ "$offenders" -gt 0 ]; then
    echo "file_lengths: $offenders of $checked files over $limit lines" >&2
    exit 1
fi
echo "file_lengths: $checked files, none over $limit lines"
