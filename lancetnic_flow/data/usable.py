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
* ``visible`` (``char_wb``, and ``auto`` before it is decided): one
  character that is not whitespace. ``char_wb`` gives every word at least
  itself padded with spaces;
* ``tokens SPEC`` (a ``--tokenizer`` of the user's): the word rule, read
  from the tokens the registered tokenizer ``SPEC`` returns for a text not
  blank, handed as the features hand it (normalised, cased): a text it
  returns no token for, or only stop words, or fewer than MIN, is
  ``empty_text``, as the built-in tokenizer's would be. The token lists
  read here travel with the rows kept (:func:`usable_tokens`, the reader's
  ``TOKENS_COLUMN``) and the features read them (``features/tokenize.py:
  texts_of``): the tokenizer runs once a row a pass, for the rule and the
  terms. The rule pickles with the function a script registered
  (:class:`~lancetnic_flow.tokenizers.CarriesTokenizer`), so a worker reads by it.

The word rule also follows what the analyzer drops or needs: with stop words
a text must hold a token that is not one (``the the and of`` gives no term),
and with ``--ngram-range MIN,MAX`` from MIN ≥ 2, MIN tokens (one word gives
no pair), as scikit-learn's word analyzer reads them: stop words out first,
then n-grams. Those options travel in the rule after a line end, as JSON
(``word\n{"least": 2, ...}``); a word rule without them is unchanged (a
tokenizer's always has them: its tokens may depend on the text's case).

A text of whitespace alone is ``empty_text`` under every rule, although
scikit-learn's ``char`` analyzer reads it as the one n-gram " ": that term
says nothing about the row. A rule may end with the Unicode normalisation
the features apply first (``word nfkc``): "ﬁ" reads as the token "fi".
Lower-casing changes no character into another kind, nor their number.
"""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..stop_words import ENGLISH
from ..textcase import PER_CHARACTER, lower
from ..tokenizers import CarriesTokenizer, tokens_of
from ..wordchars import RANGES

WORD = "word"
TOKENS = "tokens"   # a tokenizer of the user's: "tokens SPEC [normalisation]", then its options as JSON
# The column of a reader's table that holds the token lists of the rule's tokenizer, and the
# key of its field's metadata that says how they were made. No input column reads as it.
TOKENS_COLUMN = ":tokens"
MADE_BY = b"made_by"
# Texts handed to a tokenizer of the user's at once: its token lists for a few MiB of text.
PIECE_ROWS = 8192
# Two word characters in a row, as the tokenizer knows them: its fixed ranges
# (wordchars.py, Unicode 14), not RE2's \pL\pN, whose newer Unicode
# called rows of later letters (U+31350) usable that gave no token. RE2 stops
# at the first match, so a normal text costs a few bytes.
_WORD_CHARS = "".join(f"\\x{{{lo:X}}}-\\x{{{hi - 1:X}}}" for lo, hi in RANGES)
_TOKEN_RE = f"[{_WORD_CHARS}][{_WORD_CHARS}]"
_NOT_WORD_RE = f"[^{_WORD_CHARS}]+"
MIN_CHARS = 2   # a token's fewest word characters: features/tokenize.py's MIN_CHARS
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
    normalize = getattr(features, "normalize", "none") or "none"
    tokenizer = getattr(features, "tokenizer", None)
    if tokenizer:
        rule = f"{TOKENS} {tokenizer}" + ("" if normalize == "none" else f" {normalize}")
        return CarriesTokenizer(rule + "\n" + json.dumps(_word_options(features), ensure_ascii=False,
                                                          sort_keys=True), str(tokenizer))
    if analyzer is None or analyzer == "char_wb":
        kind = "visible"
    elif analyzer == "char":
        kind = f"chars {int(getattr(features, 'ngram_min', 1) or 1)}"
    else:
        kind = WORD
    rule = kind if normalize == "none" else f"{kind} {normalize}"
    return rule + _word_extras(features) if kind == WORD else rule


def rules_before(rule: str) -> list[str]:
    """The rules earlier versions read rows by where today's is ``rule``: the
    word analyzer's for every analyzer, then a tokenizer of the user's handed
    every text not blank (``visible``), training those it read no token from."""
    first = rule.partition("\n")[0].split()
    before = [WORD]
    if first and first[0] == TOKENS:
        before.append("visible" + "".join(f" {n}" for n in first[2:]))
    return [r for r in before if r != rule]


def _word_extras(features) -> str:
    """The word options that make a text with tokens read no term: stop words, MIN ≥ 2."""
    extras = _word_options(features)
    if not extras["stop"] and extras["least"] <= 1:
        return ""
    return "\n" + json.dumps(extras, ensure_ascii=False, sort_keys=True)


def _word_options(features) -> dict:
    """The fewest tokens a text needs (``--ngram-range``'s MIN), the text's case as
    the tokens are read, and the stop words as they match them."""
    stop = getattr(features, "stop_words", None)
    if isinstance(stop, str) and stop != "english":   # a file's name: its words are read first (config.py)
        raise RuntimeError(f"stop words {stop!r} reached the empty_text rule unread")
    words = sorted(ENGLISH) if stop == "english" else sorted(set(stop)) if stop else []
    least = int(getattr(features, "ngram_min", 1) or 1)
    lowering = getattr(features, "lowering", None)   # a run's features: its format's lower-casing
    text_case = lowering if lowering is not None else bool(getattr(features, "lowercase", True))
    if words and getattr(features, "version", 3) >= 3:   # read as the text is (tokenize.stop_table)
        words = _normalized(pa.array(words, pa.string()), getattr(features, "normalize", "none") or "none")
        words = sorted(set(_cased(words, text_case).to_pylist()))
    # Runs of feature format 2 matched stop words as written (FittedFeatures._stop_table).
    return {"least": least, "case": text_case, "stop": words}


def usable(texts: pa.Array, rule: str = WORD) -> pa.Array:
    """Which of ``texts`` (strings, no nulls) the analyzer of ``rule`` reads a term from."""
    return usable_tokens(texts, rule)[0]


def tokens_made_by(spec: str, normalize: str, case) -> str:
    """What token lists were made by: tokenizer ``spec`` handed the texts normalised by
    ``normalize`` and cased by ``case`` (``features/tokenize.py: prepare``'s ``lowercase``).
    Lists made otherwise are not another run's tokens: the features tokenise again."""
    return json.dumps([str(spec), normalize or "none", case])


def usable_tokens(texts: pa.Array, rule: str = WORD) -> tuple[pa.Array, pa.Field | None, pa.Array | None]:
    """:func:`usable`, and for a tokenizer of the user's (``tokens SPEC``) the token
    lists it returned for each text (a blank one: none), with the field that names them
    (:data:`TOKENS_COLUMN`, its metadata :func:`tokens_made_by`): the features read these
    lists rather than run the tokenizer a second time. (mask, None, None) for the other rules."""
    rule, _, extras = rule.partition("\n")
    if rule.startswith(TOKENS + " "):
        _, spec, *normalize = rule.split()
        options = json.loads(extras)
        keep, lists = _tokens_left(_normalized(texts, normalize[0] if normalize else "none"), spec, options)
        made_by = tokens_made_by(spec, normalize[0] if normalize else "none", options["case"])
        return keep, pa.field(TOKENS_COLUMN, lists.type, metadata={MADE_BY: made_by}), lists
    return _usable(texts, rule, extras), None, None


def _usable(texts: pa.Array, rule: str, extras: str) -> pa.Array:
    kind, least, normalize = _parts(rule)
    texts = _normalized(texts, normalize)
    if kind == WORD:
        tokens = pc.match_substring_regex(texts, _TOKEN_RE)
        return _words_left(texts, tokens, json.loads(extras)) if extras else tokens
    visible = pc.match_substring_regex(texts, _VISIBLE_RE)
    if least <= 1:
        return visible
    collapsed = pc.replace_substring_regex(texts, rf"[{_SPACE}]{{2,}}", " ")   # scikit-learn's \s\s+ → " "
    return pc.and_(visible, pc.greater_equal(pc.utf8_length(collapsed), least))


def _words_left(texts: pa.Array, tokens: pa.Array, extras: dict) -> pa.Array:
    """Of the rows with a token, those that keep ``least`` tokens once the stop words
    are out: the tokenizer's tokens (runs of two or more word characters), read
    lower-cased as the features read them, and the stop words as they match them."""
    keep = np.asarray(tokens.to_numpy(zero_copy_only=False), bool).copy()
    rows = np.flatnonzero(keep)
    if not len(rows):
        return tokens
    some = texts.take(pa.array(rows))
    some = some.combine_chunks() if isinstance(some, pa.ChunkedArray) else some
    words = pc.split_pattern_regex(_cased(some, extras["case"]), _NOT_WORD_RE)
    flat, parent = pc.list_flatten(words), pc.list_parent_indices(words)
    is_token = pc.greater_equal(pc.utf8_length(flat), MIN_CHARS)
    if extras["stop"]:
        is_token = pc.and_(is_token, pc.invert(pc.is_in(flat, value_set=pa.array(extras["stop"], pa.string()))))
    counted = parent.filter(is_token).to_numpy(zero_copy_only=False)
    keep[rows] = np.bincount(counted, minlength=len(rows)) >= extras["least"]
    return pa.array(keep)


def _tokens_left(texts: pa.Array, spec: str, extras: dict) -> tuple[pa.Array, pa.LargeListArray]:
    """Which texts keep ``least`` of the registered tokenizer ``spec``'s tokens once the
    stop words are out, the tokenizer handed each text as the features hand it
    (normalised, then cased), a piece of rows at a time; and its tokens of every text,
    one list a text. A blank text is never handed to it."""
    texts = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    keep = np.asarray(pc.match_substring_regex(texts, _VISIBLE_RE).to_numpy(zero_copy_only=False), bool).copy()
    rows = np.flatnonzero(keep)
    lengths = np.zeros(len(texts), np.int64)
    made: list[pa.Array] = []
    stop = pa.array(extras["stop"], pa.string()) if extras["stop"] else None
    for start in range(0, len(rows), PIECE_ROWS):
        piece = rows[start:start + PIECE_ROWS]
        offsets, tokens = tokens_of(spec, _cased(texts.take(pa.array(piece)), extras["case"]))
        lengths[piece] = np.diff(offsets)
        made.append(tokens)
        owner = np.repeat(np.arange(len(piece)), np.diff(offsets))
        if stop is not None and len(tokens):
            owner = owner[pc.invert(pc.is_in(tokens, value_set=stop)).to_numpy(zero_copy_only=False)]
        keep[piece] = np.bincount(owner, minlength=len(piece)) >= extras["least"]
    offsets = np.zeros(len(texts) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    tokens = pa.concat_arrays(made) if made else pa.array([], pa.string())
    return pa.array(keep), pa.LargeListArray.from_arrays(pa.array(offsets), tokens)


def _normalized(texts: pa.Array, normalize: str) -> pa.Array:
    # as features/tokenize.prepare reads the text: normalised, then lower-cased
    return texts if normalize == "none" else pc.utf8_normalize(texts, normalize.upper())


def _cased(texts: pa.Array, lowering) -> pa.Array:
    if lowering == PER_CHARACTER:
        return pc.utf8_lower(texts)
    return lower(texts) if lowering else texts


def _parts(rule: str) -> tuple[str, int, str]:
    """``rule`` as (kind, the fewest characters, the normalisation)."""
    words = rule.split()
    least = int(words.pop(1)) if words[0] == "chars" else 1
    return words[0], least, words[1] if len(words) > 1 else "none"


__all__ = ["MADE_BY", "TOKENS", "TOKENS_COLUMN", "WORD", "rules_before", "text_rule", "tokens_made_by", "usable",
           "usable_tokens"]
