"""Text → tokens, by one compiled pass over Arrow's UTF-8 buffers
(:mod:`.kernels`).

A token is a maximal run of word characters (Unicode letters and numbers,
and ``_``) of at least two characters, after lower-casing — scikit-learn's
default ``token_pattern``, so TF-IDF features match what ``lancetnic``
users had. No Python object is made per token or per row.

* :func:`text_buffers` — an Arrow string array's bytes and offsets as numpy
  views, Unicode-normalised (``normalize="nfkc"``) then lower-cased first
  when asked: what every kernel reads.
* :func:`tokenize` / :func:`terms_of` — tokens (and word n-grams, stop words
  left out) as an Arrow string array with the row of each: for fitting a
  vocabulary.
* :func:`texts_of` — a reader's table's texts, with the token lists a
  registered tokenizer already gave them there (:class:`TokenizedTexts`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..data.usable import MADE_BY, TOKENS_COLUMN, tokens_made_by
from ..errors import UserError
from ..textcase import PER_CHARACTER, lower
from ..tokenizers import tokens_of

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


def prepare(texts: pa.Array | pa.ChunkedArray, *, lowercase: bool = True, normalize: str = "none") -> pa.Array:
    """Texts as the tokenizers read them: Unicode-normalised (``"nfkc"``,
    ``"nfc"``, …; ``"none"``: as they are), then lower-cased — in that order,
    so a full-width "Ａ" becomes "a". One vectorised call each."""
    texts = _flat(texts)
    if normalize != "none":
        texts = pc.utf8_normalize(texts, normalize.upper())
    if lowercase == PER_CHARACTER:   # a run's features of format 2 or 1 (vectorize.VERSION): as they were read
        return pc.utf8_lower(texts)
    return lower(texts) if lowercase else texts


def text_buffers(texts: pa.Array | pa.ChunkedArray, *, lowercase: bool = True,
                 normalize: str = "none") -> tuple[np.ndarray, np.ndarray]:
    """(UTF-8 bytes as uint8, int64 offsets of each string into them) — views, no copy of the text
    beyond the prepared one (:func:`prepare`). Nulls read as empty strings."""
    texts = prepare(texts, lowercase=lowercase, normalize=normalize)
    if texts.null_count:
        texts = pc.fill_null(texts, "")
    if not pa.types.is_large_string(texts.type):
        texts = texts.cast(pa.string())
    bufs = texts.buffers()
    width = 8 if pa.types.is_large_string(texts.type) else 4
    offsets = np.frombuffer(bufs[1], np.int64 if width == 8 else np.int32, len(texts) + 1, texts.offset * width)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None and len(bufs[2]) else np.zeros(1, np.uint8)
    return data, offsets.astype(np.int64)


def stop_table(words: list[str] | None, lowercase: bool | str = True, normalize: str = "none"
               ) -> tuple[np.ndarray, np.ndarray]:
    """(keys, values) of the stop words' token keys: the set the kernels look
    each token up in (an empty table when there are none). The words are read
    as the text is (normalised, lower-cased): "Movie" or "ＦＩＬＭ" would match no token."""
    k = compiled_kernels()
    if not words:
        return np.zeros(2, np.uint64), np.full(2, -1, np.int64)
    data, offsets = text_buffers(pa.array(list(words), pa.string()), lowercase=lowercase, normalize=normalize)
    n = len(offsets) - 1
    return k.build_table(k.whole_hashes(data, offsets, np.ones(n, np.uint8)), np.zeros(n, np.int64))


def tokenize(texts: pa.Array | pa.ChunkedArray, *, lowercase: bool = True, min_len: int = MIN_CHARS,
             normalize: str = "none") -> Terms:
    """Split texts into word tokens; keeps order within each row."""
    data, offsets = text_buffers(texts, lowercase=lowercase, normalize=normalize)
    k = compiled_kernels()
    buf, tok_offsets, rows = k.token_spans(data, offsets, k.word_table(), max(min_len, 1))
    terms = pa.Array.from_buffers(pa.string(), len(rows),
                                  [None, pa.py_buffer(tok_offsets.astype(np.int32)), pa.py_buffer(buf)])
    return Terms(terms, rows, len(offsets) - 1)


def add_bigrams(tokens: Terms) -> Terms:
    """Append each row's adjacent token pairs ("new york") to its unigrams."""
    return add_ngrams(tokens, 1, 2)


def add_ngrams(tokens: Terms, min_n: int, max_n: int) -> Terms:
    """A row's word n-grams, ``min_n`` ≤ n ≤ ``max_n``, its tokens joined by
    one space ("new york city"): unigrams (if ``min_n == 1``) first, then the
    pairs, then the triples… Vectorised: n shifted slices joined at once."""
    t, r = tokens.terms, tokens.rows
    terms, rows = ([t], [r]) if min_n == 1 else ([], [])
    for n in range(max(min_n, 2), max_n + 1):
        if len(t) < n:
            break
        m = len(t) - n + 1
        same_row = r[:m] == r[n - 1:]   # rows are ascending: first and last token in one row
        joined = pc.binary_join_element_wise(*[t.slice(i, m) for i in range(n)], " ").filter(pa.array(same_row))
        terms.append(joined.cast(pa.string()))
        rows.append(r[:m][same_row])
    if not terms:
        return Terms(pa.array([], pa.string()), np.zeros(0, np.int64), tokens.n_rows)
    return Terms(pa.concat_arrays(terms) if len(terms) > 1 else terms[0],
                 np.concatenate(rows) if len(rows) > 1 else rows[0], tokens.n_rows)


def drop_stop_words(tokens: Terms, stop_words: list[str] | None, lowercase: bool | str = True,
                    normalize: str = "none") -> Terms:
    """``tokens`` without the stop words (before n-grams are formed, as scikit-learn
    does), the words read as the text was (normalised, lower-cased)."""
    if not stop_words or not len(tokens.terms):
        return tokens
    words = prepare(pa.array(list(stop_words), pa.string()), lowercase=lowercase, normalize=normalize)
    keep = pc.invert(pc.is_in(tokens.terms, value_set=words))
    return Terms(tokens.terms.filter(keep), tokens.rows[keep.to_numpy(zero_copy_only=False)], tokens.n_rows)


@dataclass(frozen=True)
class TokenizedTexts:
    """Texts, and the token lists a registered tokenizer gave them when the reader
    asked which rows hold a term (``data/usable.py``), made as ``made_by``
    (:func:`~lancetnic_flow.data.usable.tokens_made_by`) says. Sliced and filtered as
    the texts are; :func:`custom_tokens` reads the lists rather than run the tokenizer again."""

    texts: pa.Array | pa.ChunkedArray
    lists: pa.Array | pa.ChunkedArray
    made_by: str

    def __len__(self) -> int:
        return len(self.texts)

    def slice(self, offset: int = 0, length: int | None = None) -> "TokenizedTexts":
        """Rows ``offset`` to ``offset + length`` (to the end when None)."""
        return TokenizedTexts(self.texts.slice(offset, length), self.lists.slice(offset, length), self.made_by)

    def filter(self, mask: pa.Array) -> "TokenizedTexts":
        """The rows ``mask`` keeps."""
        return TokenizedTexts(self.texts.filter(mask), self.lists.filter(mask), self.made_by)


def texts_of(table: pa.Table, tokenizer: str | None = None, *, lowercase: bool | str = True,
             normalize: str = "none") -> pa.ChunkedArray | TokenizedTexts:
    """The ``text`` column of a reader's table, with its rows' token lists when the reader
    made them by ``tokenizer`` as these options hand it the texts (:class:`TokenizedTexts`)."""
    texts = table["text"]
    if not tokenizer or TOKENS_COLUMN not in table.column_names:
        return texts
    made_by = (table.schema.field(TOKENS_COLUMN).metadata or {}).get(MADE_BY, b"").decode()
    if made_by != tokens_made_by(tokenizer, normalize, lowercase):
        return texts
    return TokenizedTexts(texts, table[TOKENS_COLUMN], made_by)


def custom_tokens(texts: pa.Array | pa.ChunkedArray | TokenizedTexts, tokenizer: str, *,
                  lowercase: bool | str = True, normalize: str = "none") -> Terms:
    """The tokens of a registered tokenizer (``lancetnic_flow/tokenizers.py``), with the row of
    each: those the reader's lists hold when ``texts`` carries lists made by these options."""
    if isinstance(texts, TokenizedTexts):
        if texts.made_by == tokens_made_by(tokenizer, normalize, lowercase):
            lists = _flat(texts.lists)
            lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
            return Terms(pc.list_flatten(lists), np.repeat(np.arange(len(lists)), lengths), len(lists))
        texts = texts.texts
    prepared = pc.fill_null(prepare(texts, lowercase=lowercase, normalize=normalize), "")
    offsets, tokens = tokens_of(tokenizer, prepared)
    return Terms(tokens, np.repeat(np.arange(len(offsets) - 1), np.diff(offsets)), len(offsets) - 1)


def terms_of(texts: pa.Array | pa.ChunkedArray | TokenizedTexts, ngrams: int = 1, *, lowercase: bool = True, ngram_min: int = 1,
             stop_words: list[str] | None = None, normalize: str = "none", tokenizer: str | None = None) -> Terms:
    """Word n-grams, ``ngram_min`` ≤ n ≤ ``ngrams`` (unigrams, plus bigrams
    when ``ngrams == 2``), of the built-in or a registered tokenizer's tokens."""
    if tokenizer:
        toks = custom_tokens(texts, tokenizer, lowercase=lowercase, normalize=normalize)
        if len(toks.terms) and pc.any(pc.match_substring(toks.terms, " ")).as_py():
            raise UserError(f"tokenizer {tokenizer!r} returned a token with a space: a fitted vocabulary "
                            "keys n-grams by their words joined with spaces",
                            "return tokens without spaces, or use {features.mode} hashing")
    else:
        toks = tokenize(texts.texts if isinstance(texts, TokenizedTexts) else texts, lowercase=lowercase,
                        normalize=normalize)
    toks = drop_stop_words(toks, stop_words, lowercase, normalize)
    return add_ngrams(toks, ngram_min, ngrams) if (ngrams, ngram_min) != (1, 1) else toks
