"""How much of a block of bytes is UTF-8: its multi-byte UTF-8 characters, told
apart by how often text in a single-byte encoding makes their shape by chance,
and the bytes past ASCII outside them.

A UTF-8 character past ASCII is a lead byte (C2-F4) and one to three
continuation bytes (80-BF). Read in latin-1 or cp1252, a lead byte is a
letter (``Ã``, ``é``) and a continuation byte a symbol or punctuation mark
(``©``, ``…``), so genuine text in those encodings makes the shape only where
a letter stands right before such marks. Upper-case accented letters before
punctuation (``CAFÉ…``, ``Gruß…``) do that now and then: the *weak* shapes.
``Â`` or ``Ã`` before a mark, and a letter before two or three of them, which
is the shape of every accented Latin letter (``é``) and of every character
past U+07FF (``’``, CJK), real text almost never makes: the *strong* ones.
Counted with numpy a window at a time: no Python object per byte, and no
temporary larger than a few windows, whatever the block's size.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Bytes judged at a time: a few boolean arrays of this size live at once.
WINDOW = 1 << 22


@dataclass(frozen=True)
class Utf8Shapes:
    """``strong`` and ``weak``: the block's multi-byte UTF-8 characters of each kind
    (see the module's docstring); ``strays``: its bytes past ASCII in none of them."""

    strong: int = 0
    weak: int = 0
    strays: int = 0

    @property
    def characters(self) -> int:
        return self.strong + self.weak

    def __add__(self, other: "Utf8Shapes") -> "Utf8Shapes":
        """Both blocks' counts together (bytes judged apart: no character across them)."""
        return Utf8Shapes(self.strong + other.strong, self.weak + other.weak, self.strays + other.strays)


def utf8_shapes(data) -> Utf8Shapes:
    """The UTF-8 characters and stray bytes past ASCII of ``data`` (bytes, or any buffer)."""
    raw = np.frombuffer(data, np.uint8)
    if not raw.size:
        return Utf8Shapes()
    strong = weak = inside = high = 0
    for start in range(0, raw.size, WINDOW):
        lead = raw[start:start + WINDOW]
        past_ascii = int(np.count_nonzero(lead >= 0x80))
        if not past_ascii:   # most windows of most files: nothing more to look at
            continue
        high += past_ascii
        after = np.zeros(lead.size + 3, np.uint8)   # past the block's end: no continuation byte
        tail = raw[start + 1:start + WINDOW + 3]
        after[:tail.size] = tail
        cont = (after & 0xC0) == 0x80
        c1, c2, c3 = cont[:lead.size], cont[1:lead.size + 1], cont[2:lead.size + 2]
        second = after[:lead.size]
        # The second byte's narrower range after E0, ED, F0 and F4 (no overlong form, surrogate or past U+10FFFF).
        narrow = (((lead == 0xE0) & (second < 0xA0)) | ((lead == 0xED) & (second > 0x9F))
                  | ((lead == 0xF0) & (second < 0x90)) | ((lead == 0xF4) & (second > 0x8F)))
        two = (lead >= 0xC2) & (lead <= 0xDF) & c1
        three = (lead >= 0xE0) & (lead <= 0xEF) & c1 & c2 & ~narrow
        four = (lead >= 0xF0) & (lead <= 0xF4) & c1 & c2 & c3 & ~narrow
        n2, n3, n4 = (int(np.count_nonzero(x)) for x in (two, three, four))
        latin = int(np.count_nonzero(two & (lead <= 0xC3)))   # Â or Ã before a mark: U+0080-U+00FF
        strong += latin + n3 + n4
        weak += n2 - latin
        inside += 2 * n2 + 3 * n3 + 4 * n4
    return Utf8Shapes(strong, weak, high - inside)
