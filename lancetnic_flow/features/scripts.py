"""How much of a text sample is in scripts whose words a word analyzer cannot match.

Three kinds of script, one symptom: a word token is seldom the word, or
seldom seen again in the same form, so words learn little and character
n-grams read the text well.

* Written without separators between words (Chinese, Japanese, Thai, Lao,
  Khmer, Myanmar, Tibetan): the word analyzer reads a whole clause as one
  token, seen once.
* Written with spaces, but with each word's particles and endings joined to
  it (Korean's Hangul: 서버를, 서버의, 서버에서 are three tokens of one
  word). On real Korean text words lost 5.7 points to character n-grams
  (docs/benchmarks.md).
* Written with spaces, but with vowel signs and viramas that are combining
  marks (the Brahmic scripts of South Asia: Hindi, Bengali, Tamil, …). The
  word pattern is scikit-learn's, letters and digits, so it cuts each word
  at its marks: ``किताब`` gives no token at all and ``नमस्ते`` gives
  ``नमस``. Character n-grams of each word keep the marks.

:func:`char_script_share` measures, on a sample of the corpus, the share of
word characters (Unicode letters and digits, :mod:`lancetnic_flow.wordchars`) in those
scripts; ``--analyzer auto`` turns to character n-grams when it is at least
``resolve.CHAR_SCRIPT_SHARE``. Vectorised over the sample's code points: no
Python object per character.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from ..wordchars import RANGES

# Half-open code point ranges of scripts written without word separators.
SPACELESS = (
    (0x0E00, 0x0E80),   # Thai
    (0x0E80, 0x0F00),   # Lao
    (0x0F00, 0x1000),   # Tibetan
    (0x1000, 0x10A0),   # Myanmar
    (0x1780, 0x1800),   # Khmer
    (0x19E0, 0x1A00),   # Khmer symbols
    (0x3040, 0x30A0),   # Hiragana
    (0x30A0, 0x3100),   # Katakana
    (0x3100, 0x3130),   # Bopomofo
    (0x31A0, 0x31C0),   # Bopomofo extended
    (0x31F0, 0x3200),   # Katakana phonetic extensions
    (0x3400, 0x4DC0),   # CJK unified ideographs, extension A
    (0x4E00, 0xA000),   # CJK unified ideographs
    (0xF900, 0xFB00),   # CJK compatibility ideographs
    (0xFF66, 0xFFA0),   # half-width katakana
    (0x20000, 0x32000),  # CJK unified ideographs, extensions B–H
)
# Hangul: words separated by spaces, particles and endings joined to them.
JOINED = (
    (0x1100, 0x1200),   # Hangul jamo
    (0x3130, 0x3190),   # Hangul compatibility jamo
    (0xA960, 0xA980),   # Hangul jamo extended A
    (0xAC00, 0xD7B0),   # Hangul syllables
    (0xD7B0, 0xD800),   # Hangul jamo extended B
    (0xFFA0, 0xFFE0),   # half-width Hangul
)
# Brahmic scripts of South Asia: words separated by spaces, their vowel signs and
# viramas combining marks, which the word pattern stops at.
MARKED = (
    (0x0900, 0x0980),   # Devanagari
    (0x0980, 0x0A00),   # Bengali
    (0x0A00, 0x0A80),   # Gurmukhi
    (0x0A80, 0x0B00),   # Gujarati
    (0x0B00, 0x0B80),   # Oriya
    (0x0B80, 0x0C00),   # Tamil
    (0x0C00, 0x0C80),   # Telugu
    (0x0C80, 0x0D00),   # Kannada
    (0x0D00, 0x0D80),   # Malayalam
    (0x0D80, 0x0E00),   # Sinhala
    (0xA8E0, 0xA900),   # Devanagari extended
)
CHAR_SCRIPTS = tuple(sorted(SPACELESS + JOINED + MARKED))

_WORD = np.array(RANGES, dtype=np.int64)
_ASCII_WORD = np.array([any(lo <= c < hi for lo, hi in RANGES) for c in range(128)])
_CHAR_SCRIPTS = np.array(CHAR_SCRIPTS, dtype=np.int64)


def _in_ranges(points: np.ndarray, ranges: np.ndarray) -> np.ndarray:
    """Which of ``points`` fall in the sorted, disjoint half-open ``ranges``."""
    i = np.searchsorted(ranges[:, 0], points, side="right") - 1
    ok = i >= 0
    ok[ok] = points[ok] < ranges[i[ok], 1]
    return ok


def char_script_share(texts: Iterable[str]) -> tuple[float, int]:
    """The share of the word characters of ``texts`` in scripts whose words a
    word analyzer cannot match (:data:`CHAR_SCRIPTS`), and how many word
    characters were looked at (0: no letters)."""
    joined = "\n".join(t for t in texts if t)
    if not joined:
        return 0.0, 0
    points = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
    ascii_ = points < 128
    n_ascii = int(_ASCII_WORD[points[ascii_]].sum())   # most text: a table look-up, no search
    rest = points[~ascii_].astype(np.int64)
    rest = rest[_in_ranges(rest, _WORD)]
    n = n_ascii + len(rest)
    if not n:
        return 0.0, 0
    return float(_in_ranges(rest, _CHAR_SCRIPTS).sum()) / n, n


# Python's str.isspace past ASCII (what str.split() splits words at), as the kernels read it.
_SPACES = np.array([0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000], np.int64)


def _marks(points: np.ndarray) -> np.ndarray:
    """Which of ``points`` (past ASCII) are combining marks (Unicode categories Mn, Mc, Me)."""
    import unicodedata

    kinds, where = np.unique(points, return_inverse=True)
    mark = np.array([unicodedata.category(chr(int(p))).startswith("M") for p in kinds], bool)
    return mark[where] if len(kinds) else np.zeros(0, bool)


def cut_word_share(texts: Iterable[str]) -> tuple[float, int]:
    """The share of the whitespace-separated words of ``texts`` that hold a combining
    mark between two word characters, where the word pattern (letters and digits)
    cuts the word: text written decomposed (NFD: ``résumé`` is read as ``re`` and
    ``sume``), vocalised Arabic or Hebrew. And how many words were looked at."""
    joined = "\n".join(t for t in texts if t)
    if not joined:
        return 0.0, 0
    points = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    high = points >= 128
    space = np.zeros(len(points), bool)
    low = points[~high]
    space[~high] = ((low >= 0x09) & (low <= 0x0D)) | ((low >= 0x1C) & (low <= 0x20))
    space[high] = np.isin(points[high], _SPACES)
    word = np.zeros(len(points), bool)
    word[~high] = _ASCII_WORD[low]
    word[high] = _in_ranges(points[high], _WORD)
    mark = np.zeros(len(points), bool)
    mark[high] = _marks(points[high])
    starts = ~space & np.concatenate([[True], space[:-1]])
    words = int(starts.sum())
    if not words:
        return 0.0, 0
    ids = np.cumsum(starts) - 1
    # marks between two word characters: those at a word's end (Arabic's tanween) drop, cutting nothing
    kept = np.flatnonzero(~mark)
    after, before = kept[1:], kept[:-1]
    cut = before[(after - before > 1) & word[before] & word[after]]
    return len(np.unique(ids[cut])) / words, words


def vowel_marked(texts: Iterable[str]) -> float:
    """The share of the words of ``texts`` cut at combining marks that composing (NFC)
    does not join to a letter: vowel marks written into the words, as vocalised Arabic
    or Hebrew has them, not accents written decomposed (which NFC joins)."""
    import unicodedata

    return cut_word_share(unicodedata.normalize("NFC", t) for t in texts if t)[0]
