#!/usr/bin/env bash
# Writes the training corpus for our default model: the King James Bible
# (public domain), from Debian's bible-kjv package, one verse per line
# without the verse reference, split deterministically into
#   DIR/kjv-train.txt   every verse except each 50th  (30 480 verses)
#   DIR/kjv-valid.txt   verses 50, 100, 150, ...      (622 verses)
# The files are generated, never committed.
#
#   scripts/make-corpus.sh DIR
set -euo pipefail
export LC_ALL=C

if [ $# -ne 1 ]; then
  echo "usage: $0 OUTPUT_DIR" >&2
  exit 2
fi
out=$1
if ! command -v bible >/dev/null 2>&1; then
  echo "$0: the 'bible' command is missing: apt-get install bible-kjv" >&2
  exit 1
fi
mkdir -p "$out"

# -f turns pretty-printing off: one line per verse, "Ge1:1 In the beginning ...".
# The range Gen1:1-Rev22:21 is the whole text.
all=$(mktemp)
trap 'rm -f "$all"' EXIT
bible -f Gen1:1-Rev22:21 | sed -E 's/^[^ ]+ //' > "$all"

verses=$(wc -l < "$all")
if [ "$verses" -ne 31102 ]; then
  echo "$0: expected 31102 verses from bible-kjv, got $verses" >&2
  exit 1
fi
awk -v train="$out/kjv-train.txt" -v valid="$out/kjv-valid.txt" \
  '{ if (NR % 50 == 0) print > valid; else print > train }' "$all"

for f in "$out/kjv-train.txt" "$out/kjv-valid.txt"; do
  printf '%s: %d lines, %d bytes\n' "$f" "$(wc -l < "$f")" "$(wc -c < "$f")"
done
