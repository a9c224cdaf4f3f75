"""Text → tokens, by one compiled pass over Arrow's UTF-8 buffers
(:mod:`.kernels`).

A token is a maximal run of word characters (Unicode letters and numbers,
and ``_``) of at least two characters, after lower-casing — scikit-learn's
default ``token_pattern``, so TF-IDF features match what ``lancetnic``
users had. No Python object is made per token or per row.

* :func:`text_buffers` — an Arrow string array's bytes and offsets as numpy
  views, lower-cased first when asked: what every kernel reads.
* :func:`tokenize` / :func:`terms_of` — tokens (and bigrams) as an Arrow
  string array with the row of each: for fitting a vocabulary.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


MIN_CHARS = 2


def compiled_kernels():
    """The compiled kernels, imported on first use: loading them (numba and
    LLVM, ~140 MiB) is for processes that tokenise, not for a trainer that
    only reads shards."""
    from . import kernels as compiled

    return compiled


@dataclass
class Terms:
    """The terms of a batch of rows: ``terms[i]`` came from row ``rows[i]``.

    Unigrams come first, in text order; bigrams (if any) follow them."""

    terms: pa.StringArray
    rows: np.ndarray  # int64
    n_rows: int


def _flat(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def text_buffers(texts: pa.Array | pa.ChunkedArray, *, lowercase: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(UTF-8 bytes as uint8, int64 offsets of each string into them) — views, no copy of the text
    beyond the lower-cased one. Nulls read as empty strings."""
    texts = _flat(texts)
    if lowercase:
        texts = pc.utf8_lower(texts)
    if texts.null_count:
        texts = pc.fill_null(texts, "")
    if not pa.types.is_large_string(texts.type):
        texts = texts.cast(pa.string())
    bufs = texts.buffers()
    width = 8 if pa.types.is_large_string(texts.type) else 4
    offsets = np.frombuffer(bufs[1], np.int64 if width == 8 else np.int32, len(texts) + 1, texts.offset * width)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None and len(bufs[2]) else np.zeros(1, np.uint8)
    return data, offsets.astype(np.int64)


def tokenize(texts: pa.Array | pa.ChunkedArray, *, lowercase: bool = True, min_len: int = MIN_CHARS) -> Terms:
    """Split texts into word tokens; keeps order within each row."""
    data, offsets = text_buffers(texts, lowercase=lowercase)
    k = compiled_kernels()
    buf, tok_offsets, rows = k.token_spans(data, offsets, k.word_table(), max(min_len, 1))
    terms = pa.Array.from_buffers(pa.string(), len(rows),
                                  [None, pa.py_buffer(tok_offsets.astype(np.int32)), pa.py_buffer(buf)])
    return Terms(terms, rows, len(offsets) - 1)


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
