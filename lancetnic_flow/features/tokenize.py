"""Text → tokens, vectorised with pyarrow.compute.

A partition's texts become one flat array of terms and, beside it, the row
each term came from. No Python object is made per token or per row: the
kernels run over Arrow buffers. Semantics follow scikit-learn's default
``token_pattern`` (lowercase, runs of 2+ word characters) so TF-IDF features
match what ``lancetnic`` users had.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# RE2 classes: letters, digits and '_' are word characters, in every script.
_NON_WORD = r"[^\pL\pN_]+"


@dataclass
class Terms:
    """The terms of a batch of rows: ``terms[i]`` came from row ``rows[i]``.

    Unigrams come first, in text order; bigrams (if any) follow them."""

    terms: pa.StringArray
    rows: np.ndarray  # int64
    n_rows: int


def _flat(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def tokenize(texts: pa.Array | pa.ChunkedArray, *, lowercase: bool = True, min_len: int = 2) -> Terms:
    """Split texts into word tokens; keeps order within each row."""
    texts = _flat(texts)
    n = len(texts)
    if lowercase:
        texts = pc.utf8_lower(texts)
    lists = _flat(pc.split_pattern_regex(texts, pattern=_NON_WORD))
    offsets = lists.offsets.to_numpy(zero_copy_only=False)
    offsets = offsets - offsets[0]
    flat = _flat(lists.flatten())
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    if len(flat):
        # Splitting leaves "" at the ends of rows; min_len >= 1 drops them.
        keep = pc.greater_equal(pc.utf8_length(flat), max(min_len, 1))
        flat = flat.filter(keep)
        rows = rows[keep.to_numpy(zero_copy_only=False)]
    return Terms(flat.cast(pa.string()), rows, n)


def add_bigrams(tokens: Terms) -> Terms:
    """Append each row's adjacent token pairs ("new york") to its unigrams."""
    t, r = tokens.terms, tokens.rows
    if len(t) < 2:
        return tokens
    same_row = r[:-1] == r[1:]
    pairs = pc.binary_join_element_wise(t.slice(0, len(t) - 1), t.slice(1), " ").filter(pa.array(same_row))
    terms = pa.concat_arrays([t, pairs.cast(pa.string())])
    rows = np.concatenate([r, r[:-1][same_row]])
    return Terms(terms, rows, tokens.n_rows)


def terms_of(texts: pa.Array | pa.ChunkedArray, ngrams: int = 1, *, lowercase: bool = True) -> Terms:
    """Unigrams, plus bigrams when ``ngrams == 2``."""
    toks = tokenize(texts, lowercase=lowercase)
    return add_bigrams(toks) if ngrams >= 2 else toks
