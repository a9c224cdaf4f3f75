"""wordchars.py: the fixed word-character ranges are Unicode 14's
letters (L*), numbers (N*) and "_", sorted and disjoint."""
from __future__ import annotations

import unicodedata

from lancetnic_flow.wordchars import RANGES, UNICODE_VERSION


def test_ranges_are_sorted_disjoint_and_half_open():
    assert all(a < b for a, b in RANGES)
    assert all(b1 <= a2 for (_, b1), (a2, _) in zip(RANGES, RANGES[1:]))


def test_ranges_hold_exactly_the_letters_numbers_and_underscore_of_their_unicode_version():
    inside = set()
    for a, b in RANGES:
        inside.update(range(a, b))
    if unicodedata.unidata_version != UNICODE_VERSION:
        # Another Python's Unicode: check the ASCII and Latin-1 planes, which do not change.
        limit = 0x250
    else:
        limit = 0x110000
    for cp in range(limit):
        word = unicodedata.category(chr(cp))[0] in "LN" or cp == 0x5F
        assert (cp in inside) == word, hex(cp)
