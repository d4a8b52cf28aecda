#!/usr/bin/env python3
"""Cross-checks the code point tables in src/vocab/unicode.c.

The tables are llama.cpp b1892's (its unicode.h), which match Python's
str.isdigit(), str.isalpha() and str.isspace() under Unicode 13.0. This script
parses the C tables and compares them with the local Python's unicodedata;
every difference is listed with the character's name, so a transcription
error shows up as a code point that was already assigned in Unicode 13.0.

Usage: scripts/check_unicode_tables.py [path/to/unicode.c]
Exit status 1 if a table is not sorted, overlaps itself or another table.
"""
import re
import sys
import unicodedata

TABLES = {
    "k_digit_ranges": str.isdigit,
    "k_letter_ranges": str.isalpha,
    "k_whitespace_ranges": str.isspace,
}


def parse_tables(source):
    tables = {}
    for name in TABLES:
        m = re.search(name + r"\[\]\s*=\s*\{(.*?)\n\};", source, re.S)
        if not m:
            sys.exit(f"table {name} not found")
        pairs = re.findall(r"\{\s*(0x[0-9A-Fa-f]+)\s*,\s*(0x[0-9A-Fa-f]+)\s*\}", m.group(1))
        tables[name] = [(int(a, 16), int(b, 16)) for a, b in pairs]
    return tables


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "src/vocab/unicode.c"
    with open(path, encoding="utf-8") as f:
        tables = parse_tables(f.read())

    ok = True
    owner = {}
    for name, ranges in tables.items():
        prev = -1
        for first, last in ranges:
            if first > last or first <= prev:
                print(f"{name}: range {first:#x}..{last:#x} is out of order")
                ok = False
            prev = last
            for cp in range(first, last + 1):
                if cp in owner:
                    print(f"{cp:#x} is in {owner[cp]} and {name}")
                    ok = False
                owner[cp] = name

    print(f"Python {sys.version.split()[0]}, Unicode {unicodedata.unidata_version}")
    for name, predicate in TABLES.items():
        members = {cp for first, last in tables[name] for cp in range(first, last + 1)}
        extra, missing = [], []
        for cp in range(0x110000):
            if 0xD800 <= cp <= 0xDFFF:
                continue
            in_python = predicate(chr(cp))
            if in_python and cp not in members:
                missing.append(cp)
            elif not in_python and cp in members:
                extra.append(cp)
        print(f"{name}: {len(members)} code points; "
              f"{len(missing)} only in Python, {len(extra)} only in the table")
        for label, cps in (("only in Python", missing), ("only in the table", extra)):
            for cp in cps:
                print(f"  {label}: U+{cp:04X} {unicodedata.name(chr(cp), '<unnamed>')}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
