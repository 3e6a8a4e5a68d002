#!/usr/bin/env python3
"""gen-unicode-tables.py — generate host/text/unicode_data.c, the code point classes the
GPT-2 byte-level BPE pre-tokenizer needs (letter \\p{L}, number \\p{N}, White_Space).

    python3 scripts/gen-unicode-tables.py [UCD_DIR] > host/text/unicode_data.c

UCD_DIR defaults to /usr/share/unicode, where Debian's `unicode-data` package installs
UnicodeData.txt and PropList.txt. Classes:
  letter      general category Lu, Ll, Lt, Lm, Lo
  number      general category Nd, Nl, No
  whitespace  property White_Space (PropList.txt)
Every other code point (assigned or not) is "other". The output is a sorted list of
maximal ranges of equal class, leaving out the "other" ranges.
"""
import os
import sys

MAX_CP = 0x110000
LETTER, NUMBER, SPACE = 1, 2, 4


def read_unicode_data(path):
    """Yields (code point, general category) for every assigned code point."""
    first = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split(";")
            if len(fields) < 3:
                continue
            cp, name, cat = int(fields[0], 16), fields[1], fields[2]
            if name.endswith(", First>"):
                first = cp
                continue
            if name.endswith(", Last>"):
                assert first is not None
                for c in range(first, cp + 1):
                    yield c, cat
                first = None
                continue
            yield cp, cat


def read_white_space(path):
    out = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            rng, prop = [x.strip() for x in line.split(";")]
            if prop != "White_Space":
                continue
            if ".." in rng:
                a, b = (int(x, 16) for x in rng.split(".."))
            else:
                a = b = int(rng, 16)
            out.update(range(a, b + 1))
    return out


def main():
    ucd = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/unicode"
    cls = bytearray(MAX_CP)
    for cp, cat in read_unicode_data(os.path.join(ucd, "UnicodeData.txt")):
        if cat[0] == "L":
            cls[cp] = LETTER
        elif cat[0] == "N":
            cls[cp] = NUMBER
    for cp in read_white_space(os.path.join(ucd, "PropList.txt")):
        assert cls[cp] == 0, hex(cp)
        cls[cp] = SPACE

    version = "unknown"
    readme = os.path.join(ucd, "ReadMe.txt")
    if os.path.exists(readme):
        for line in open(readme, encoding="utf-8", errors="replace"):
            if "Version" in line and "of the Unicode Standard" in line:
                version = line.split("Version", 1)[1].split("of", 1)[0].strip()
                break

    ranges = []
    start = 0
    for cp in range(1, MAX_CP + 1):
        if cp == MAX_CP or cls[cp] != cls[start]:
            if cls[start]:
                ranges.append((start, cp - 1, cls[start]))
            start = cp

    names = {LETTER: "SJKH_UCD_LETTER", NUMBER: "SJKH_UCD_NUMBER", SPACE: "SJKH_UCD_SPACE"}
    w = sys.stdout.write
    w("/* unicode_data.c — GENERATED, do not edit. Regenerate with\n")
    w(" *   python3 scripts/gen-unicode-tables.py /usr/share/unicode > host/text/unicode_data.c\n")
    w(" * from Debian's unicode-data package (UnicodeData.txt, PropList.txt; Unicode %s).\n" % version)
    w(" * Maximal code point ranges of one class (letter = L*, number = N*, space =\n")
    w(" * White_Space), sorted; code points in no range are \"other\". */\n")
    w('#include "unicode.h"\n\n')
    w("const sjkh_ucd_range sjkh_ucd_ranges[] = {\n")
    for a, b, c in ranges:
        w("    {0x%05X, 0x%05X, %s},\n" % (a, b, names[c]))
    w("};\n\n")
    w("const size_t sjkh_ucd_n_ranges = sizeof sjkh_ucd_ranges / sizeof sjkh_ucd_ranges[0];\n")


if __name__ == "__main__":
    main()
