"""Which texts the features can read: the rule behind the ``empty_text`` skip.

A row is ``empty_text`` when the analyzer the run uses would read no term
from its text, so the rule follows the feature options (:func:`text_rule`)
and travels to the readers as ``Columns.text_rule``, a short string that
is also part of the cache key (its default, the word analyzer's, keeps the
keys of entries made before it). The rules, as scikit-learn's analyzers
read text:

* ``word``: a token, two word characters in a row (Unicode letters and
  numbers, and "_": ``features/tokenize.py``'s rule, ``MIN_CHARS`` 2);
* ``chars N`` (``--analyzer char``, n-grams from N characters): at least N
  characters once each run of whitespace is one space;
* ``visible`` (``char_wb``, a ``--tokenizer`` of the user's, and ``auto``
  before it is decided): one character that is not whitespace. ``char_wb``
  gives every word at least itself padded with spaces; a tokenizer is the
  user's code, so any text that is not blank is handed to it (one that
  returns no token gives a row without features, as a word seen in no
  training row does), never run twice a row.

A text of whitespace alone is ``empty_text`` under every rule, although
scikit-learn's ``char`` analyzer reads it as the one n-gram " ": that term
says nothing about the row. A rule may end with the Unicode normalisation
the features apply first (``word nfkc``): "ﬁ" reads as the token "fi".
Lower-casing changes no character into another kind, nor their number.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ..wordchars import RANGES

WORD = "word"
# Two word characters in a row, as the tokenizer knows them: its fixed ranges
# (wordchars.py, Unicode 14), not RE2's \pL\pN, whose newer Unicode
# called rows of later letters (U+31350) usable that gave no token. RE2 stops
# at the first match, so a normal text costs a few bytes.
_WORD_CHARS = "".join(f"\\x{{{lo:X}}}-\\x{{{hi - 1:X}}}" for lo, hi in RANGES)
_TOKEN_RE = f"[{_WORD_CHARS}][{_WORD_CHARS}]"
# Python's str.isspace (what scikit-learn's "\s" and str.split() read as whitespace, and the
# char kernels' _is_space): RE2's "\s" is ASCII only.
_SPACE = r"\t-\r\x{1C}-\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}"
_VISIBLE_RE = rf"[^{_SPACE}]"


def text_rule(features) -> str:
    """The rule for the analyzer ``features`` computes (a ``FeatureConfig`` or
    ``FittedFeatures``: ``analyzer``, ``ngram_min``, ``tokenizer``, ``normalize``).
    An analyzer not yet decided (``auto`` before its sample) reads the widest
    rule, ``visible``, so the sample it decides from holds every row that
    some analyzer could read."""
    analyzer = getattr(features, "analyzer", WORD) or WORD
    known = getattr(features, "known_analyzer", None)
    if callable(known):
        analyzer = known()
    if getattr(features, "tokenizer", None) or analyzer is None or analyzer == "char_wb":
        kind = "visible"
    elif analyzer == "char":
        kind = f"chars {int(getattr(features, 'ngram_min', 1) or 1)}"
    else:
        kind = WORD
    normalize = getattr(features, "normalize", "none") or "none"
    return kind if normalize == "none" else f"{kind} {normalize}"


def usable(texts: pa.Array, rule: str = WORD) -> pa.Array:
    """Which of ``texts`` (strings, no nulls) the analyzer of ``rule`` reads a term from."""
    kind, least, normalize = _parts(rule)
    if normalize != "none":
        texts = pc.utf8_normalize(texts, normalize.upper())   # as features/tokenize.prepare reads the text
    if kind == WORD:
        return pc.match_substring_regex(texts, _TOKEN_RE)
    visible = pc.match_substring_regex(texts, _VISIBLE_RE)
    if least <= 1:
        return visible
    collapsed = pc.replace_substring_regex(texts, rf"[{_SPACE}]{{2,}}", " ")   # scikit-learn's \s\s+ → " "
    return pc.and_(visible, pc.greater_equal(pc.utf8_length(collapsed), least))


def _parts(rule: str) -> tuple[str, int, str]:
    """``rule`` as (kind, the fewest characters, the normalisation)."""
    words = rule.split()
    least = int(words.pop(1)) if words[0] == "chars" else 1
    return words[0], least, words[1] if len(words) > 1 else "none"


__all__ = ["WORD", "text_rule", "usable"]
